"""Batch jobs by hand: list the journaled jobs, ask a provider where one is, cancel one.

What ``%agent batch status|resume|cancel`` does, usable from any Python program. A job's results
are collected by running its map again (same checkpoint, same map): the map re-attaches to the
journaled job and sends nothing twice. These functions take the model the job was sent with, for
its host and credentials (the journal keeps neither key nor header).
"""

from __future__ import annotations

from .._errors import ConfigurationError
from .._model import ChatModel
from ._batch_api import JobStatus
from ._batch_exec import batch_api_for
from ._checkpoint import MapCheckpoint
from ._jobs import BatchJobRecord, JobJournal

__all__ = ["batch_job_status", "batch_jobs", "cancel_batch_job"]


def batch_jobs(checkpoint: MapCheckpoint, map_name: str | None = None) -> list[BatchJobRecord]:
    """Every journaled job (of one map, or all), oldest first."""
    return JobJournal(checkpoint).jobs(map_name)


def _job(checkpoint: MapCheckpoint, job_id: str) -> BatchJobRecord:
    job = JobJournal(checkpoint).get(job_id)
    if job is None:
        raise ConfigurationError(f"no batch job {job_id!r} in {checkpoint.path}", hint="list them with batch_jobs()")
    return job


async def batch_job_status(checkpoint: MapCheckpoint, job_id: str, model: ChatModel) -> JobStatus:
    """Where the provider says the job is (the journal is not changed)."""
    _job(checkpoint, job_id)
    api = batch_api_for(model)
    try:
        return await api.status(job_id)
    finally:
        await api.aclose()


async def cancel_batch_job(checkpoint: MapCheckpoint, job_id: str, model: ChatModel) -> JobStatus:
    """Ask the provider to cancel the job and mark it cancelled in the journal (its rows stay pending)."""
    _job(checkpoint, job_id)
    api = batch_api_for(model)
    try:
        status = await api.cancel(job_id)
    finally:
        await api.aclose()
    JobJournal(checkpoint).set_state(job_id, "cancelled")
    return status
