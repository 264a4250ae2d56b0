"""Resumable maps: each finished row is committed to SQLite as it ends, so a re-run does only the rest.

A row is stored under its map's key and its index label, with a digest of its prompt: a re-run
reuses a row only when its prompt is unchanged (an edited row, or an edited template, runs again).
Only what the result frame shows is stored (the output as JSON, a scrubbed error message, tokens,
cost): never the prompt, the request, headers or keys. Batch jobs are journaled in the same file
(see ``_jobs``), so one checkpoint holds everything a restarted kernel needs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ..providers.wire import scrub
from ..stores import open_sqlite
from ._rows import RowOutcome

__all__ = ["MapCheckpoint"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS agent_map_rows (
        map_key TEXT NOT NULL,
        row_key TEXT NOT NULL,
        prompt_digest TEXT NOT NULL,
        status TEXT NOT NULL,
        output TEXT,
        error TEXT,
        tokens INTEGER NOT NULL,
        cost_usd REAL,
        finished_at REAL NOT NULL,
        PRIMARY KEY (map_key, row_key)
    )""",
    """CREATE TABLE IF NOT EXISTS agent_map_jobs (
        job_id TEXT PRIMARY KEY,
        map_key TEXT NOT NULL,
        provider TEXT NOT NULL,
        base_url TEXT NOT NULL,
        model TEXT NOT NULL,
        state TEXT NOT NULL,
        rows TEXT NOT NULL,
        input_file TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
)


class MapCheckpoint:
    """A SQLite file of finished rows (and batch jobs), shared by every map that names it.

    Args:
        path: The database file (created with its folder), or ``":memory:"``.

    Raises:
        ConfigurationError: The file cannot be opened as a database.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path, self._db = open_sqlite(
            path,
            owner="MapCheckpoint",
            what="map checkpoint",
            busy_timeout_s=5.0,
            synchronous="normal",
            schema=_SCHEMA,
        )

    @property
    def db(self) -> Any:
        """The connection (for ``_jobs``, which journals batch jobs in the same file)."""
        return self._db

    def load(self, map_key: str) -> dict[str, tuple[str, RowOutcome]]:
        """Every stored row of ``map_key``: its prompt digest and outcome, by row key."""
        out: dict[str, tuple[str, RowOutcome]] = {}
        cursor = self._db.execute(
            "SELECT row_key, prompt_digest, status, output, error, tokens, cost_usd"
            " FROM agent_map_rows WHERE map_key = ?",
            (map_key,),
        )
        for row_key, digest, status, output, error, tokens, cost in cursor:
            value = json.loads(output) if output is not None else None
            out[row_key] = (digest, RowOutcome(status=status, output=value, error=error, tokens=tokens, cost_usd=cost))
        return out

    def record(self, map_key: str, row_key: str, digest: str, outcome: RowOutcome) -> None:
        """Commit one finished row now (autocommit: a killed kernel keeps every row recorded before it)."""
        self.record_many(map_key, ((row_key, digest, outcome),))

    def record_many(self, map_key: str, rows: Iterable[tuple[str, str, RowOutcome]]) -> None:
        """Commit several finished rows in one transaction (batch results arrive by the thousand)."""
        now = time.time()
        params = [
            (
                map_key,
                key,
                digest,
                o.status,
                json.dumps(o.output, default=str) if o.output is not None else None,
                scrub(o.error) if o.error is not None else None,
                o.tokens,
                o.cost_usd,
                now,
            )
            for key, digest, o in rows
        ]
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO agent_map_rows VALUES (?,?,?,?,?,?,?,?,?)", params)

    def forget(self, map_key: str) -> int:
        """Drop every stored row of ``map_key`` (a fresh start); returns how many there were."""
        cursor = self._db.execute("DELETE FROM agent_map_rows WHERE map_key = ?", (map_key,))
        return int(cursor.rowcount)

    def maps(self) -> dict[str, dict[str, int]]:
        """Per map key, how many rows are stored in each status."""
        out: dict[str, dict[str, int]] = {}
        for key, status, count in self._db.execute(
            "SELECT map_key, status, COUNT(*) FROM agent_map_rows GROUP BY map_key, status"
        ):
            out.setdefault(key, {})[status] = count
        return out

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> MapCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MapCheckpoint({self.path!r})"


class _Transaction:
    __slots__ = ("_db",)

    def __init__(self, db: Any) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, kind: object, *rest: object) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")


def iter_rows(checkpoint: MapCheckpoint, map_key: str) -> Iterator[tuple[str, str]]:
    """(row key, status) of every stored row of ``map_key`` (for status displays)."""
    yield from checkpoint.db.execute("SELECT row_key, status FROM agent_map_rows WHERE map_key = ?", (map_key,))
