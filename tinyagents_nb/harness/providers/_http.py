"""HTTP plumbing shared by the native provider adapters: per-loop clients and sealed secrets.

An httpx connection pool belongs to the event loop that opened it, while a model object is shared
freely: across notebook cells, a sync twin's fresh loops, worker threads. ``LoopClients`` therefore
keeps one client per running loop (looked up under a lock) instead of one client per model, and
``Sealed`` keeps keys out of ``repr``, ``vars`` dumps and debuggers. httpx is imported on first
use, so importing the harness stays light.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import urllib.parse
import weakref
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._errors import ConfigurationError

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = ["LoopClients", "Sealed", "check_url", "httpx_module", "public_url"]

_T = TypeVar("_T")


class Sealed(Generic[_T]):
    """Holds a secret-bearing value so ``repr``, ``vars`` dumps and debuggers show nothing of it."""

    __slots__ = ("_value",)

    def __init__(self, value: _T) -> None:
        self._value = value

    def reveal(self) -> _T:
        return self._value

    def __repr__(self) -> str:
        return "<sealed>"


def httpx_module() -> ModuleType:
    import httpx  # lazy: keeps the harness import free of the HTTP stack

    return httpx


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every client: loading the CA bundle costs ~0.15 s each time."""
    context: ssl.SSLContext = httpx_module().create_ssl_context()
    return context


def check_url(base_url: object) -> str:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(f"base_url must start with http:// or https://, got {base_url!r}")
    return base_url


def public_url(url: str) -> str:
    """``url`` without userinfo, query or fragment (which may carry credentials)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class LoopClients:
    """One ``httpx.AsyncClient`` per event loop, created on first use in that loop.

    Clients of loops that have been garbage-collected disappear with them (weak keys); ``aclose``
    closes the calling loop's client.
    """

    __slots__ = ("_clients", "_lock", "_timeout", "_timeout_obj", "_verify_tls")

    def __init__(self, *, timeout_s: float, tls: bool) -> None:
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._timeout = timeout_s
        self._timeout_obj: Any = None
        self._verify_tls = tls

    def timeout(self) -> Any:
        """The ``httpx.Timeout`` for every request (also applied to a caller's own client)."""
        if self._timeout_obj is None:
            self._timeout_obj = httpx_module().Timeout(self._timeout)
        return self._timeout_obj

    def get(self) -> httpx.AsyncClient:
        """The client for the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None or client.is_closed:
                httpx = httpx_module()
                # Plain-http hosts (local servers) never do TLS, so skip building a context for them.
                verify: Any = _tls_context() if self._verify_tls else False
                client = httpx.AsyncClient(timeout=self.timeout(), follow_redirects=False, verify=verify)
                self._clients[loop] = client
            return client

    async def aclose(self) -> None:
        """Close the calling loop's client, and forget clients whose loops have stopped.

        Clients of other loops that still run are left alone: they may be mid-request there, and
        closing belongs to the code running on that loop (call ``aclose`` there too).
        """
        current = asyncio.get_running_loop()
        with self._lock:
            mine = self._clients.pop(current, None)
            for loop in [loop for loop in self._clients if loop.is_closed()]:
                del self._clients[loop]
        if mine is not None:
            await mine.aclose()

    def __len__(self) -> int:
        with self._lock:
            return len(self._clients)
