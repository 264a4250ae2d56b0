"""The local response cache: identical model requests answered from an earlier response.

A request's ``cache_key`` hashes everything that decides the answer (the resolved model, the
transcript, tools, response format and sampling parameters) and nothing that does not (the thread,
the run), so a repeated request hits across runs, threads and, with a persistent store, processes.

Hits are not billed: the provider is not called, so the loop records no usage for a hit and emits
``cache.hit`` instead. A cache is only ever an optimisation: a corrupt entry reads as a miss and is
removed, and the loop treats a lookup or write failure as a miss rather than failing the run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._messages import AssistantMessage, dump_messages, load_messages
from .._model import ModelRequest, ModelResponse
from .._usage import Usage
from ._stores import SQLiteStore, Store

__all__ = [
    "InMemoryResponseCache",
    "ResponseCache",
    "ResponseCacheStats",
    "SQLiteResponseCache",
    "StoreResponseCache",
    "cache_key",
    "lookup_response",
    "store_response",
]

_log = logging.getLogger("tinyagents_nb")

_KEY_VERSION: Final = 1  # bump when the key projection changes, so old persistent entries stop matching
_ENTRY_VERSION: Final = 1  # bump when the stored response layout changes; old entries then read as misses
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")  # the store rejects these in namespaces
_CORRUPT: Final = object()


# ------------------------------------------------------------------------------------------ key
def _jsonable(value: object) -> object:
    """``json.dumps`` fallback: read-only mappings (frozen schemas, settings) serialize as objects."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a {type(value).__name__} is not JSON")


def cache_key(request: ModelRequest, *, model: str) -> str:
    """The SHA-256 (hex) of a canonical JSON projection of the behaviour-affecting request fields.

    Included: ``model`` (the resolved model identity; pass provider and model, e.g.
    ``"openai:gpt-4o-mini"``, so two providers serving one model name never share entries), the
    request's model hint, messages, tools (name, description, parameters, strict), tool choice,
    response format, output cap, temperature and settings. Excluded: ``thread_id``, so identical
    requests from different threads and runs share an entry. Keys are stable across processes.

    Raises:
        ConfigurationError: A tool schema or setting holds a value JSON cannot represent (the loop
            should then skip the cache for this request).
    """
    rf = request.response_format
    payload = {
        "v": _KEY_VERSION,
        "model": model,
        "model_hint": request.model,
        "messages": dump_messages(request.messages),
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters, "strict": t.strict}
            for t in request.tools
        ],
        "tool_choice": request.tool_choice,
        "response_format": None
        if rf is None
        else {"type": rf.type, "name": rf.name, "schema": rf.schema, "strict": rf.strict},
        "max_output_tokens": request.max_output_tokens,
        # 1 and 1.0 sample identically, so they must not split the cache.
        "temperature": None if request.temperature is None else float(request.temperature),
        "settings": request.settings,
    }
    try:
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_jsonable)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"request cannot be cache-keyed: {exc}") from None
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# ------------------------------------------------------------------------------------------ protocol
@runtime_checkable
class ResponseCache(Protocol):
    """Maps a ``cache_key`` to a ``ModelResponse``; implementations are thread-safe.

    A hit is not billed: the loop records no usage for it (the provider was never called) and
    emits ``cache.hit`` so the saving stays visible.
    """

    def get(self, key: str) -> ModelResponse | None:
        """The cached response, or ``None`` on a miss."""
        ...

    def put(self, key: str, response: ModelResponse) -> None:
        """Store ``response`` under ``key``, replacing any earlier entry."""
        ...

    def clear(self) -> None:
        """Remove every entry."""
        ...

    def __len__(self) -> int: ...


def lookup_response(
    cache: ResponseCache, request: ModelRequest, *, model: str
) -> tuple[str | None, ModelResponse | None]:
    """``(key, hit)`` for ``request``; a cache problem (unserializable request, closed or locked store) is a miss.

    The loop consults the cache before every model call: a broken cache must cost a call, never a run.
    """
    try:
        key = cache_key(request, model=model)
        return key, cache.get(key)
    except Exception:
        _log.warning("response cache lookup failed; treating it as a miss", exc_info=True)
        return None, None


def store_response(cache: ResponseCache, key: str, response: ModelResponse) -> None:
    """``cache.put``, logging instead of raising: a failed write leaves the run going."""
    try:
        cache.put(key, response)
    except Exception:
        _log.warning("response cache write failed; the run goes on", exc_info=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResponseCacheStats:
    """Counters since a cache was created (per cache object, not per persistent file)."""

    hits: int = 0
    misses: int = 0
    puts: int = 0
    evictions: int = 0

    @property
    def hit_rate(self) -> float | None:
        """Hits over lookups, or ``None`` before the first lookup."""
        lookups = self.hits + self.misses
        return None if lookups == 0 else self.hits / lookups


class _Counters:
    __slots__ = ("evictions", "hits", "misses", "puts")

    def __init__(self) -> None:
        self.hits = self.misses = self.puts = self.evictions = 0

    def snapshot(self) -> ResponseCacheStats:
        return ResponseCacheStats(hits=self.hits, misses=self.misses, puts=self.puts, evictions=self.evictions)


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key or "\x00" in key:
        raise ConfigurationError(f"cache key must be a non-empty str without NUL, got {key!r}")
    return key


def _check_max(max_entries: object) -> int:
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries <= 0:
        raise ConfigurationError(f"max_entries must be a positive int, got {max_entries!r}")
    return max_entries


# ------------------------------------------------------------------------------------------ in memory
class InMemoryResponseCache:
    """A process-local LRU cache holding the (frozen, shareable) response objects themselves.

    Args:
        max_entries: Entries kept; the least recently used one is evicted beyond this.
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self._max = _check_max(max_entries)
        self._data: OrderedDict[str, ModelResponse] = OrderedDict()
        self._lock = threading.Lock()
        self._counters = _Counters()

    @property
    def max_entries(self) -> int:
        return self._max

    @property
    def stats(self) -> ResponseCacheStats:
        """A snapshot of the hit, miss, put and eviction counters."""
        with self._lock:
            return self._counters.snapshot()

    def get(self, key: str) -> ModelResponse | None:
        _check_key(key)
        with self._lock:
            response = self._data.get(key)
            if response is None:
                self._counters.misses += 1
                return None
            self._data.move_to_end(key)
            self._counters.hits += 1
            return response

    def put(self, key: str, response: ModelResponse) -> None:
        _check_key(key)
        if not isinstance(response, ModelResponse):
            raise ConfigurationError(f"can only cache a ModelResponse, got {type(response).__name__}")
        with self._lock:
            self._data[key] = response
            self._data.move_to_end(key)
            self._counters.puts += 1
            while len(self._data) > self._max:
                self._data.popitem(last=False)
                self._counters.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __repr__(self) -> str:
        return f"InMemoryResponseCache(entries={len(self)}, max_entries={self._max})"


# ------------------------------------------------------------------------------------------ store-backed
def _encode_response(response: ModelResponse) -> dict[str, Any]:
    """A JSON-able dict holding everything in ``response`` (the inverse of ``_decode_response``)."""
    return {
        "v": _ENTRY_VERSION,
        "message": dump_messages([response.message])[0],
        "usage": response.usage.to_dict(),
        "finish_reason": response.finish_reason,
        "model": response.model,
        "provider": response.provider,
    }


def _opt_str(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} is a {type(value).__name__}")
    return value


def _decode_response(data: object) -> ModelResponse:
    """Rebuild a response from ``_encode_response`` output.

    Raises:
        ValueError: ``data`` is not a valid encoded response (pydantic's ``ValidationError`` and
            ``ConfigurationError`` are both ``ValueError``s).
    """
    if not isinstance(data, Mapping) or data.get("v") != _ENTRY_VERSION:
        raise ValueError("not a cached response")
    (message,) = load_messages([data["message"]])
    if not isinstance(message, AssistantMessage):
        raise ValueError(f"cached message has role {message.role!r}")
    usage = data["usage"]
    if not isinstance(usage, Mapping):
        raise ValueError("usage is not an object")
    return ModelResponse(
        message=message,
        usage=Usage(**usage),
        finish_reason=_opt_str(data, "finish_reason"),
        model=_opt_str(data, "model"),
        provider=_opt_str(data, "provider"),
    )


class StoreResponseCache:
    """A response cache persisted in any ``Store``; over a ``SQLiteStore`` it survives restarts.

    Responses are stored as JSON (the message through the messages JSON adapter), so every read
    returns a fresh object and several processes can share one SQLite file.

    With ``max_entries`` set, the oldest *written* entries are evicted first: reads do not refresh
    an entry, because a cache hit must not cost a disk write. Eviction scans the namespace, which is
    cheap next to the provider call that every put follows.

    Args:
        store: Where entries live; the cache never closes a store it was given.
        namespace: The store namespace holding the entries.
        max_entries: Entries kept, or ``None`` for no limit.
    """

    def __init__(self, store: Store, *, namespace: str = "response-cache", max_entries: int | None = None) -> None:
        if not isinstance(store, Store):
            raise ConfigurationError(f"{type(store).__name__} does not implement the Store protocol")
        ns: object = namespace  # checked at runtime: callers may not be type-checked
        if not isinstance(ns, str) or not ns or _CONTROL.search(ns):
            raise ConfigurationError(f"namespace must be a non-empty str, got {namespace!r}")
        self._store = store
        self._ns = namespace
        self._max = None if max_entries is None else _check_max(max_entries)
        self._lock = threading.Lock()
        self._counters = _Counters()
        self._last_seq = 0

    @property
    def store(self) -> Store:
        return self._store

    @property
    def namespace(self) -> str:
        return self._ns

    @property
    def max_entries(self) -> int | None:
        return self._max

    @property
    def stats(self) -> ResponseCacheStats:
        """A snapshot of this object's hit, miss, put and eviction counters."""
        with self._lock:
            return self._counters.snapshot()

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self._counters, name, getattr(self._counters, name) + n)

    def get(self, key: str) -> ModelResponse | None:
        _check_key(key)
        try:
            entry = self._store.get(self._ns, key)
        except ValueError:  # the stored text is not even JSON
            entry = _CORRUPT
        if entry is None:
            self._count("misses")
            return None
        try:
            if not isinstance(entry, Mapping):
                raise ValueError("entry is not an object")
            response = _decode_response(entry.get("response"))
        except (ValueError, TypeError, KeyError):
            self._store.delete(self._ns, key)  # self-heal: the next put rewrites it
            self._count("misses")
            return None
        self._count("hits")
        return response

    def put(self, key: str, response: ModelResponse) -> None:
        _check_key(key)
        if not isinstance(response, ModelResponse):
            raise ConfigurationError(f"can only cache a ModelResponse, got {type(response).__name__}")
        entry = {"seq": self._next_seq(), "response": _encode_response(response)}
        self._store.put(self._ns, key, entry)
        self._count("puts")
        if self._max is not None:
            self._evict(self._max)

    def _next_seq(self) -> int:
        # Wall-clock nanoseconds order writes across processes; the max() keeps one process strictly
        # increasing even when the clock stalls or steps back.
        with self._lock:
            self._last_seq = max(time.time_ns(), self._last_seq + 1)
            return self._last_seq

    def _evict(self, keep: int) -> None:
        rows = self._store.items(self._ns)
        excess = len(rows) - keep
        if excess <= 0:
            return

        def age(row: tuple[str, Any]) -> tuple[float, str]:
            seq = row[1].get("seq") if isinstance(row[1], Mapping) else None
            if isinstance(seq, int | float) and not isinstance(seq, bool) and math.isfinite(seq):
                return (seq, row[0])
            return (-math.inf, row[0])  # corrupt entries go first

        removed = sum(self._store.delete(self._ns, k) for k, _ in sorted(rows, key=age)[:excess])
        self._count("evictions", removed)

    def clear(self) -> None:
        self._store.clear(self._ns)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(key) and self._store.has(self._ns, key)

    def __len__(self) -> int:
        return len(self._store.keys(self._ns))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store!r}, namespace={self._ns!r}, max_entries={self._max})"


class SQLiteResponseCache(StoreResponseCache):
    """The durable default: a ``StoreResponseCache`` over its own ``SQLiteStore`` file.

    Args:
        path: The SQLite file (created with its parent directories), or ``":memory:"``.
        namespace: The store namespace holding the entries.
        max_entries: Entries kept, or ``None`` for no limit.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, namespace: str = "response-cache", max_entries: int | None = None
    ) -> None:
        store = SQLiteStore(path)
        try:
            super().__init__(store, namespace=namespace, max_entries=max_entries)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Close the underlying store (idempotent); the cache is unusable afterwards."""
        self._store.close()

    def __enter__(self) -> SQLiteResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
