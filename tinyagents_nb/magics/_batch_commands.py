"""``%agent batch status|resume|cancel [JOB] [--model NAME]``: the provider batch jobs of this notebook's maps.

The jobs live in the session's store (the maps' default checkpoint), so they survive a kernel
restart. ``status`` lists them (or asks the provider about one), ``resume`` waits for a job to end
at the provider and says how to collect it (run the map cell again: it re-attaches and sends
nothing twice), ``cancel`` cancels one at the provider. The host and key are those of the model
the job was sent with: ``--model`` names a registered model, else ``provider:model`` from the journal.
"""

from __future__ import annotations

import time
from typing import Any

from IPython.core.error import UsageError

from tinyagents_nb.harness import ChatModel, TinyAgentsError
from tinyagents_nb.harness.batch import BatchJobRecord, MapCheckpoint, batch_job_status, batch_jobs, cancel_batch_job

from ._command_host import CommandHost
from ._session import NotebookSession

__all__ = ["batch_command"]

_USAGE = "usage: %agent batch status|resume|cancel [JOB] [--model NAME]"


def _checkpoint(session: NotebookSession) -> MapCheckpoint:
    path = session.store_path
    if not path or path == ":memory:":
        raise UsageError(
            "batch jobs are journaled in the session's store, and this session has none (AgentMagics.store_path)"
        )
    return MapCheckpoint(path)


def _split(args: list[str]) -> tuple[str, str | None, str | None]:
    words = list(args)
    model = None
    if "--model" in words:
        at = words.index("--model")
        if at + 1 >= len(words):
            raise UsageError("--model needs a model name")
        model = words[at + 1]
        del words[at : at + 2]
    if not words or words[0] not in ("status", "resume", "cancel") or len(words) > 2:
        raise UsageError(_USAGE)
    return words[0], (words[1] if len(words) == 2 else None), model


def _model(session: NotebookSession, job: BatchJobRecord, name: str | None) -> ChatModel:
    try:
        return session.resolve_model(name or f"{job.provider}:{job.model}")
    except TinyAgentsError as exc:
        raise UsageError(f"{exc} (hint: name the model the job was sent with: --model NAME)") from None


def _job(store: MapCheckpoint, job_id: str) -> BatchJobRecord:
    for job in batch_jobs(store):
        if job.job_id == job_id:
            return job
    raise UsageError(f"no batch job {job_id!r} in this session's store; %agent batch status lists them")


def _table(jobs: list[BatchJobRecord]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "job": j.job_id,
                "map": j.map_key,
                "provider": j.provider,
                "model": j.model,
                "state": j.state,
                "requests": len(j.custom_ids),
                "submitted": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j.created_at)),
            }
            for j in jobs
        ]
    )


def batch_command(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    """``%agent batch status|resume|cancel [JOB]``."""
    verb, job_id, model_name = _split(args)
    store = _checkpoint(session)
    try:
        if verb == "status" and job_id is None:
            jobs = batch_jobs(store)
            if not jobs:
                print("no batch jobs yet (run %%agent --map NAME --executor batch)")
                return None
            return _table(jobs)
        if job_id is None:
            submitted = [j for j in batch_jobs(store) if j.state == "submitted"]
            if not submitted:
                raise UsageError(f"%agent batch {verb} needs a job id: none is waiting")
            job = submitted[-1]
        else:
            job = _job(store, job_id)
        model = _model(session, job, model_name)
        if verb == "cancel":
            status = session.loop.submit(cancel_batch_job(store, job.job_id, model)).result(timeout=120)
            print(f"batch job {job.job_id}: {status.detail} (its rows stay pending)")
            return None
        status = session.loop.submit(batch_job_status(store, job.job_id, model)).result(timeout=120)
        line = f"batch job {job.job_id} ({job.map_key}): {status.detail}, {status.done + status.failed}/{status.total} answered"
        if verb == "resume":
            line += (
                f"; run the %%agent --map {job.map_key} cell again to collect it (nothing is sent twice)"
                if status.state == "ended"
                else "; still running at the provider: run the map cell again to wait for it and collect it"
            )
        print(line)
        return None
    except TinyAgentsError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
