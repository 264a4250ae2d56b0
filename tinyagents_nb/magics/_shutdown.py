"""Kernel ▸ Shut Down (or Restart) mid-run: the runs stop and leave their records before the kernel goes.

A frontend ends a kernel with a ``shutdown_request`` on the control channel; jupyter_client (and so
Jupyter Server) interrupts the kernel first, then asks, then waits ``shutdown_wait_time`` (5 s by
default; SIGTERM comes at half of it) before killing it. Left alone, the kernel would exit with its runs mid-stream: their
dashboards would keep saying "● running" beside a live Stop button (ipywidgets marks views
disconnected on a restart but not after a shut-down), and the saved notebook would keep that.

So the request is held while every active run is cancelled and, for at most ``GRACE_S``, until
their records have replaced their dashboards; then the kernel's own handler runs. (On a restart
JupyterLab drops what the old kernel sends meanwhile; its views then show the disconnected note.) Each run's
record says why it stopped (``SHUTDOWN`` or ``RESTART``), even when the interrupt that came first
already cancelled it as "interrupted".
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Sequence
from concurrent.futures import wait
from typing import Any, Final

from ._handle import NotebookRun

__all__ = ["GRACE_S", "RESTART", "SHUTDOWN", "install_shutdown_hook", "stop_for_exit", "uninstall_shutdown_hook"]

SHUTDOWN: Final = "the kernel was shut down"
RESTART: Final = "the kernel restarted"
GRACE_S: Final = 2.0
"""How long the kernel's exit waits for the records: jupyter_client sends SIGTERM after half of its
``shutdown_wait_time`` (2.5 s by default), and the kernel's own shutdown needs some of that."""

_REQUEST: Final = "shutdown_request"
_JUST_NOW_S: Final = 2.0
"""An interrupt this recent before the shut-down request was the shut-down's own."""


def stop_for_exit(runs: Sequence[NotebookRun], reason: str, *, grace_s: float = GRACE_S) -> list[NotebookRun]:
    """Cancel ``runs`` because the kernel is going away; wait up to ``grace_s`` for their records.

    Returns:
        The runs whose record was not shown in time (they end with the kernel).
    """
    for run in runs:
        run.ended_by = reason
        run.cancel(reason)
    futures = [run.future for run in runs if run.future is not None]
    if futures:
        wait(futures, timeout=grace_s)
    return [run for run in runs if not run.done]


class _ShutdownHook:
    """The kernel's ``shutdown_request`` handler, preceded by ``stop_for_exit`` of the active runs."""

    def __init__(self, inner: Callable[..., Any], runs: Callable[[], Sequence[NotebookRun]]) -> None:
        self.inner = inner
        self._runs = runs

    async def __call__(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        try:
            restart = bool((parent.get("content") or {}).get("restart"))
            reason = RESTART if restart else SHUTDOWN
            runs = list(self._runs())
            active = [run for run in runs if run.mode is not None and not run.done]
            if active:  # on a worker thread: the loop this runs on (control or shell) keeps serving meanwhile
                await asyncio.get_running_loop().run_in_executor(None, lambda: stop_for_exit(active, reason))
            _say_again(runs, reason, active)
        except Exception:  # never hold the kernel's own shutdown up
            pass
        result = self.inner(stream, ident, parent)
        if inspect.isawaitable(result):
            await result


def _say_again(runs: Sequence[NotebookRun], reason: str, stopped: Sequence[NotebookRun] = ()) -> None:
    """Runs the shut-down's own interrupt already stopped: their records say why again, with ``reason``.

    jupyter_client interrupts the kernel just before it asks it to shut down, and an idle kernel's
    ■ stops a background run (and writes its record) in a fraction of a second: that record would
    say "interrupted" for a run the shut-down ended. The ``stopped`` runs (``stop_for_exit`` just set
    their reason) are sent again too: the interrupt may have shown a run's record in the moment
    between its end and its future resolving, when it still counted as active.
    """
    now = time.monotonic()
    for run in runs:
        ended = run.ended_at
        recent = run.stop_reason == "interrupted" and ended is not None and now - ended <= _JUST_NOW_S
        if not recent and run not in stopped:
            continue
        run.ended_by = reason
        again = getattr(run.view, "show_record_again", None)
        if callable(again):
            again()


def install_shutdown_hook(shell: Any, runs: Callable[[], Sequence[NotebookRun]]) -> bool:
    """Stop the active ``runs()`` before the kernel handles a shutdown request; returns whether it could.

    Both tables are wrapped: frontends send the request on the control channel, older ones on shell.
    """
    kernel = getattr(shell, "kernel", None)
    hooked = False
    for table in ("control_handlers", "shell_handlers"):
        handlers: Any = getattr(kernel, table, None)
        inner = handlers.get(_REQUEST) if isinstance(handlers, dict) else None
        if inner is None:
            continue
        if not isinstance(inner, _ShutdownHook):
            handlers[_REQUEST] = _ShutdownHook(inner, runs)
        hooked = True
    return hooked


def uninstall_shutdown_hook(shell: Any) -> None:
    """Put back the kernel's own handlers."""
    kernel = getattr(shell, "kernel", None)
    for table in ("control_handlers", "shell_handlers"):
        handlers: Any = getattr(kernel, table, None)
        current = handlers.get(_REQUEST) if isinstance(handlers, dict) else None
        if isinstance(current, _ShutdownHook):
            handlers[_REQUEST] = current.inner
