"""``%%agent --map NAME``: the cell body as a prompt template over every row of the DataFrame ``NAME``.

A thin adapter like the rest of the magics: parse, look the names up in the notebook, start
``agent_map_async`` on the session's loop thread, show a ``MapView``, wait like a waiting
``%%agent`` cell (ipykernel 6 pumps the kernel so Stop is heard; 7 awaits), bind the frame to
``--into`` (default ``NAME_result``), and leave a static record. ■ or Stop cancels the map: rows in
flight end ``pending`` and the frame is bound anyway. By default the map checkpoints into the
session's store, so running the cell again only does the rows not yet done.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any, cast

from IPython.core.error import UsageError
from IPython.display import display as _display

from tinyagents_nb.harness import CancellationToken, ConfigurationError, RunLimits, TinyAgentsError
from tinyagents_nb.harness.batch import Executor, MapCheckpoint, MapProgress, agent_map_async
from tinyagents_nb.widgets import MapView, map_record

from ._budget import session_budget
from ._session import NotebookSession
from ._waiting import Delivery

__all__ = ["MapCell", "finish_map", "is_map", "start_map", "wait_map_async", "wait_map_sync"]

_POLL_S = 0.05
display: Callable[..., Any] = _display
_EXECUTORS = ("local", "batch", "ray", "dask")


@dataclass(kw_only=True)
class MapCell:
    """A started map: its result future, Stop token, view and the variable it binds."""

    future: Future[Any]
    token: CancellationToken
    view: MapView | None
    progress: MapProgress
    into: str
    checkpoint: MapCheckpoint | None
    handle: Any = None
    """The view's display handle: the static record replaces the live view in the saved notebook."""


def is_map(line: str) -> bool:
    """Whether a ``%%agent`` line asks for a map (cheap: the full parse comes after)."""
    return "--map" in line.split() or any(word.startswith("--map=") for word in line.split())


def _lookup(user_ns: dict[str, Any], name: str, what: str) -> Any:
    if not name.isidentifier():
        raise UsageError(f"{what} {name!r} is not a Python name")
    if name not in user_ns:
        raise UsageError(f"{what} {name!r} is not defined in the notebook")
    return user_ns[name]


def start_map(session: NotebookSession, shell: Any, args: argparse.Namespace, cell: str, *, widgets: bool) -> MapCell:
    """Validate the cell, start the map on the session's loop, show its view."""
    user_ns: dict[str, Any] = shell.user_ns if shell is not None else {}
    name: str = args.map
    data = _lookup(user_ns, name, "--map")
    into = args.into or f"{name}_result"
    if not into.isidentifier():
        raise UsageError(f"--into {into!r} is not a valid Python variable name")
    output = _lookup(user_ns, args.output, "--output") if args.output else None
    if output is not None and not isinstance(output, type):
        raise UsageError(f"--output {args.output!r} must be a class (a pydantic model), got {type(output).__name__}")
    executor = args.executor or "local"
    if executor not in _EXECUTORS:
        raise UsageError(f"--executor must be one of {', '.join(_EXECUTORS)}, got {executor!r}")
    if args.background:
        raise UsageError("--map cells always wait (the result is bound when the map ends); drop --background")
    prompt = cell.strip()
    if not prompt:
        raise UsageError(
            "the prompt template is empty: write it below the %%agent --map line, e.g. Classify: {{review}}"
        )
    try:
        model = session.resolve_model(args.model)
    except TinyAgentsError as exc:
        raise UsageError(str(exc)) from None
    path = session.store_path
    checkpoint = MapCheckpoint(path) if path and path != ":memory:" else None
    parent = session.context.with_cancellation(CancellationToken())
    parent.budgets = session_budget(session.session_max_cost_usd, "allow")
    token = CancellationToken()
    progress = MapProgress(name)
    limits = RunLimits(max_cost_usd=args.budget) if args.budget is not None else None
    coro = agent_map_async(
        data,
        prompt,
        model=model,
        output=output,
        concurrency=args.concurrency or 16,
        executor=cast("Executor", executor),
        checkpoint=checkpoint,
        limits=limits,
        name=name,
        context=parent,
        cancellation=token,
        progress=progress,
    )
    view = MapView(progress, on_stop=lambda: _stop(token)) if widgets else None
    handle = None
    if view is not None:
        handle = display(view, display_id=True)
        view.start()
    future = session.loop.submit(coro)
    return MapCell(
        future=future, token=token, view=view, progress=progress, into=into, checkpoint=checkpoint, handle=handle
    )


def _stop(token: CancellationToken) -> None:
    token.cancel("Stop")


def wait_map_sync(cell: MapCell, *, delivery: Delivery) -> None:
    """Block until the map ends; ■ cancels it (rows in flight end pending), pumping the kernel on 6.x."""
    if delivery == "pump":
        from jupyter_ui_poll import ui_events

        with ui_events() as poll:
            _wait(cell, lambda: poll(10))
    else:
        _wait(cell, None)


def _wait(cell: MapCell, pump: Any) -> None:
    while not cell.future.done():
        try:
            if pump is not None:
                pump()
            wait([cell.future], timeout=_POLL_S)
        except KeyboardInterrupt:
            _interrupt(cell)


async def wait_map_async(cell: MapCell) -> None:
    """Await the map on the kernel's loop (7.x): the view's Stop is heard; ■ cancels the map."""
    done = asyncio.wrap_future(cell.future)
    while not done.done():
        try:
            await asyncio.wait([done], timeout=0.1)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            _interrupt(cell)


def _interrupt(cell: MapCell) -> None:
    if cell.view is not None:
        cell.view.press_stop()
    else:
        cell.token.cancel("interrupted")
    print("interrupted: stopping the map (rows in flight stay pending; run the cell again to resume)")


def finish_map(cell: MapCell, shell: Any) -> Any:
    """Bind the frame, show the record; a bad input becomes a one-line ``UsageError``."""
    try:
        frame = cell.future.result()
    except ConfigurationError as exc:
        raise UsageError(str(exc) + (f" (hint: {exc.hint})" if getattr(exc, "hint", None) else "")) from None
    finally:
        if cell.view is not None:
            cell.view.finish()
        if cell.checkpoint is not None:
            cell.checkpoint.close()
    if shell is not None:
        shell.user_ns[cell.into] = frame
    snap = cell.progress.snapshot()
    if snap.skipped:
        print(f"skipped {snap.skipped:,} rows already done (from the checkpoint)")
    record = map_record(snap, into=cell.into)
    if cell.handle is not None:
        cell.handle.update(record, raw=True)  # the live view gives way to the record that stays in the file
    else:
        display(record, raw=True)
    return None
