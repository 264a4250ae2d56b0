"""One async client per event loop, closed on its own loop.

An httpx connection pool belongs to the loop that opened its connections. A model shared by two
threads (``run_sync`` from a thread pool, a streaming run in one thread and a blocking call in
another) must neither hand one loop's client to another loop nor close a client that another loop
is still reading from: either cuts that loop's requests and makes the retry policy pay for them
again. ``PerLoopClients`` keeps one client per running loop; ``aclose()`` closes only the calling
loop's client. A client whose loop is shut down by ``asyncio.run`` or anyio without an ``aclose()``
is still closed on that loop: a suspended async generator (the loop finalises those at shutdown)
guards it. Any adapter that owns an HTTP client uses it the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["PerLoopClients"]


class _Closable(Protocol):
    async def aclose(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)


class _Entry(Generic[_C]):
    __slots__ = ("client", "guard")

    def __init__(self, client: _C) -> None:
        self.client = client
        self.guard: AsyncGenerator[None, None] | None = None


class PerLoopClients(Generic[_C]):
    """Clients made by ``factory``, one per running event loop; thread-safe.

    Args:
        factory: Builds a client; called on the loop that will use it, at most once per loop
            (until that loop's client is closed).
    """

    __slots__ = ("_entries", "_factory", "_lock")

    def __init__(self, factory: Callable[[], _C]) -> None:
        self._factory = factory
        self._entries: dict[asyncio.AbstractEventLoop, _Entry[_C]] = {}
        self._lock = threading.Lock()

    async def get(self) -> _C:
        """The running loop's client, built on first use."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._entries.get(loop)
            if entry is not None:
                return entry.client
            self._prune()
            entry = _Entry(self._factory())
            self._entries[loop] = entry
        entry.guard = self._guard(loop, entry)
        # Running the guard to its first yield registers it with this loop's async-generator hooks,
        # so the loop's shutdown (asyncio.run, anyio.run) finalises it, on this loop.
        await entry.guard.asend(None)
        return entry.client

    async def _guard(self, loop: asyncio.AbstractEventLoop, entry: _Entry[_C]) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                if self._entries.get(loop) is entry:
                    del self._entries[loop]
            await entry.client.aclose()

    async def aclose(self) -> None:
        """Close the running loop's client, if it has one; other loops' clients are left to their loops."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._entries.pop(loop, None)
            self._prune()
        if entry is None:
            return
        if entry.guard is not None:
            await entry.guard.aclose()  # runs the guard's ``finally``: closes the client
        else:  # pragma: no cover - get() sets the guard before any other code of this loop runs
            await entry.client.aclose()

    def _prune(self) -> None:
        """Forget clients of closed loops (caller holds the lock); nothing can close them any more."""
        for loop in [loop for loop in self._entries if loop.is_closed()]:
            del self._entries[loop]

    def __len__(self) -> int:
        """How many loops hold a client now."""
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"PerLoopClients(loops={len(self)})"
