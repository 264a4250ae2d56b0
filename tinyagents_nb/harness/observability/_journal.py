"""Durable observability, part 2: event journals with ``replay_from`` (in memory and SQLite; JSONL is in ``_jsonl``).

A journal is an append-only log of ``AgentObservation``s. Offsets are the sink's offsets, so one
root run's events are addressed by ``(root_run_id, offset)``; a journal may hold many root runs (a
notebook session, or several kernels over time) and returns them in the order they were appended.

Durability, exactly: ``SQLiteEventJournal`` commits every ``append`` as its own transaction before
returning, so once ``append`` has returned the observation survives the process being killed (even
``kill -9``); ``synchronous="full"`` extends that to power loss at the price of an fsync per event.
``JsonlEventJournal`` hands each line to the OS in one ``write`` call, which survives a killed process
but not a power cut; a line torn by a crash mid-write is skipped on reading.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .._errors import ConfigurationError, StoreError
from ..stores import open_sqlite
from ._observability import AgentObservation, _dumps, _event_dict, _is_int

__all__ = ["EventJournal", "InMemoryEventJournal", "SQLiteEventJournal"]


@runtime_checkable
class EventJournal(Protocol):
    """An append-only log of observations.

    ``read_from`` returns the observations with ``offset >= offset`` in append order, optionally only
    one root run's, one run's or some kinds, at most ``limit`` of them; ``replay_from`` iterates the
    same selection lazily. ``flush`` makes every append so far durable (a no-op for journals that
    already are). Reading or appending after ``close`` raises ``StoreError``.
    """

    def append(self, observation: AgentObservation) -> None: ...

    def read_from(
        self,
        offset: int = 0,
        *,
        root_run_id: str | None = None,
        run_id: str | None = None,
        kinds: Collection[str] | None = None,
        limit: int | None = None,
    ) -> list[AgentObservation]: ...

    def replay_from(
        self,
        offset: int = 0,
        *,
        root_run_id: str | None = None,
        run_id: str | None = None,
        kinds: Collection[str] | None = None,
    ) -> Iterator[AgentObservation]: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def __len__(self) -> int: ...


# ------------------------------------------------------------------------------------------ shared
@dataclass(frozen=True, slots=True)
class _Query:
    offset: int
    root_run_id: str | None
    run_id: str | None
    kinds: frozenset[str] | None
    limit: int | None

    @classmethod
    def of(
        cls,
        offset: int,
        root_run_id: str | None,
        run_id: str | None,
        kinds: Collection[str] | None,
        limit: int | None,
    ) -> _Query:
        if not _is_int(offset) or offset < 0:
            raise ConfigurationError(f"offset must be an int >= 0, got {offset!r}")
        if limit is not None and (not _is_int(limit) or limit < 0):
            raise ConfigurationError(f"limit must be an int >= 0 or None, got {limit!r}")
        kind_set = None if kinds is None else frozenset((kinds,) if isinstance(kinds, str) else kinds)
        return cls(offset, root_run_id, run_id, kind_set, limit)

    def matches(self, obs: AgentObservation) -> bool:
        return (
            obs.offset >= self.offset
            and (self.root_run_id is None or obs.root_run_id == self.root_run_id)
            and (self.run_id is None or obs.run_id == self.run_id)
            and (self.kinds is None or obs.kind in self.kinds)
        )


class _JournalBase(ABC):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self!r} is closed")

    def flush(self) -> None:
        """Nothing is buffered: every append is already as durable as this journal gets."""
        with self._lock:
            self._check_open()

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def read_from(
        self,
        offset: int = 0,
        *,
        root_run_id: str | None = None,
        run_id: str | None = None,
        kinds: Collection[str] | None = None,
        limit: int | None = None,
    ) -> list[AgentObservation]:
        """The observations with ``offset >= offset`` (and the given root run, run and kinds), in append order."""
        return self._read(_Query.of(offset, root_run_id, run_id, kinds, limit))

    def replay_from(
        self,
        offset: int = 0,
        *,
        root_run_id: str | None = None,
        run_id: str | None = None,
        kinds: Collection[str] | None = None,
    ) -> Iterator[AgentObservation]:
        """The ``read_from`` selection as an iterator."""
        return self._iterate(_Query.of(offset, root_run_id, run_id, kinds, None))

    @abstractmethod
    def _read(self, query: _Query) -> list[AgentObservation]:
        """The selected observations; each backend implements its own query."""

    def _iterate(self, query: _Query) -> Iterator[AgentObservation]:
        return iter(self._read(query))


# ------------------------------------------------------------------------------------------ in memory
class InMemoryEventJournal(_JournalBase):
    """A journal in a list: for tests, and for sessions that need replay but not persistence.

    Args:
        max_events: Keep at most this many observations, dropping the oldest. Reading from an offset
            that was dropped raises ``StoreError`` rather than silently returning a shorter history.

    Raises:
        ConfigurationError: ``max_events`` is below 1.
    """

    def __init__(self, *, max_events: int | None = None) -> None:
        super().__init__()
        if max_events is not None and (not _is_int(max_events) or max_events < 1):
            raise ConfigurationError(f"max_events must be an int >= 1 or None, got {max_events!r}")
        self._max = max_events
        self._items: deque[AgentObservation] = deque()
        self._evicted_through: dict[str, int] = {}  # root run -> highest offset dropped
        self.evicted = 0
        """How many observations were dropped to honour ``max_events``."""

    def append(self, observation: AgentObservation) -> None:
        if not isinstance(observation, AgentObservation):
            raise ConfigurationError(f"journals append AgentObservation, got {type(observation).__name__}")
        with self._lock:
            self._check_open()
            if self._max is not None and len(self._items) >= self._max:
                old = self._items.popleft()
                self.evicted += 1
                through = self._evicted_through.get(old.root_run_id, -1)
                self._evicted_through[old.root_run_id] = max(through, old.offset)
            self._items.append(observation)

    def _read(self, query: _Query) -> list[AgentObservation]:
        with self._lock:
            self._check_open()
            self._check_retained(query)
            out: list[AgentObservation] = []
            for obs in self._items:
                if query.limit is not None and len(out) >= query.limit:
                    break
                if query.matches(obs):
                    out.append(obs)
            return out

    def _check_retained(self, query: _Query) -> None:
        if query.root_run_id is not None:
            through = self._evicted_through.get(query.root_run_id, -1)
        else:
            through = max(self._evicted_through.values(), default=-1)
        if query.offset <= through:
            raise StoreError(
                f"offset {query.offset} was evicted from this journal (it keeps the last {self._max} events; "
                f"events up to offset {through} are gone)",
                hint=f"read from offset {through + 1} or later, or journal to SQLite to keep everything",
            )

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"InMemoryEventJournal(events={len(self._items)}, max_events={self._max}, evicted={self.evicted})"


# ------------------------------------------------------------------------------------------ SQLite
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tinyagents_events (
        seq INTEGER PRIMARY KEY,
        event_id TEXT NOT NULL,
        root_run_id TEXT NOT NULL,
        "offset" INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        parent_run_id TEXT,
        depth INTEGER NOT NULL,
        kind TEXT NOT NULL,
        ts REAL NOT NULL,
        event TEXT NOT NULL
    )""",
    'CREATE INDEX IF NOT EXISTS tinyagents_events_root ON tinyagents_events (root_run_id, "offset")',
    "CREATE INDEX IF NOT EXISTS tinyagents_events_run ON tinyagents_events (run_id)",
)
_INSERT = (
    'INSERT INTO tinyagents_events (event_id, root_run_id, "offset", run_id, parent_run_id, depth, kind, ts, event) '
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_COLUMNS = 'seq, event_id, "offset", run_id, parent_run_id, root_run_id, depth, kind, ts, event'
_PAGE = 500


class SQLiteEventJournal(_JournalBase):
    """A durable journal in one SQLite file (WAL); it may share the file with a ``SQLiteStore``.

    Every ``append`` is committed before it returns (about 50 µs on a local disk), so a process killed
    at any point leaves every appended event readable. Other processes may read while a run writes.

    Args:
        path: The database file (parent directories are created) or ``":memory:"``.
        busy_timeout_s: How long an append waits for another writer's lock before ``StoreError``.
        synchronous: ``"normal"`` survives a killed process; ``"full"`` also survives power loss.

    Raises:
        ConfigurationError: The file cannot be opened as a SQLite database, or an argument is invalid.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 5.0,
        synchronous: Literal["normal", "full"] = "normal",
    ) -> None:
        super().__init__()
        # autocommit: each INSERT is one committed transaction (the kill-9 guarantee)
        self._path, self._conn = open_sqlite(
            path,
            owner="SQLiteEventJournal",
            what="SQLite event journal",
            busy_timeout_s=busy_timeout_s,
            synchronous=synchronous,
            schema=_SCHEMA,
        )

    @property
    def path(self) -> str:
        return self._path

    def _error(self, exc: sqlite3.Error) -> StoreError:
        return StoreError(f"SQLite event journal {self._path!r}: {exc}")

    def append(self, observation: AgentObservation) -> None:
        if not isinstance(observation, AgentObservation):
            raise ConfigurationError(f"journals append AgentObservation, got {type(observation).__name__}")
        o = observation
        row = (o.event_id, o.root_run_id, o.offset, o.run_id, o.parent_run_id, o.depth, o.kind, o.ts)
        text = _dumps(_event_dict(o.event))
        with self._lock:
            self._check_open()
            try:
                self._conn.execute(_INSERT, (*row, text))
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    def _select(self, query: _Query, after_seq: int, limit: int | None) -> list[tuple[int, AgentObservation]]:
        clauses: list[str] = ['"offset" >= ?', "seq > ?"]
        params: list[object] = [query.offset, after_seq]
        if query.root_run_id is not None:
            clauses.append("root_run_id = ?")
            params.append(query.root_run_id)
        if query.run_id is not None:
            clauses.append("run_id = ?")
            params.append(query.run_id)
        if query.kinds is not None:
            if not query.kinds:
                return []
            clauses.append(f"kind IN ({', '.join('?' * len(query.kinds))})")
            params.extend(sorted(query.kinds))
        sql = f"SELECT {_COLUMNS} FROM tinyagents_events WHERE {' AND '.join(clauses)} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            self._check_open()
            try:
                rows = self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
        return [(int(row[0]), _row_observation(row)) for row in rows]

    def _read(self, query: _Query) -> list[AgentObservation]:
        return [obs for _, obs in self._select(query, 0, query.limit)]

    def _iterate(self, query: _Query) -> Iterator[AgentObservation]:
        """Lazily, a page at a time; events appended while iterating are included."""
        with self._lock:
            self._check_open()  # fail now, not on the first next()
        return self._pages(query)

    def _pages(self, query: _Query) -> Iterator[AgentObservation]:
        seq = 0
        while True:
            page = self._select(query, seq, _PAGE)
            for position, obs in page:
                seq = position
                yield obs
            if len(page) < _PAGE:
                return

    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            try:
                return int(self._conn.execute("SELECT COUNT(*) FROM tinyagents_events").fetchone()[0])
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __repr__(self) -> str:
        return f"SQLiteEventJournal({self._path!r})"


def _row_observation(row: tuple[Any, ...]) -> AgentObservation:
    _, event_id, offset, run_id, parent, root, depth, kind, ts, text = row
    return AgentObservation.from_dict(
        {
            "event_id": event_id,
            "offset": offset,
            "run_id": run_id,
            "parent_run_id": parent,
            "root_run_id": root,
            "depth": depth,
            "kind": kind,
            "ts": ts,
            "event": json.loads(text),
        },
        lenient=True,
    )
