"""HTTP plumbing every adapter shares: sealed secrets, one TLS context, URL checks, lazy httpx.

``Sealed`` keeps keys out of ``repr``, ``vars`` dumps and debuggers; ``tls_context`` loads the CA
bundle once for every client; ``public_url`` strips what may carry credentials before a URL appears
in a message. httpx is imported on first use, so importing the harness stays light. The per-loop
client pool is ``PerLoopClients`` (``_loop_clients``).
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Generic, TypeVar

from .._errors import ConfigurationError

if TYPE_CHECKING:
    import ssl


__all__ = ["SecretHeaders", "Sealed", "check_url", "httpx_module", "public_url", "tls_context"]

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


class SecretHeaders(Mapping[str, str]):
    """A read-only copy of an adapter's request headers whose ``repr`` names them but shows no value.

    What ``request_headers()`` hands to code that must call the provider itself (a Batch API
    client): usable as a mapping, harmless if printed or logged by accident.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"SecretHeaders({sorted(self._items)})"

    __str__ = __repr__


def httpx_module() -> ModuleType:
    import httpx  # lazy: keeps the harness import free of the HTTP stack

    return httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
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
