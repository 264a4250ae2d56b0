"""``OwnerLoop``: one event loop, on its own daemon thread, that owns an MCP server's connection.

A harness may run on the kernel's loop (background cells), on a fresh loop per blocking cell, or
under ``run_sync`` from any thread, and an MCP connection (a subprocess, its pipes, an anyio task
group) is bound to the loop that opened it. So the connection never lives on a caller's loop: it
lives here, and callers on any loop reach it with ``call``, which waits without blocking their
loop. The owner thread also makes stdio servers work under a Windows kernel, whose selector loop
cannot spawn subprocesses: the owner builds a proactor loop of its own.

Cancellation crosses the boundary as an anyio cancel scope cancelled *on the owner loop*, so the
MCP SDK sees an ordinary cancellation and sends the protocol's ``notifications/cancelled``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

__all__: list[str] = []


class OwnerStopped(Exception):
    """The owner loop stopped (the server was closed) while a call waited on it."""


T = TypeVar("T")

_CANCEL_GRACE_S = 1.0  # how long a cancelled caller waits for the owner side to wind down


def _new_loop() -> asyncio.AbstractEventLoop:
    if sys.platform == "win32":  # pragma: no cover - a kernel's selector policy cannot spawn processes
        return asyncio.ProactorEventLoop()
    return asyncio.new_event_loop()


class OwnerLoop:
    """A daemon thread running one asyncio loop until ``stop``."""

    def __init__(self, name: str) -> None:
        self._loop = _new_loop()
        self._thread = threading.Thread(target=self._run, name=f"tinyagents-mcp-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._loop.is_closed()

    def on_owner_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, fn: Callable[[], Awaitable[T]]) -> tuple[concurrent.futures.Future[T], list[anyio.CancelScope]]:
        """Start ``fn()`` on the owner loop inside a cancel scope; returns its future and a box holding that scope."""
        box: list[anyio.CancelScope] = []

        async def body() -> T:
            with anyio.CancelScope() as scope:
                box.append(scope)
                return await fn()
            raise asyncio.CancelledError  # the scope was cancelled by the caller

        return asyncio.run_coroutine_threadsafe(body(), self._loop), box

    def _cancel(self, future: concurrent.futures.Future[T], box: list[anyio.CancelScope]) -> None:
        def cancel() -> None:
            if box:
                box[0].cancel()
            else:  # not started yet: it never will
                future.cancel()

        try:
            self._loop.call_soon_threadsafe(cancel)
        except RuntimeError:  # the owner loop is already closed
            future.cancel()

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` on the owner loop and wait for it from the caller's loop; cancelling the caller cancels it."""
        future, box = self.submit(fn)
        caller = asyncio.get_running_loop()
        done = asyncio.Event()

        def wake(_: object) -> None:
            try:
                caller.call_soon_threadsafe(done.set)
            except RuntimeError:  # the caller's loop closed while we worked
                pass

        future.add_done_callback(wake)
        try:
            await done.wait()
        except BaseException:
            self._cancel(future, box)
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_GRACE_S):
                await done.wait()  # let the SDK send its cancellation before the run moves on
            raise
        if future.cancelled():
            raise OwnerStopped
        return future.result()

    def call_blocking(self, fn: Callable[[], Awaitable[T]], timeout_s: float) -> T:
        """Run ``fn()`` on the owner loop from a thread that is not running it (``close()``, atexit)."""
        if self.on_owner_thread():
            raise RuntimeError("call_blocking on the owner thread would deadlock")
        future, box = self.submit(fn)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            self._cancel(future, box)
            raise
        except concurrent.futures.CancelledError:
            raise OwnerStopped from None

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop (cancelling what still runs on it) and wait for the thread to end."""
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:
            return  # already closed
        if not self.on_owner_thread():
            self._thread.join(timeout_s)
