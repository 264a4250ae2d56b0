"""The journal of provider batch jobs, in the map's checkpoint file, so a restarted kernel re-attaches.

A job is recorded the moment the provider returns its id, with the custom ids of its requests
(row keys and prompt digests only: never a prompt, a header or a key) and the host's public URL.
A re-run of the same map finds its ``submitted`` jobs here and collects their results instead of
paying for the same requests twice; ``%agent batch status|resume|cancel`` read and act on it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from ..providers.wire import scrub
from ._checkpoint import MapCheckpoint

__all__ = ["BatchJobRecord", "JobJournal", "JournalState"]

JournalState = Literal["submitted", "cancelling", "collected", "cancelled", "failed"]
"""``cancelling``: Stop asked the provider to cancel; what it finished before (and billed) is still collected."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchJobRecord:
    """One journaled job."""

    job_id: str
    map_key: str
    provider: str
    base_url: str
    model: str
    state: JournalState
    custom_ids: tuple[str, ...]
    created_at: float
    updated_at: float


class JobJournal:
    """Batch jobs of every map in one checkpoint."""

    def __init__(self, checkpoint: MapCheckpoint) -> None:
        self._db = checkpoint.db

    def add(
        self, *, job_id: str, map_key: str, provider: str, base_url: str, model: str, custom_ids: list[str]
    ) -> None:
        now = time.time()
        self._db.execute(
            "INSERT OR REPLACE INTO agent_map_jobs VALUES (?,?,?,?,?,?,?,?,?,?)",
            (job_id, map_key, provider, scrub(base_url), model, "submitted", json.dumps(custom_ids), None, now, now),
        )

    def set_state(self, job_id: str, state: JournalState) -> None:
        self._db.execute(
            "UPDATE agent_map_jobs SET state = ?, updated_at = ? WHERE job_id = ?", (state, time.time(), job_id)
        )

    def jobs(self, map_key: str | None = None, *, state: JournalState | None = None) -> list[BatchJobRecord]:
        query = (
            "SELECT job_id, map_key, provider, base_url, model, state, rows, created_at, updated_at FROM agent_map_jobs"
        )
        clauses: list[str] = []
        params: list[Any] = []
        if map_key is not None:
            clauses.append("map_key = ?")
            params.append(map_key)
        if state is not None:
            clauses.append("state = ?")
            params.append(state)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY created_at"
        return [
            BatchJobRecord(
                job_id=job_id,
                map_key=key,
                provider=provider,
                base_url=url,
                model=model,
                state=job_state,
                custom_ids=tuple(json.loads(rows)),
                created_at=created,
                updated_at=updated,
            )
            for job_id, key, provider, url, model, job_state, rows, created, updated in self._db.execute(query, params)
        ]

    def get(self, job_id: str) -> BatchJobRecord | None:
        found = [job for job in self.jobs() if job.job_id == job_id]
        return found[0] if found else None
