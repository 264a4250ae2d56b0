"""Stores: the embedded persistence that chat history, session state, caches and journals share.

``Store`` maps a hierarchical namespace and a key to a JSON value (``InMemoryStore``,
``SQLiteStore``); the run context reaches stores and caches by name through ``StoreRegistry`` and
``CacheRegistry``; ``ResponseCache`` and its backends replay model responses for identical requests.
``open_sqlite`` opens a connection with the pragmas every SQLite-backed component shares.
"""

from __future__ import annotations

from ._registries import (
    CacheRegistry as CacheRegistry,
    StoreRegistry as StoreRegistry,
)
from ._response_cache import (
    InMemoryResponseCache as InMemoryResponseCache,
    ResponseCache as ResponseCache,
    ResponseCacheStats as ResponseCacheStats,
    SQLiteResponseCache as SQLiteResponseCache,
    StoreResponseCache as StoreResponseCache,
    cache_key as cache_key,
    lookup_response as lookup_response,
    store_response as store_response,
)
from ._stores import (
    InMemoryStore as InMemoryStore,
    JsonValue as JsonValue,
    Namespace as Namespace,
    SQLiteStore as SQLiteStore,
    Store as Store,
    open_sqlite as open_sqlite,
)

__all__ = [
    "CacheRegistry",
    "InMemoryResponseCache",
    "InMemoryStore",
    "JsonValue",
    "Namespace",
    "ResponseCache",
    "ResponseCacheStats",
    "SQLiteResponseCache",
    "SQLiteStore",
    "Store",
    "StoreRegistry",
    "StoreResponseCache",
    "cache_key",
    "lookup_response",
    "open_sqlite",
    "store_response",
]
