"""Embedded key-value stores: the persistence that chat history, session state, caches and journals share.

A ``Store`` maps a hierarchical namespace and a key to a JSON value. Two backends ship:
``InMemoryStore`` (a dict) and ``SQLiteStore`` (stdlib ``sqlite3`` in WAL mode, the embedded default,
safe across threads, store instances and processes).

Calls are synchronous on purpose: a local lookup costs microseconds, less than hopping to a worker
thread, and calls from tasks on one event loop never interleave. Widget callbacks may call from other
threads, so every store is lock-protected. Values cross the boundary as JSON text in both directions,
so no caller can mutate what another caller reads, and both backends behave identically.

The run context reaches stores through ``StoreRegistry`` (``_registries``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, Self, TypeAlias, TypeVar, runtime_checkable

from .._errors import ConfigurationError, StoreError

__all__ = [
    "InMemoryStore",
    "JsonValue",
    "Namespace",
    "SQLiteStore",
    "Store",
]

JsonValue: TypeAlias = Any
"""A decoded JSON value; ``Any`` because readers know their own schema and writes are validated at runtime."""

Namespace: TypeAlias = str | tuple[str, ...]
"""``"sessions"`` or a hierarchy such as ``("threads", thread_id)``; a str is a one-segment namespace."""

_H = TypeVar("_H")

_SEP = "\x1f"  # joins namespace segments in SQLite; segments may not contain control characters
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PAUSES = random.Random()  # busy pauses draw from their own stream, never the notebook's global one
_NUL = re.compile(r"\x00")
_MAX_DEPTH = 100


# ------------------------------------------------------------------------------------------ validation
def _text(value: object, what: str, forbidden: re.Pattern[str], *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ConfigurationError(f"{what} must be a non-empty str, got {value!r}")
    if forbidden.search(value):
        raise ConfigurationError(f"{what} {value!r} contains a forbidden control character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"{what} {value!r} is not valid Unicode (lone surrogate)") from None
    return str.__str__(value)  # plain str, even for RunId-style subclasses


def _namespace(namespace: object) -> tuple[str, ...]:
    segments = (namespace,) if isinstance(namespace, str) else namespace
    if not isinstance(segments, tuple) or not segments:
        raise ConfigurationError(f"namespace must be a non-empty str or tuple of str, got {namespace!r}")
    return tuple(_text(s, "namespace segment", _CONTROL) for s in segments)


def _plain(value: object, path: str, depth: int) -> object:
    """Validate ``value`` as JSON and return a plain copy (mappings become dicts, tuples become lists)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"value at {path} is {value!r}, which JSON cannot represent")
        return value
    if depth >= _MAX_DEPTH:
        raise ConfigurationError(f"value at {path} is nested more than {_MAX_DEPTH} levels deep (or is circular)")
    if isinstance(value, Mapping):
        out: dict[str, object] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigurationError(f"value at {path} has the non-str key {k!r}; JSON object keys are strings")
            out[k] = _plain(v, f"{path}[{k!r}]", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_plain(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise ConfigurationError(
        f"value at {path} is a {type(value).__name__}, which is not JSON",
        hint="stores accept str, int, finite float, bool, None, lists/tuples and mappings with str keys",
    )


def _encode(value: object) -> str:
    plain = _plain(value, "$", 0)
    text = json.dumps(plain, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates in strings: escape them rather than fail in sqlite
        text = json.dumps(plain, allow_nan=False, separators=(",", ":"))
    return text


# ------------------------------------------------------------------------------------------ protocol
@runtime_checkable
class Store(Protocol):
    """Namespaced keys mapped to JSON values; every method is synchronous and thread-safe.

    ``get`` returns a fresh copy of the value (``default`` when absent); ``has`` tells a stored ``None``
    from an absent key. ``put`` stores a JSON copy and raises ``ConfigurationError`` for anything JSON
    cannot hold (NaN and infinities included). ``update`` atomically replaces a value with
    ``fn(current or default)`` and returns it. ``delete`` says whether the key existed. ``keys`` and
    ``items`` list one namespace, sorted, filtered by a key prefix. ``namespaces`` lists the non-empty
    namespaces at or below an optional prefix. ``clear`` empties exactly one namespace (not its
    children), or everything, and returns the count. ``close`` is idempotent; later calls raise
    ``StoreError``.
    """

    def get(self, namespace: Namespace, key: str, default: JsonValue = None) -> JsonValue: ...
    def has(self, namespace: Namespace, key: str) -> bool: ...
    def put(self, namespace: Namespace, key: str, value: object) -> None: ...
    def update(
        self, namespace: Namespace, key: str, fn: Callable[[JsonValue], object], *, default: JsonValue = None
    ) -> JsonValue: ...
    def delete(self, namespace: Namespace, key: str) -> bool: ...
    def keys(self, namespace: Namespace, *, prefix: str = "") -> list[str]: ...
    def items(self, namespace: Namespace, *, prefix: str = "") -> list[tuple[str, JsonValue]]: ...
    def namespaces(self, *, prefix: Namespace | None = None) -> list[tuple[str, ...]]: ...
    def clear(self, namespace: Namespace | None = None) -> int: ...
    def close(self) -> None: ...


# ------------------------------------------------------------------------------------------ shared base
class _StoreBase(ABC):
    """Validation, JSON coding and atomicity live here once, so both backends behave identically.

    Backends implement primitives over encoded text, called while ``_locked()`` holds the lock. The
    lock is re-entrant so an ``update`` callback may use the store without deadlocking.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._closed = False

    # backend primitives
    @abstractmethod
    def _read(self, ns: tuple[str, ...], key: str) -> str | None: ...
    @abstractmethod
    def _write(self, ns: tuple[str, ...], key: str, text: str) -> None: ...
    @abstractmethod
    def _remove(self, ns: tuple[str, ...], key: str) -> bool: ...
    @abstractmethod
    def _scan(self, ns: tuple[str, ...], prefix: str) -> list[tuple[str, str]]: ...
    @abstractmethod
    def _list_namespaces(self) -> list[tuple[str, ...]]: ...
    @abstractmethod
    def _remove_all(self, ns: tuple[str, ...] | None) -> int: ...
    @abstractmethod
    def _release(self) -> None: ...

    @contextlib.contextmanager
    def _locked(self, *, write: bool) -> Iterator[None]:
        """Hold the lock for one operation; a write is atomic (SQLite: one committed transaction)."""
        with self._lock:
            self._check_open()
            yield

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self!r} is closed")

    # public API (see Store)
    def get(self, namespace: Namespace, key: str, default: JsonValue = None) -> JsonValue:
        ns, k = _namespace(namespace), _text(key, "key", _NUL)
        with self._locked(write=False):
            text = self._read(ns, k)
        return default if text is None else json.loads(text)

    def has(self, namespace: Namespace, key: str) -> bool:
        ns, k = _namespace(namespace), _text(key, "key", _NUL)
        with self._locked(write=False):
            return self._read(ns, k) is not None

    def put(self, namespace: Namespace, key: str, value: object) -> None:
        ns, k, text = _namespace(namespace), _text(key, "key", _NUL), _encode(value)
        with self._locked(write=True):
            self._write(ns, k, text)

    def update(
        self, namespace: Namespace, key: str, fn: Callable[[JsonValue], object], *, default: JsonValue = None
    ) -> JsonValue:
        """Atomically read-modify-write one key, e.g. a counter: ``update(ns, "n", lambda v: v + 1, default=0)``.

        ``fn`` runs while the store is locked (for SQLite, inside a write transaction that other
        connections and processes wait on), so keep it short. If it raises, nothing changes.
        """
        ns, k = _namespace(namespace), _text(key, "key", _NUL)
        with self._locked(write=True):
            old = self._read(ns, k)
            text = _encode(fn(default if old is None else json.loads(old)))
            self._write(ns, k, text)
        return json.loads(text)

    def delete(self, namespace: Namespace, key: str) -> bool:
        ns, k = _namespace(namespace), _text(key, "key", _NUL)
        with self._locked(write=True):
            return self._remove(ns, k)

    def keys(self, namespace: Namespace, *, prefix: str = "") -> list[str]:
        ns, p = _namespace(namespace), _text(prefix, "key prefix", _NUL, allow_empty=True)
        with self._locked(write=False):
            return [k for k, _ in self._scan(ns, p)]

    def items(self, namespace: Namespace, *, prefix: str = "") -> list[tuple[str, JsonValue]]:
        ns, p = _namespace(namespace), _text(prefix, "key prefix", _NUL, allow_empty=True)
        with self._locked(write=False):
            rows = self._scan(ns, p)
        return [(k, json.loads(text)) for k, text in rows]

    def namespaces(self, *, prefix: Namespace | None = None) -> list[tuple[str, ...]]:
        under = None if prefix is None else _namespace(prefix)
        with self._locked(write=False):
            found = self._list_namespaces()
        return sorted(ns for ns in found if under is None or ns[: len(under)] == under)

    def clear(self, namespace: Namespace | None = None) -> int:
        ns = None if namespace is None else _namespace(namespace)
        with self._locked(write=True):
            return self._remove_all(ns)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


# ------------------------------------------------------------------------------------------ in memory
class InMemoryStore(_StoreBase):
    """A process-local store for tests, scratch state and the registry's default; gone with the process."""

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[tuple[str, ...], dict[str, str]] = {}

    def _read(self, ns: tuple[str, ...], key: str) -> str | None:
        return self._data.get(ns, {}).get(key)

    def _write(self, ns: tuple[str, ...], key: str, text: str) -> None:
        self._data.setdefault(ns, {})[key] = text

    def _remove(self, ns: tuple[str, ...], key: str) -> bool:
        return self._data.get(ns, {}).pop(key, None) is not None

    def _scan(self, ns: tuple[str, ...], prefix: str) -> list[tuple[str, str]]:
        bucket = self._data.get(ns, {})
        return sorted((k, v) for k, v in bucket.items() if k.startswith(prefix))

    def _list_namespaces(self) -> list[tuple[str, ...]]:
        return [ns for ns, bucket in self._data.items() if bucket]

    def _remove_all(self, ns: tuple[str, ...] | None) -> int:
        if ns is not None:
            return len(self._data.pop(ns, {}))
        count = sum(map(len, self._data.values()))
        self._data.clear()
        return count

    def _release(self) -> None:
        self._data.clear()

    def __repr__(self) -> str:
        return f"InMemoryStore(namespaces={len(self._data)})"


# ------------------------------------------------------------------------------------------ sqlite
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tinyagents_kv (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
    "updated_at REAL NOT NULL, PRIMARY KEY (namespace, key)) WITHOUT ROWID"
)
_UPSERT = (
    "INSERT INTO tinyagents_kv (namespace, key, value, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
)


class SQLiteStore(_StoreBase):
    """The embedded default: one SQLite file, WAL journal, one committed transaction per write.

    WAL lets readers proceed while a writer commits, and the busy timeout makes writers from other
    ``SQLiteStore`` instances or processes wait their turn instead of failing. ``synchronous="normal"``
    (the default) survives a crashed process; ``"full"`` also survives power loss at an fsync per write.
    ``":memory:"`` gives a private, non-persistent database.

    Args:
        path: The database file (parent directories are created) or ``":memory:"``.
        busy_timeout_s: How long a write waits for another connection's write lock before ``StoreError``.
        synchronous: SQLite's durability level for commits.

    Raises:
        ConfigurationError: The file cannot be created or opened, or is not a SQLite database.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 5.0,
        synchronous: Literal["normal", "full"] = "normal",
    ) -> None:
        super().__init__()
        self._path, self._conn = open_sqlite(
            path,
            owner="SQLiteStore",
            what="SQLite store",
            busy_timeout_s=busy_timeout_s,
            synchronous=synchronous,
            schema=(_SCHEMA,),
        )

    @property
    def path(self) -> str:
        """The database path as given (``":memory:"`` for a private in-memory database)."""
        return self._path

    @contextlib.contextmanager
    def _locked(self, *, write: bool) -> Iterator[None]:
        with self._lock:
            self._check_open()
            begin = write and not self._conn.in_transaction  # inside update(): join its transaction
            try:
                if begin:
                    self._conn.execute("BEGIN IMMEDIATE")  # take the write lock now, under the busy timeout
                yield
                if begin:
                    self._conn.execute("COMMIT")
            except BaseException as exc:
                if begin:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._store_error(exc) from exc
                raise

    def _store_error(self, exc: sqlite3.Error) -> StoreError:
        locked = "locked" in str(exc) or "busy" in str(exc)
        hint = "another connection held the write lock longer than busy_timeout_s" if locked else None
        return StoreError(f"SQLite store {self._path!r}: {exc}", hint=hint)

    def _read(self, ns: tuple[str, ...], key: str) -> str | None:
        row = self._conn.execute(
            "SELECT value FROM tinyagents_kv WHERE namespace = ? AND key = ?", (_SEP.join(ns), key)
        ).fetchone()
        return None if row is None else str(row[0])

    def _write(self, ns: tuple[str, ...], key: str, text: str) -> None:
        self._conn.execute(_UPSERT, (_SEP.join(ns), key, text, time.time()))

    def _remove(self, ns: tuple[str, ...], key: str) -> bool:
        cur = self._conn.execute("DELETE FROM tinyagents_kv WHERE namespace = ? AND key = ?", (_SEP.join(ns), key))
        return cur.rowcount > 0

    def _scan(self, ns: tuple[str, ...], prefix: str) -> list[tuple[str, str]]:
        # BINARY collation orders UTF-8 bytes, which matches Python's code-point order.
        rows = self._conn.execute(
            "SELECT key, value FROM tinyagents_kv WHERE namespace = ? AND key >= ? AND substr(key, 1, ?) = ? "
            "ORDER BY key",
            (_SEP.join(ns), prefix, len(prefix), prefix),
        ).fetchall()
        return [(str(k), str(v)) for k, v in rows]

    def _list_namespaces(self) -> list[tuple[str, ...]]:
        rows = self._conn.execute("SELECT DISTINCT namespace FROM tinyagents_kv").fetchall()
        return [tuple(str(row[0]).split(_SEP)) for row in rows]

    def _remove_all(self, ns: tuple[str, ...] | None) -> int:
        if ns is None:
            return self._conn.execute("DELETE FROM tinyagents_kv").rowcount
        return self._conn.execute("DELETE FROM tinyagents_kv WHERE namespace = ?", (_SEP.join(ns),)).rowcount

    def _release(self) -> None:
        self._conn.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"


def open_sqlite(
    path: str | os.PathLike[str],
    *,
    owner: str,
    what: str,
    busy_timeout_s: float,
    synchronous: Literal["normal", "full"] | None,
    schema: Sequence[str],
) -> tuple[str, sqlite3.Connection]:
    """Open (creating its directory) a WAL-mode SQLite database for one of the harness's durable stores.

    Every store, journal and index that persists to SQLite opens its file the same way: validated
    arguments, autocommit (``isolation_level=None``: each statement commits, or the caller issues
    ``BEGIN``), a busy timeout for other connections, WAL, then its schema. Any failure closes the
    connection and becomes one clear ``ConfigurationError``.

    Args:
        path: A file path or ``":memory:"``.
        owner: The class opening it, for the error about an empty path.
        what: What it is, for the error ("SQLite store").
        busy_timeout_s: How long to wait for another connection's lock.
        synchronous: SQLite's durability level, or ``None`` for SQLite's default.
        schema: Statements run once the database is open (``CREATE ... IF NOT EXISTS``).

    Returns:
        The path as a string and the open connection.
    """
    timeout: object = busy_timeout_s
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 <= timeout < math.inf:
        raise ConfigurationError(f"busy_timeout_s must be a finite number >= 0, got {busy_timeout_s!r}")
    if synchronous is not None and synchronous not in ("normal", "full"):
        raise ConfigurationError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
    where = os.fspath(path)
    if not where:
        raise ConfigurationError(f"{owner} needs a file path or ':memory:', got ''")
    conn: sqlite3.Connection | None = None
    try:
        if where != ":memory:":
            Path(where).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(where, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None)
        _prepare(conn, busy_timeout_s, synchronous, schema)
    except (OSError, sqlite3.Error) as exc:
        if conn is not None:
            conn.close()
        if _is_busy(exc):
            raise ConfigurationError(
                f"cannot open {what} at {where!r}: {exc} (another connection kept it locked for {busy_timeout_s:g} s)",
                hint="another process is holding the file; retry, or give the opener a larger busy_timeout_s",
            ) from exc
        raise ConfigurationError(
            f"cannot open {what} at {where!r}: {exc}",
            hint="check that the directory is writable and the path names a SQLite database, not another file",
        ) from exc
    return where, conn


def _is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def _prepare(conn: sqlite3.Connection, busy_timeout_s: float, synchronous: str | None, schema: Sequence[str]) -> None:
    """Switch to WAL and create the schema, retrying lock conflicts until the busy timeout runs out.

    SQLite does not call its busy handler for every conflict: a journal-mode switch or a schema
    write racing another connection's first open can fail with "database is locked" at once
    (the lock upgrade would deadlock). Those are retried here, with short randomized pauses, so
    many threads or processes opening one fresh file all succeed.
    """
    give_up = time.monotonic() + busy_timeout_s
    pause = 0.001
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":  # WAL is persistent: usually set already
                conn.execute("PRAGMA journal_mode = WAL")
            if synchronous is not None:
                conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            for statement in schema:
                conn.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + pause > give_up:
                raise
        time.sleep(pause * (0.5 + _PAUSES.random()))
        pause = min(pause * 2, 0.05)
