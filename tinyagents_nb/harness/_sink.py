"""``EventSink``: the one ordered event stream shared by a root run and all its descendants.

Each ``emit`` takes the next offset under a lock and queues the event; whichever caller finds the
sink idle becomes the drainer and delivers queued events in offset order, outside the lock. So
listeners see strict offset order even when runs on several threads emit at once, a listener may
emit re-entrantly, and a failing listener is logged and counted but never breaks emission or other
listeners. Async consumers ``subscribe()``; a subscription wakes its loop thread-safely.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection

from ._events import AgentEvent

__all__ = ["EventListener", "EventSink", "EventSubscription"]

_log = logging.getLogger("tinyagents_nb")

EventListener = Callable[[int, AgentEvent], object]
"""A synchronous listener, called with ``(offset, event)`` in offset order."""


class EventSink:
    """An ordered, multi-listener event stream.

    Args:
        history: How many recent events to keep for ``recent()`` and ``subscribe(replay=True)``;
            ``0`` keeps none. Bounded so a long notebook session does not grow without limit.
    """

    __slots__ = ("_closed", "_draining", "_history", "_listeners", "_lock", "_next", "_pending", "listener_errors")

    def __init__(self, *, history: int = 1024) -> None:
        if history < 0:
            raise ValueError("history must be >= 0")
        self._lock = threading.Lock()
        self._next = 0
        self._pending: deque[tuple[int, AgentEvent]] = deque()
        self._history: deque[tuple[int, AgentEvent]] = deque(maxlen=history)
        self._listeners: tuple[EventListener, ...] = ()
        self._draining = False
        self._closed = False
        self.listener_errors = 0
        """How many times a listener raised (each is logged to the ``tinyagents_nb`` logger)."""

    @property
    def next_offset(self) -> int:
        """The offset the next event will get (= how many events were emitted)."""
        return self._next

    def emit(self, event: AgentEvent) -> int:
        """Append an event; returns its offset. Safe from any thread."""
        with self._lock:
            offset = self._next
            self._next = offset + 1
            item = (offset, event)
            self._pending.append(item)
            self._history.append(item)
            if self._draining:
                return offset
            self._draining = True
        self._drain()
        return offset

    def _drain(self) -> None:
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        self._draining = False
                        return
                    offset, event = self._pending.popleft()
                    listeners = self._listeners
                for listener in listeners:
                    try:
                        listener(offset, event)
                    except Exception:
                        self.listener_errors += 1
                        _log.exception("event listener %r failed on %s #%d", listener, event.kind, offset)
        except BaseException:
            with self._lock:
                self._draining = False
            raise

    def add_listener(self, listener: EventListener) -> Callable[[], None]:
        """Register a synchronous listener; returns a function that removes it."""
        with self._lock:
            self._listeners = (*self._listeners, listener)
        return lambda: self.remove_listener(listener)

    def remove_listener(self, listener: EventListener) -> None:
        with self._lock:
            self._listeners = tuple(item for item in self._listeners if item != listener)

    def recent(self) -> list[tuple[int, AgentEvent]]:
        """The retained history as ``(offset, event)`` pairs, oldest first."""
        with self._lock:
            return list(self._history)

    def subscribe(
        self,
        *,
        replay: bool = False,
        since: int | None = None,
        kinds: Collection[str] | None = None,
        until: Callable[[AgentEvent], bool] | None = None,
        maxsize: int | None = None,
        where: Callable[[AgentEvent], bool] | None = None,
    ) -> EventSubscription:
        """An async iterator over events emitted from now on (after the retained history if ``replay``).

        Args:
            replay: Start with the retained history.
            since: Start with the retained events from this offset on (a late subscriber catching up;
                events older than the retained history are gone).
            kinds: Only these kinds (e.g. ``{"model.delta"}``); ``None`` for all.
            until: Stop after yielding the first event for which this returns ``True``.
            maxsize: Bound the buffer; when full the oldest buffered event is dropped (``dropped`` counts them).
            where: Only events for which this returns ``True``; called once per event, in offset order,
                on the emitting thread (so it may keep state, e.g. the run ids of one run tree).
        """
        sub = EventSubscription(self, kinds=kinds, until=until, maxsize=maxsize, where=where)
        with self._lock:
            if self._closed:
                sub._closed = True
            if replay or since is not None:
                first = 0 if since is None else since
                for offset, event in self._history:
                    if offset >= first:
                        sub._push(offset, event)
            self._listeners = (*self._listeners, sub._push)
        return sub

    def close(self) -> None:
        """End every subscription (after it yields what it buffered); listeners stay registered."""
        with self._lock:
            self._closed = True
            subs = [getattr(listener, "__self__", None) for listener in self._listeners]
        for sub in subs:
            if isinstance(sub, EventSubscription):
                sub.close()

    def __repr__(self) -> str:
        return f"EventSink(next_offset={self._next}, listeners={len(self._listeners)})"


class EventSubscription(AsyncIterator[AgentEvent]):
    """Async iteration over a sink's events; create it with ``EventSink.subscribe``.

    Bound to the event loop that first iterates it; events may be emitted from any thread.
    """

    def __init__(
        self,
        sink: EventSink,
        *,
        kinds: Collection[str] | None,
        until: Callable[[AgentEvent], bool] | None,
        maxsize: int | None,
        where: Callable[[AgentEvent], bool] | None = None,
    ) -> None:
        self._sink = sink
        self._kinds = frozenset(kinds) if kinds is not None else None
        self._where = where
        self._until = until
        self._buffer: deque[AgentEvent] = deque()
        self._maxsize = maxsize
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._finished = False
        self._last_offset = -1
        self.dropped = 0

    def _push(self, offset: int, event: AgentEvent) -> None:
        # an event can reach a catching-up subscriber both from the history and live: keep it once
        if self._closed or offset <= self._last_offset:
            return
        self._last_offset = offset
        if self._kinds is not None and event.kind not in self._kinds:
            return
        if self._where is not None and not self._where(event):
            return
        if self._maxsize is not None and len(self._buffer) >= self._maxsize:
            self._buffer.popleft()
            self.dropped += 1
        self._buffer.append(event)
        self._wake()

    def _wake(self) -> None:
        waiter, loop = self._waiter, self._loop
        if waiter is None or loop is None or waiter.done():
            return
        if threading.get_ident() == self._loop_thread:
            waiter.set_result(None)
        else:
            try:
                loop.call_soon_threadsafe(_set_done, waiter)
            except RuntimeError:  # loop closed
                return

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
        while True:
            if self._buffer and not self._finished:
                event = self._buffer.popleft()
                if self._until is not None and self._until(event):
                    self._finished = True
                    self.close()
                return event
            if self._closed or self._finished:
                raise StopAsyncIteration
            self._waiter = self._loop.create_future()
            if self._buffer or self._closed:  # an emit raced with the check above
                self._waiter = None
                continue
            try:
                await self._waiter
            finally:
                self._waiter = None

    def close(self) -> None:
        """Stop receiving; iteration ends once the buffered events are consumed."""
        if not self._closed:
            self._closed = True
            self._sink.remove_listener(self._push)
            self._wake()

    async def aclose(self) -> None:
        self._buffer.clear()
        self.close()


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
