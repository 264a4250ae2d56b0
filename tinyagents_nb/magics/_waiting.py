"""How a waiting ``%%agent`` cell keeps hearing the dashboard's buttons (and ■) while it waits.

A kernel handles one execute request at a time, and a widget click is a shell message like any
other, so a cell that simply blocks hears nothing until it ends. Measured (see
docs/jupyter/execution-modes.md), no single remedy covers both ipykernel majors:

- **ipykernel 7.x** handles comm messages while a cell *awaits* on the kernel's loop. An input
  transformer (``agent_cell_transformer``) turns a waiting ``%%agent`` cell into
  ``await magics.agent_cell_async(line, body)``, so the kernel runs it as a top-level-await cell.
  ■ cancels that coroutine; it catches the cancel, stops the run cooperatively and waits for its end.
  Another (``agent_wait_transformer``) does the same for each top-level ``%agent wait …`` line of a
  cell (there ■ only stops the wait: that cell did not start the runs), and for ``%agent fix`` and
  ``%agent explain``, whose runs then wait as a ``%%agent`` cell's do.
- **ipykernel 6.x** never interleaves messages with an execute request, even an awaiting one, so
  the waiting (synchronous) cell pumps the kernel itself: ``jupyter_ui_poll`` runs the kernel's
  ``do_one_iteration`` (comm messages are handled; execute requests from Run All are deferred and
  replayed in order after the cell). ■ raises ``KeyboardInterrupt`` in the cell, as usual.
- Anywhere else (plain IPython, a magic called from code on 7.x) the cell just waits; the dashboard
  then says "press ■ to stop" instead of offering buttons that would do nothing.
"""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
import threading
import time
import tokenize
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import FrameType
from typing import Any, Literal

from IPython.core.inputtransformer2 import make_tokens_by_line

from tinyagents_nb.harness import AgentRun

from ._handle import NotebookRun

__all__ = [
    "UNREACHABLE",
    "Delivery",
    "Interrupts",
    "WaitOutcome",
    "agent_cell_transformer",
    "agent_wait_transformer",
    "interrupts_counted",
    "kernel_major",
    "said_in",
    "sync_delivery",
    "wait_async",
    "wait_runs",
    "wait_runs_async",
    "wait_sync",
]

Delivery = Literal["async", "pump", "none"]
WaitOutcome = Literal["ended", "timeout", "interrupted"]
"""How ``%agent wait`` ended: every run ended, its ``--timeout`` passed, or ■ stopped the wait."""
UNREACHABLE = "press ■ (interrupt the kernel) to stop this run"
"""What the dashboard says instead of live buttons when clicks cannot reach a waiting cell."""

_POLL_S = 0.02
_TICK_S = 0.1


def kernel_major(shell: Any) -> int | None:
    """The ipykernel major version running ``shell``, or ``None`` outside a kernel."""
    if getattr(shell, "kernel", None) is None:
        return None
    version = str(getattr(sys.modules.get("ipykernel"), "__version__", "0"))
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def sync_delivery(shell: Any) -> Delivery:
    """Whether a synchronous waiting cell can hear clicks: by pumping the kernel (6.x) or not at all."""
    return "pump" if kernel_major(shell) == 6 else "none"


def said_in(run: NotebookRun) -> Callable[[str], None]:
    """Where a waiting cell says what ■ did: in the run's own output, which its record replaces."""
    transient = getattr(run.view, "transient", None)
    return transient if callable(transient) else lambda text: print(text, flush=True)


def _interrupted(run: NotebookRun, count: int, say: Callable[[str], None]) -> bool:
    """Handle the ``count``-th ■: cancel, then stop waiting at the second one; returns whether to stop."""
    run.cancel("interrupted")
    if count == 1:
        say("interrupted: stopping the run (interrupt again to stop waiting)")
        return False
    say("stopped waiting; the run is still stopping (await _agent.wait() to see its end)")
    return True


def wait_sync(
    run: NotebookRun,
    future: Future[AgentRun],
    *,
    delivery: Delivery,
    say: Callable[[str], None],
    work: Callable[[], object] | None = None,
    pumping: Callable[[], AbstractContextManager[object]] | None = None,
    interrupts: Interrupts | None = None,
) -> bool:
    """Block the cell until ``future`` resolves, pumping the kernel when ``delivery == "pump"``.

    Args:
        run: The run the cell waits for (■ cancels it).
        future: Resolves when the run ended and its record was shown.
        delivery: How clicks reach this cell (see ``sync_delivery``).
        say: Prints a line in the cell.
        work: Called at each poll, on this (the main) thread: the code the agent runs in the kernel.
        pumping: Entered while the kernel is pumped (after ``jupyter_ui_poll`` took over its
            execute requests), e.g. to see a re-run of this cell arrive.
        interrupts: The ■ counter the caller installed before starting the run (``interrupts_counted``);
            one is installed for the wait otherwise.

    Returns:
        Whether the run ended (``False`` when a second interrupt stopped the wait first).
    """
    with nullcontext(interrupts) if interrupts is not None else interrupts_counted() as counted:
        if delivery == "pump":
            from jupyter_ui_poll import ui_events

            with ui_events() as poll, (pumping or nullcontext)():
                return _wait_loop(run, future, say, _both(lambda: poll(10), work), counted)
        return _wait_loop(run, future, say, work, counted)


def _both(pump: Callable[[], object], work: Callable[[], object] | None) -> Callable[[], object]:
    if work is None:
        return pump

    def both() -> None:
        pump()
        work()

    return both


class Interrupts:
    """SIGINT while a synchronous cell waits, counted here and acted on by its wait loop.

    Raising ``KeyboardInterrupt`` wherever the main thread happens to be can land outside the
    loop's ``try``: in ``jupyter_ui_poll`` entering or leaving, or inside its pump (which runs the
    kernel's ``do_one_iteration`` on a helper thread and is left half-done). In a cell
    ``jupyter_ui_poll`` replayed (a re-run, Run All's next cell on ipykernel 6) that ended the cell
    with a traceback instead of a cooperative stop. A counted interrupt is handled at the loop's
    next turn (within ``_POLL_S``), wherever it arrived. Code the agent runs on the main thread
    (``work``) installs its own handler meanwhile, so ■ still interrupts that code.
    """

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1


@contextmanager
def interrupts_counted() -> Iterator[Interrupts]:
    """While inside, ■ is counted (see ``Interrupts``), in any cell: also one ``jupyter_ui_poll`` replayed.

    A replayed cell is run outside ipykernel's dispatch, which is what installs Python's SIGINT
    handler for a request; this handler covers both. Off the main thread nothing can be installed
    (and no signal arrives there): the count stays 0.
    """
    interrupts = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, interrupts)
    try:
        yield interrupts
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_loop(
    run: NotebookRun,
    future: Future[AgentRun],
    say: Callable[[str], None],
    pump: Callable[[], object] | None,
    interrupts: Interrupts,
) -> bool:
    handled = 0
    while True:
        while handled < interrupts.count:
            handled += 1
            if _interrupted(run, handled, say):
                return False
        try:
            if pump is not None:
                pump()
            future.exception(timeout=_POLL_S)  # raises TimeoutError until it resolved
        except TimeoutError:
            continue
        except KeyboardInterrupt:  # raised by other means (e.g. a handler that code run meanwhile left)
            interrupts.count += 1
            continue
        return True


def wait_runs(
    futures: Sequence[Future[AgentRun]],
    *,
    timeout_s: float | None,
    delivery: Delivery,
    work: Callable[[], object] | None = None,
) -> WaitOutcome:
    """Block until every future resolved (``%agent wait``), pumping the kernel when ``delivery == "pump"``.

    ``work`` is called at each poll on this (the main) thread, as in ``wait_sync``.

    ■ stops the wait and leaves the runs going: unlike a waiting cell, this cell did not start them.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def waited(pump: Callable[[], object] | None, interrupts: Interrupts) -> WaitOutcome:
        try:
            while not interrupts.count:
                if pump is not None:
                    pump()
                _, pending = wait(futures, timeout=_POLL_S)
                if not pending:
                    return "ended"
                if deadline is not None and time.monotonic() >= deadline:
                    return "timeout"
        except KeyboardInterrupt:
            pass
        return "interrupted"

    with interrupts_counted() as interrupts:
        if delivery == "pump":
            from jupyter_ui_poll import ui_events

            with ui_events() as poll:
                return waited(_both(lambda: poll(10), work), interrupts)
        return waited(work, interrupts)


async def wait_async(run: NotebookRun, future: Future[AgentRun], *, say: Callable[[str], None]) -> bool:
    """Await ``future`` on the kernel's loop; a cancel (■) stops the run and keeps waiting for its end.

    It wakes every ``_TICK_S``: the kernel's SIGINT handler only runs when the main thread executes
    Python, and a signal delivered to another thread (the session's, say) leaves an idle loop asleep.
    """
    done = asyncio.wrap_future(future)
    interrupts = 0
    while not done.done():
        try:
            await asyncio.wait([done], timeout=_TICK_S)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            interrupts += 1
            if _interrupted(run, interrupts, say):
                return False
    if not done.cancelled():
        done.exception()  # retrieved: the run's own failure is in its record
    return True


async def wait_runs_async(futures: Sequence[Future[AgentRun]], *, timeout_s: float | None) -> WaitOutcome:
    """``wait_runs`` awaiting on the kernel's loop (ipykernel 7.x), so the runs' buttons keep working.

    ■ (the cell's task cancelled) stops the wait and leaves the runs going. The futures are never
    cancelled here: cancelling a wrapper would cancel the run behind it.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    waiting = [asyncio.wrap_future(future) for future in futures]
    try:
        while pending := [done for done in waiting if not done.done()]:
            left = _TICK_S if deadline is None else min(_TICK_S, deadline - loop.time())
            if left <= 0:
                return "timeout"
            await asyncio.wait(pending, timeout=left)  # woken each tick: see wait_async
        return "ended"
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return "interrupted"
    except KeyboardInterrupt:  # SIGINT landing in this frame rather than as a cancel
        return "interrupted"
    finally:
        for done in waiting:  # a run's own failure is in its record, not an unretrieved-exception warning
            done.add_done_callback(_retrieve)


def _retrieve(done: asyncio.Future[AgentRun]) -> None:
    if not done.cancelled():
        done.exception()


def _waiting_agent_line(first: str, decide: Callable[[list[str]], bool]) -> str | None:
    """The magic line when ``first`` opens a ``%%agent`` cell that waits, else ``None``."""
    stripped = first.strip()
    if not (stripped == "%%agent" or stripped.startswith(("%%agent ", "%%agent\t"))):
        return None
    line = stripped[len("%%agent") :].strip()
    try:
        argv = shlex.split(line)
    except ValueError:
        return None  # the magic reports the bad line itself
    return line if decide(argv) else None


def agent_cell_transformer(decide: Callable[[list[str]], bool]) -> Callable[[list[str]], list[str]]:
    """An IPython cleanup transformer: a waiting ``%%agent`` cell becomes an awaiting Python statement.

    Args:
        decide: Whether a cell whose magic line splits into this argv waits (so it is rewritten).
    """

    def transform(lines: list[str]) -> list[str]:
        if not lines:
            return lines
        line = _waiting_agent_line(lines[0], decide)
        if line is None:
            return lines
        body = "".join(lines[1:])
        # ``{name}`` in the magic line expands as IPython's run_cell_magic would expand it.
        code = (
            f'await get_ipython().magics_manager.registry["AgentMagics"]'
            f".agent_cell_async(get_ipython().var_expand({line!r}), {body!r})\n"
        )
        return [code]

    return transform


_AWAITING = frozenset({"wait", "fix", "explain", "resume"})
"""The ``%agent`` commands that wait for runs, so ``agent_wait_transformer`` makes their lines awaiting ones."""


def _is_wait_line(line: str) -> bool:
    """Whether ``line`` is ``%agent wait|fix|explain|resume …`` (the command's own word, before ``{name}`` expansion)."""
    if not line.startswith(("%agent ", "%agent\t")):
        return False
    try:
        argv = shlex.split(line[len("%agent") :])
    except ValueError:
        return False  # the magic reports the bad line itself
    return bool(argv) and argv[0] in _AWAITING


def _statement_rows(lines: list[str]) -> set[int]:
    """Rows (0-based) holding a whole top-level statement that starts in column 0 with ``%``.

    Tokens, not text, so a ``%agent wait`` line inside a triple-quoted string or an open bracket
    is left alone; a statement continued over several rows (ended by a backslash) is left alone too.
    """
    rows: set[int] = set()
    try:
        logical = make_tokens_by_line(lines)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return rows
    skipped = (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for tokens in logical:
        significant = [token for token in tokens if token.type not in skipped]
        if not significant or significant[0].string != "%" or significant[0].start[1] != 0:
            continue
        row = significant[0].start[0]
        if all(token.start[0] == row for token in significant):
            rows.add(row - 1)
    return rows


def agent_wait_transformer() -> Callable[[list[str]], list[str]]:
    """An IPython cleanup transformer: each top-level ``%agent wait …`` line becomes an awaiting statement.

    Any other line, an indented one (inside a block, where ``await`` may not be allowed) and every
    cell magic's body are left to IPython, so they keep the synchronous path.
    """

    def transform(lines: list[str]) -> list[str]:
        if not lines or lines[0].startswith("%%"):
            return lines
        candidates = [row for row, line in enumerate(lines) if _is_wait_line(line)]
        if not candidates:
            return lines
        rows = _statement_rows(lines)
        out = list(lines)
        for row in candidates:
            if row in rows:
                line = lines[row].rstrip("\r\n")[len("%agent") :].strip()
                # ``{name}`` and ``$name`` expand as IPython's run_line_magic would expand them.
                out[row] = (
                    f'await get_ipython().magics_manager.registry["AgentMagics"]'
                    f".agent_wait_async(get_ipython().var_expand({line!r}))\n"
                )
        return out

    return transform
