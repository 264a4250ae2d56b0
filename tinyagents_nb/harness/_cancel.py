"""Cooperative cancellation shared by a run and everything beneath it.

A notebook Stop button fires on whatever thread the kernel delivers the comm message to (a subshell
thread on ipykernel 7.0-7.3), while the run lives on the kernel's event loop. So ``cancel()`` is
thread-safe and wakes waiting coroutines through ``loop.call_soon_threadsafe``; nothing here ever
touches a loop from a foreign thread directly.

Cancellation is cooperative: the loop observes it at checkpoints (``raise_if_cancelled``) and races
it against waits with ``scope()``, which cancels an anyio scope around a whole stream or backoff
rather than creating a task per chunk.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio

from ._errors import Cancelled

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._messages import Message
    from ._usage import Usage

__all__ = ["CancellationToken", "RunCancelled"]

_log = logging.getLogger("tinyagents_nb")

CancelCallback = Callable[["CancellationToken"], object]


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class CancellationToken:
    """A latching, thread-safe cancellation flag; every holder shares one state.

    A fresh token is never cancelled. ``cancel`` is idempotent: the first reason wins.
    """

    __slots__ = ("_callbacks", "_cancelled", "_lock", "_next_key", "_reason", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._reason: str | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._callbacks: dict[int, CancelCallback] = {}
        self._next_key = 0

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str | None = None) -> bool:
        """Request cancellation from any thread; returns ``True`` only for the call that latched it."""
        with self._lock:
            if self._cancelled:
                return False
            self._cancelled = True
            self._reason = reason
            waiters, self._waiters = self._waiters, []
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                continue
        for callback in callbacks:
            self._run_callback(callback)
        return True

    def raise_if_cancelled(self) -> None:
        """A checkpoint: raise ``Cancelled`` if cancellation was requested."""
        if self._cancelled:
            raise Cancelled(self._reason)

    async def cancelled(self) -> None:
        """Wait until the token is cancelled; returns at once if it already is. Safe to race."""
        if self.is_cancelled:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            if self._cancelled:
                return
            self._waiters.append(entry)
        try:
            await fut
        finally:
            if not self._cancelled:  # raced and lost: drop our waiter so it does not pile up
                with self._lock:
                    if entry in self._waiters:
                        self._waiters.remove(entry)

    def on_cancel(self, callback: CancelCallback) -> Callable[[], None]:
        """Call ``callback(token)`` once on cancellation, on the cancelling thread; returns an unregister function.

        If the token is already cancelled the callback runs immediately.
        """
        with self._lock:
            if not self._cancelled:
                key = self._next_key
                self._next_key += 1
                self._callbacks[key] = callback

                def unregister() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return unregister
        self._run_callback(callback)
        return _noop

    @contextmanager
    def scope(self, *, timeout_s: float | None = None) -> Iterator[anyio.CancelScope]:
        """Run the body inside a cancel scope that this token cancels, then raise ``Cancelled``.

        Use it around waits that must end promptly on cancel (a model stream, a backoff sleep)::

            with ctx.cancellation.scope():
                async for item in model.stream(request):
                    ...

        With ``timeout_s`` the same scope also ends the body at that deadline; then nothing is
        raised and the yielded scope's ``cancelled_caught`` is true, so the caller decides what a
        timeout means. One scope for both keeps the per-call cost to a single anyio scope.

        Must be entered on the event loop's thread; the token may be cancelled from any thread.
        """
        self.raise_if_cancelled()
        loop = asyncio.get_running_loop()
        deadline = anyio.current_time() + timeout_s if timeout_s is not None else math.inf
        with anyio.CancelScope(deadline=deadline) as cancel_scope:
            owner = threading.get_ident()

            def cancel_scope_soon(_token: CancellationToken) -> None:
                # Always via the loop, outside any task (anyio's cancel() formats the current task's
                # repr, ~80 µs); on the loop's own thread no self-pipe wake-up is needed.
                if threading.get_ident() == owner:
                    loop.call_soon(cancel_scope.cancel)
                else:
                    loop.call_soon_threadsafe(cancel_scope.cancel)

            unregister = self.on_cancel(cancel_scope_soon)
            try:
                yield cancel_scope
            finally:
                unregister()
        if cancel_scope.cancelled_caught and self._cancelled:
            raise Cancelled(self._reason)

    def _run_callback(self, callback: CancelCallback) -> None:
        try:
            callback(self)
        except Exception:
            _log.exception("cancellation callback %r failed", callback)

    def __repr__(self) -> str:
        state = f"cancelled, reason={self._reason!r}" if self._cancelled else "active"
        return f"CancellationToken({state})"


def _noop() -> None:
    return None


class RunCancelled(Cancelled):
    """A run ended cancelled; it carries what was produced before the cancel.

    Attributes:
        run_id: The cancelled run.
        messages: The partial transcript at the moment cancellation was observed.
        usage: Usage recorded by the run (and its sub-agents) before the cancel.
    """

    def __init__(
        self,
        reason: str | None = None,
        *,
        run_id: str,
        messages: Sequence[Message] = (),
        usage: Usage | None = None,
    ) -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.messages: tuple[Message, ...] = tuple(messages)
        self.usage = usage
