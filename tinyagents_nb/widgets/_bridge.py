"""The only place the widgets touch event loops and timers: the dashboard's flusher task.

The flusher applies pending state to the widgets at most ``1 / interval`` times a second, so a
burst of thousands of token deltas costs a handful of comm messages. It waits on a real timer
(``anyio.move_on_after``), never ``sleep(0)``: on ipykernel 7 a task that keeps the loop busy
delays every other cell by seconds. A done-callback on the run's task wakes it early for the final
flush, so a finished run shows its outcome at once and a failure cannot vanish.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["Flusher", "when_done"]

_log = logging.getLogger("tinyagents_nb")
_LIVE: set[asyncio.Task[Any]] = set()  # the loop keeps only weak references to tasks


class Flusher:
    """Calls ``flush(False)`` every ``interval_s`` until ``finished()``, then ``flush(True)`` once.

    Args:
        flush: Applies pending state to widgets; ``True`` means final (render everything now).
        finished: Whether the run is over (checked after each wake-up).
        interval_s: Seconds between flushes.
    """

    def __init__(self, flush: Callable[[bool], None], finished: Callable[[], bool], *, interval_s: float) -> None:
        self._flush = flush
        self._finished = finished
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._wake: asyncio.Event | None = None
        self.flushes = 0
        """How many flushes ran (periodic and final)."""
        self.last_error: str | None = None
        """The last exception a flush raised (logged; the flusher keeps going)."""

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    def start(self) -> asyncio.Task[None]:
        """Start on the running loop (idempotent).

        Raises:
            RuntimeError: No event loop is running in this thread.
        """
        if self._task is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise RuntimeError(
                    "RunDashboard.start() needs a running event loop: call it from a notebook cell or a coroutine "
                    "on the loop that runs the stream (or call flush() yourself)"
                ) from None
            self._loop, self._thread, self._wake = loop, threading.get_ident(), asyncio.Event()
            task = loop.create_task(self._run(), name="tinyagents-dashboard-flusher")
            _LIVE.add(task)
            task.add_done_callback(_LIVE.discard)
            self._task = task
        return self._task

    def notify(self) -> None:
        """Wake the flusher now (from any thread), e.g. because the run ended."""
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return
        if threading.get_ident() == self._thread:
            wake.set()
            return
        try:
            loop.call_soon_threadsafe(wake.set)
        except RuntimeError:  # the loop is closed; nothing left to wake
            return

    async def wait(self) -> None:
        """Wait until the final flush is done (cancelling the waiter does not stop the flusher)."""
        await asyncio.shield(self.start())

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        try:
            while not self._finished():
                with anyio.move_on_after(self._interval):
                    await wake.wait()
                wake.clear()
                if not self._finished():
                    self._safe_flush(False)
        finally:
            if not self._safe_flush(True):
                self._safe_flush(True)  # once more, so the header can show what went wrong

    def _safe_flush(self, final: bool) -> bool:
        self.flushes += 1
        try:
            self._flush(final)
        except Exception as exc:  # a rendering bug must not kill the live view or the run
            self.last_error = f"{type(exc).__name__}: {exc}"
            _log.exception("dashboard flush failed")
            return False
        return True


def when_done(task: asyncio.Future[Any], callback: Callable[[asyncio.Future[Any]], None]) -> None:
    """Call ``callback(task)`` on the task's loop once it finishes (at once if it already has)."""
    task.add_done_callback(callback)
