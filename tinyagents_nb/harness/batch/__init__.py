"""Agents over data: one agent run per row of a DataFrame, locally, on a provider's Batch API, or on Ray/Dask.

``agent_map(df, "Classify: {{review}}", model=..., output=Label)`` runs a full harness run per row
(tools, structured output, retries, limits) inside one run tree, so tree budgets bound the whole
map, and returns the rows with the output's fields and ``status``/``error``/``tokens``/``cost_usd``
columns. A ``checkpoint`` makes it resumable, ``rate_limits`` shares requests and tokens per minute
between the rows, and ``MapProgress`` is what a dashboard watches. pandas is imported lazily.
"""

from __future__ import annotations

from ._batch_api import JobStatus as JobStatus
from ._batch_jobs import (
    batch_job_status as batch_job_status,
    batch_jobs as batch_jobs,
    cancel_batch_job as cancel_batch_job,
)
from ._checkpoint import MapCheckpoint as MapCheckpoint
from ._jobs import BatchJobRecord as BatchJobRecord
from ._map import (
    Executor as Executor,
    agent_map as agent_map,
    agent_map_async as agent_map_async,
)
from ._progress import (
    MapProgress as MapProgress,
    MapSnapshot as MapSnapshot,
    MapState as MapState,
)
from ._rate import RateLimits as RateLimits
from ._rows import (
    Prompt as Prompt,
    RowStatus as RowStatus,
)

__all__ = [
    "BatchJobRecord",
    "Executor",
    "JobStatus",
    "MapCheckpoint",
    "MapProgress",
    "MapSnapshot",
    "MapState",
    "Prompt",
    "RateLimits",
    "RowStatus",
    "agent_map",
    "agent_map_async",
    "batch_job_status",
    "batch_jobs",
    "cancel_batch_job",
]
