"""Durable runs: journal each completed step to SQLite and resume a run a crash or restart interrupted.

``DurableJournal`` (middleware) writes a root run's input, model answers and tool results to a
``RunStore``; ``AgentHarness.resume(run_id, store=...)`` rebuilds the run from it and continues
(``resume_streaming`` does it as a run handle, whose approvals and Stop work while it settles).
``RunStore.runs()`` lists runs, reporting those whose process died as ``interrupted``.
"""

from __future__ import annotations

from ._journal_mw import DurableJournal as DurableJournal
from ._names import bound_names as bound_names
from ._resume import ResumePlan as ResumePlan, plan_resume as plan_resume
from ._resume_stream import resume_run as resume_run, resume_streaming as resume_streaming
from ._run_store import (
    Pruned as Pruned,
    RunStore as RunStore,
    RunStoreCorrupt as RunStoreCorrupt,
    RunStoreVersionError as RunStoreVersionError,
    StoredRun as StoredRun,
)

__all__ = [
    "DurableJournal",
    "Pruned",
    "ResumePlan",
    "RunStore",
    "RunStoreCorrupt",
    "RunStoreVersionError",
    "StoredRun",
    "bound_names",
    "plan_resume",
    "resume_run",
    "resume_streaming",
]
