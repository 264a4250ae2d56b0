"""``SessionLoop``: the event loop every ``%%agent`` run executes on, in a thread the session owns.

Why not the kernel's own loop: it runs on the kernel's main thread, so any cell doing synchronous
work (``time.sleep``, a pandas job, a waiting ``%%agent`` cell) freezes every task on it. On its
own thread the run keeps streaming whatever the cells do, and one loop for all runs means the
models' HTTP clients, the per-thread run queue and the dashboards' flushers all live in one place.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["SessionLoop"]

T = TypeVar("T")


class SessionLoop:
    """A daemon thread running an asyncio loop until ``close()``; started lazily on first use."""

    def __init__(self, name: str = "tinyagents-session-loop") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (the thread is started on first access)."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=main, name=self._name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def in_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run ``coro`` as a task on the loop; the caller's context (e.g. ipykernel's parent header) is kept."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Call ``fn()`` on the loop thread soon (thread-safe)."""
        self.loop.call_soon_threadsafe(fn)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the loop and join its thread (tasks still pending are dropped with the loop)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout_s)
        if not thread.is_alive():
            loop.close()
