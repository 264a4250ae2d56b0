"""The durable run store: one SQLite file holding each run's completed steps, so a killed run can resume.

A run is journaled as the ordered steps that matter for continuing it: its input transcript, each
completed model turn (assistant message, usage, model), each tool call that started and each tool
result that finished. Every write is its own committed transaction, so whatever was written before
a ``kill -9`` is read back afterwards. Only messages and usage go in: API keys, headers and server
settings never reach a step.

The file carries a schema version (SQLite's ``user_version``). A file that is not a SQLite database,
or whose tables are damaged, raises ``RunStoreCorrupt``; a file from a newer version raises
``RunStoreVersionError``. Both are detected before anything is written, so such a file is never
overwritten.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from .._cost import CostTracker
from .._errors import ConfigurationError, StoreError
from .._usage import Usage
from ..stores import open_sqlite
from ._owner import LEASE_S, LEASE_SCHEMA, Heartbeat, Lease, alive, me

__all__ = ["Pruned", "RunStore", "RunStoreCorrupt", "RunStoreVersionError", "StoredRun", "StoredStep"]

SCHEMA_VERSION = 1
_HEADER = b"SQLite format 3\x00"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tinyagents_runs (run_id TEXT PRIMARY KEY, status TEXT NOT NULL, "
    "agent TEXT, model TEXT, prompt TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL, started_at REAL NOT NULL, "
    "ended_at REAL, resumed_from TEXT, from_step INTEGER, resumed_by TEXT)",
    "CREATE TABLE IF NOT EXISTS tinyagents_steps (run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, "
    "data TEXT NOT NULL, ts REAL NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID",
    LEASE_SCHEMA,
)

RunStatus = Literal["running", "completed", "failed", "cancelled", "interrupted", "resumed"]


class RunStoreCorrupt(StoreError):
    """The run store's file is not a readable run store; it was left untouched."""


class RunStoreVersionError(StoreError):
    """The run store was written by a newer TinyAgents-NB; it was left untouched."""


@dataclass(frozen=True, slots=True)
class Pruned:
    """What ``RunStore.prune`` removed: whole runs, journaled events and chat threads."""

    runs: int = 0
    events: int = 0
    threads: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(self.runs + other.runs, self.events + other.events, self.threads + other.threads)

    def __bool__(self) -> bool:
        return bool(self.runs or self.events or self.threads)


@dataclass(frozen=True, slots=True)
class StoredStep:
    """One journaled step: ``kind`` is ``input``, ``model``, ``tool.started`` or ``tool.done`` (``sub.*`` for a sub-agent's)."""

    seq: int
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredRun:
    """What the store knows about one run: its status (``interrupted`` when its process died) and spend."""

    run_id: str
    status: RunStatus
    agent: str | None
    model: str | None
    prompt: str
    started_at: float
    ended_at: float | None
    steps: int
    model_calls: int
    tool_calls: int
    usage: Usage
    cost_usd: Decimal | None
    resumed_from: str | None
    from_step: int | None
    resumed_by: str | None


def _is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


class RunStore:
    """A SQLite file of run steps, shared by the process that runs and the one that resumes.

    A run started here is ``running`` for every reader while this process lives, and
    ``interrupted`` once it is gone: see ``_owner`` for how a reader tells (host, pid, process start
    time, and a heartbeat this store refreshes every ``lease_s / 3`` while it has started runs).

    Args:
        path: The database file (parent folders are created) or ``":memory:"``.
        lease_s: How long a heartbeat vouches for its process, for readers that cannot probe it
            (another host sharing the folder, or no process start times on this platform).

    Raises:
        RunStoreCorrupt: The file exists but is not a run store SQLite can read.
        RunStoreVersionError: The file was written by a newer schema version.
    """

    def __init__(self, path: str | os.PathLike[str], *, lease_s: float = LEASE_S) -> None:
        if not lease_s > 0:
            raise ConfigurationError(f"lease_s must be > 0 seconds, got {lease_s!r}")
        self._path = os.fspath(path)
        self._lock = threading.RLock()
        self.lease_s = float(lease_s)
        self._heartbeat: Heartbeat[RunStore] | None = None
        self._heartbeat_pid = -1
        self._check_file()  # before anything could write to it
        try:
            _, self._conn = open_sqlite(
                self._path,
                owner="RunStore",
                what="run store",
                busy_timeout_s=5.0,
                synchronous="normal",  # survives a killed process (the guarantee); "full" adds an fsync per step
                schema=(*_SCHEMA, f"PRAGMA user_version = {SCHEMA_VERSION}"),
            )
        except ConfigurationError as exc:
            if isinstance(exc.__cause__, sqlite3.DatabaseError) and not _is_busy(exc.__cause__):
                raise RunStoreCorrupt(f"run store {self._path!r} is damaged: {exc.__cause__}") from exc
            raise StoreError(str(exc)) from exc

    def _check_file(self) -> None:
        """Refuse a file that is not SQLite, or is a newer store, reading it only (never writing)."""
        if self._path == ":memory:" or not os.path.exists(self._path):
            return
        try:
            with open(self._path, "rb") as f:
                head = f.read(len(_HEADER))
        except OSError as exc:
            raise StoreError(f"run store {self._path!r} cannot be read: {exc}") from exc
        if not head:
            return
        if head != _HEADER:
            raise RunStoreCorrupt(
                f"run store {self._path!r} is not a SQLite database; it was left untouched",
                hint="move the file aside (or point store_path elsewhere) to start a new store",
            )
        try:
            conn = sqlite3.connect(f"{Path(self._path).resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
            try:
                version = int(conn.execute("PRAGMA user_version").fetchone()[0])
                if version:  # ours: the tables must be readable
                    conn.execute("SELECT COUNT(*) FROM tinyagents_runs").fetchone()
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc):
                return  # another process is creating it; open_sqlite waits for it
            raise RunStoreCorrupt(f"run store {self._path!r} is damaged: {exc}; it was left untouched") from exc
        if version > SCHEMA_VERSION:
            raise RunStoreVersionError(
                f"run store {self._path!r} has schema version {version}, newer than this version's "
                f"{SCHEMA_VERSION}; it was left untouched",
                hint="upgrade tinyagents-nb, or use another store_path",
            )

    @property
    def path(self) -> str:
        return self._path

    def same_file(self, other: RunStore) -> bool:
        """Whether both stores are the same database file (``:memory:`` stores are only themselves)."""
        if other is self:
            return True
        if ":memory:" in (self._path, other._path):
            return False
        return os.path.realpath(self._path) == os.path.realpath(other._path)

    # ------------------------------------------------------------------ writing
    def _execute(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            try:
                self._conn.execute(sql, params)
            except sqlite3.Error as exc:
                raise StoreError(f"run store {self._path!r}: {exc}") from exc

    def start_run(
        self,
        run_id: str,
        *,
        agent: str | None,
        model: str | None,
        prompt: str,
        resumed_from: str | None = None,
        from_step: int | None = None,
    ) -> None:
        """Record a run as running in this process (a second call for the same run changes nothing)."""
        owner = self._hold_lease()
        self._execute(
            "INSERT OR IGNORE INTO tinyagents_runs (run_id, status, agent, model, prompt, owner, started_at, "
            "resumed_from, from_step) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?)",
            (run_id, agent, model, prompt[:500], owner, time.time(), resumed_from, from_step),
        )

    def _hold_lease(self) -> str:
        """Write this process's lease row (and keep its heartbeat going); returns its owner token."""
        mine = me()
        with self._lock:
            if self._heartbeat is None or self._heartbeat_pid != mine.pid:
                self._execute(
                    "INSERT OR REPLACE INTO tinyagents_leases (owner, host, pid, started, heartbeat_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (mine.token, mine.host, mine.pid, mine.started, time.time()),
                )
                self._heartbeat_pid = mine.pid
                self._heartbeat = Heartbeat(self, RunStore._beat, self.lease_s / 3)
        return mine.token

    def _beat(self) -> None:
        """Refresh this process's heartbeat: one small ``UPDATE``."""
        self._execute("UPDATE tinyagents_leases SET heartbeat_at = ? WHERE owner = ?", (time.time(), me().token))

    def add_step(self, run_id: str, kind: str, data: Mapping[str, Any]) -> None:
        """Append one step, committed before this returns."""
        text = json.dumps(dict(data), ensure_ascii=False, separators=(",", ":"))
        self._execute(
            "INSERT INTO tinyagents_steps (run_id, seq, kind, data, ts) VALUES (?, "
            "(SELECT COALESCE(MAX(seq), -1) + 1 FROM tinyagents_steps WHERE run_id = ?), ?, ?, ?)",
            (run_id, run_id, kind, text, time.time()),
        )

    def end_run(self, run_id: str, status: RunStatus) -> None:
        self._execute(
            "UPDATE tinyagents_runs SET status = ?, ended_at = ? WHERE run_id = ?", (status, time.time(), run_id)
        )

    def mark_resumed(self, run_id: str, by: str) -> None:
        """The interrupted run is continued by ``by``: it is no longer offered for resuming."""
        self._execute(
            "UPDATE tinyagents_runs SET status = 'resumed', resumed_by = ?, ended_at = ? WHERE run_id = ?",
            (by, time.time(), run_id),
        )

    # ------------------------------------------------------------------ reading
    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._conn.execute(sql, params).fetchall())
            except sqlite3.DatabaseError as exc:
                raise RunStoreCorrupt(f"run store {self._path!r} is damaged: {exc}") from exc

    def steps(self, run_id: str) -> list[StoredStep]:
        rows = self._rows("SELECT seq, kind, data FROM tinyagents_steps WHERE run_id = ? ORDER BY seq", (run_id,))
        out: list[StoredStep] = []
        for seq, kind, text in rows:
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise RunStoreCorrupt(f"run store {self._path!r}: step {seq} of run {run_id} is damaged") from exc
            out.append(StoredStep(int(seq), str(kind), data))
        return out

    def get(self, run_id: str) -> StoredRun | None:
        found = self.runs(run_id=run_id)
        return found[0] if found else None

    def runs(self, *, limit: int | None = None, run_id: str | None = None) -> list[StoredRun]:
        """Runs newest first; a run whose process died while it ran is reported ``interrupted``."""
        sql = (
            "SELECT run_id, status, agent, model, prompt, owner, started_at, ended_at, resumed_from, from_step, "
            "resumed_by FROM tinyagents_runs"
        )
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = ?", (run_id,)
        sql += " ORDER BY started_at DESC"
        if limit is not None:
            sql, params = sql + " LIMIT ?", (*params, limit)
        return [self._summary(row) for row in self._rows(sql, params)]

    def _lease(self, owner: str) -> Lease | None:
        rows = self._rows(
            "SELECT owner, host, pid, started, heartbeat_at FROM tinyagents_leases WHERE owner = ?", (owner,)
        )
        if not rows:
            return None
        token, host, pid, started, beat = rows[0]
        return Lease(str(token), str(host), int(pid), None if started is None else float(started), float(beat))

    def owner_alive(self, owner: str) -> bool:
        """Whether the process that owns a running run (its ``owner`` token) is still there."""
        return alive(owner, self._lease(owner), lease_s=self.lease_s)

    def _summary(self, row: tuple[Any, ...]) -> StoredRun:
        run_id, status, agent, model, prompt, owner, started, ended, resumed_from, from_step, resumed_by = row
        if status == "running" and not self.owner_alive(str(owner)):
            status = "interrupted"
        steps = self.steps(str(run_id))
        usage, cost, calls = spend_of(steps)
        return StoredRun(
            run_id=str(run_id),
            status=status,
            agent=agent,
            model=model,
            prompt=str(prompt),
            started_at=float(started),
            ended_at=None if ended is None else float(ended),
            steps=len(steps),
            model_calls=calls,
            tool_calls=sum(1 for s in steps if s.kind == "tool.done"),
            usage=usage,
            cost_usd=cost,
            resumed_from=resumed_from,
            from_step=from_step,
            resumed_by=resumed_by,
        )

    # ------------------------------------------------------------------ retention
    def prune(
        self, *, keep_days: float | None = None, max_mb: float | None = None, keep_threads: tuple[str, ...] = ()
    ) -> Pruned:
        """Forget what is older than ``keep_days``, then the oldest until the file's data fits ``max_mb``.

        Runs (with their steps), journaled events and chat threads go by age: a run by when it started,
        an event by its time, a thread by its last message. A run still running in a live process and
        the threads in ``keep_threads`` are never removed. Other tables in the file (batch jobs,
        session settings) are left alone. A file shrunk for ``max_mb`` is vacuumed, once.
        """
        now = time.time()
        pruned = Pruned()
        if keep_days is not None:
            pruned += self._prune_before(now - keep_days * 86_400.0, keep_threads)
        if max_mb is not None:
            budget, shrunk = int(max_mb * 1_000_000), Pruned()
            for _ in range(8):  # each round drops the older half of what is left
                if self._used_bytes() <= budget:
                    break
                cutoff = self._median_time()
                if cutoff is None:
                    break
                shrunk += self._prune_before(cutoff, keep_threads)
            if shrunk and self._path != ":memory:":
                self._execute("VACUUM", ())
                self._rows("PRAGMA wal_checkpoint(TRUNCATE)", ())  # the space leaves the write-ahead log too
            pruned += shrunk
        return pruned

    def _tables(self) -> set[str]:
        return {str(r[0]) for r in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'", ())}

    def _used_bytes(self) -> int:
        pages = self._rows("PRAGMA page_count", ())[0][0]
        free = self._rows("PRAGMA freelist_count", ())[0][0]
        size = self._rows("PRAGMA page_size", ())[0][0]
        return int((pages - free) * size)

    def _median_time(self) -> float | None:
        """The time that splits what the file holds (runs' starts and events) into an older and a newer half."""
        times = [float(r[0]) for r in self._rows("SELECT started_at FROM tinyagents_runs", ())]
        if "tinyagents_events" in self._tables():
            times += [float(r[0]) for r in self._rows("SELECT ts FROM tinyagents_events", ())]
        if len(times) < 2:
            return None
        times.sort()
        return times[len(times) // 2]

    def _prune_before(self, cutoff: float, keep_threads: tuple[str, ...]) -> Pruned:
        tables = self._tables()
        old = [
            (str(run_id), str(status), str(owner))
            for run_id, status, owner in self._rows(
                "SELECT run_id, status, owner FROM tinyagents_runs WHERE started_at < ?", (cutoff,)
            )
        ]
        gone = [run_id for run_id, status, owner in old if status != "running" or not self.owner_alive(owner)]
        live = {
            str(r[0]) for r in self._rows("SELECT DISTINCT owner FROM tinyagents_runs WHERE status = 'running'", ())
        }
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                for run_id in gone:
                    self._conn.execute("DELETE FROM tinyagents_steps WHERE run_id = ?", (run_id,))
                    self._conn.execute("DELETE FROM tinyagents_runs WHERE run_id = ?", (run_id,))
                for (owner,) in self._conn.execute(
                    "SELECT owner FROM tinyagents_leases WHERE heartbeat_at < ?", (cutoff,)
                ).fetchall():
                    if str(owner) not in live:  # a lease nobody's running run names any more
                        self._conn.execute("DELETE FROM tinyagents_leases WHERE owner = ?", (owner,))
                events = 0
                if "tinyagents_events" in tables:
                    events = self._conn.execute("DELETE FROM tinyagents_events WHERE ts < ?", (cutoff,)).rowcount
                threads = 0
                if "tinyagents_kv" in tables:
                    stale = [
                        str(r[0])
                        for r in self._conn.execute(
                            "SELECT namespace FROM tinyagents_kv WHERE namespace LIKE 'threads' || char(31) || '%' "
                            "GROUP BY namespace HAVING MAX(updated_at) < ?",
                            (cutoff,),
                        ).fetchall()
                    ]
                    keep = {f"threads\x1f{t}" for t in keep_threads}
                    for namespace in stale:
                        if namespace not in keep:
                            self._conn.execute("DELETE FROM tinyagents_kv WHERE namespace = ?", (namespace,))
                            threads += 1
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise StoreError(f"run store {self._path!r}: pruning failed: {exc}") from exc
        return Pruned(runs=len(gone), events=events, threads=threads)

    def close(self) -> None:
        with self._lock:
            if self._heartbeat is not None:
                self._heartbeat.stop()
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunStore({self._path!r})"


def usage_dict(usage: Usage) -> dict[str, Any]:
    return asdict(usage)


def spend_of(steps: list[StoredStep]) -> tuple[Usage, Decimal | None, int]:
    """The usage, priced cost (``None`` if any call has no known price) and model calls of some steps."""
    pricing = CostTracker()
    total, cost, calls = Usage(), Decimal(0), 0
    unknown = False
    for step in steps:
        if step.kind not in ("model", "sub.model") or step.data.get("cached"):
            continue
        usage = Usage(**step.data.get("usage", {}))
        total, calls = total + usage, calls + 1
        priced, _ = pricing.price(
            str(step.data.get("model") or "unknown"), usage, step.data.get("provider"), warn=False
        )
        if priced is None:
            unknown = True
        else:
            cost += priced.total_usd
    return total, None if unknown and calls else cost, calls
