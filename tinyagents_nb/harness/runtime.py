"""Runtime details: identifiers and clocks, run status, accounting records, retry helpers and tags.

What tests, dashboards and integrations need beside the front namespace: typed ids (``RunId``,
``ThreadId`` ...), the clock and id sources, run phases and the live run status, cost and usage
records, limit kinds, and the tags the harness puts on messages (``RETRIEVED_TAG``, ``TRUNCATED_TAG``).
"""

from __future__ import annotations

from ._clock import (
    RANDOM_IDS as RANDOM_IDS,
    SYSTEM_CLOCK as SYSTEM_CLOCK,
    Clock as Clock,
    IdSource as IdSource,
)
from ._cost import (
    CostBreakdown as CostBreakdown,
    CostRecord as CostRecord,
    CostUnknownWarning as CostUnknownWarning,
    PriceSource as PriceSource,
)
from ._ids import (
    CallId as CallId,
    CellId as CellId,
    EventId as EventId,
    Identifier as Identifier,
    RunId as RunId,
    SessionId as SessionId,
    ThreadId as ThreadId,
)
from ._limits import (
    LimitKind as LimitKind,
    LimitTracker as LimitTracker,
)
from ._messages import (
    RETRIEVED_TAG as RETRIEVED_TAG,
)
from ._retry import (
    call_with_retry as call_with_retry,
    is_retryable as is_retryable,
)
from ._run import (
    HarnessRunStatus as HarnessRunStatus,
    RunPhase as RunPhase,
    RunStatus as RunStatus,
)
from ._stream import (
    MODE_KINDS as MODE_KINDS,
)
from ._subagent import (
    SUBAGENT_INPUT_FIELD as SUBAGENT_INPUT_FIELD,
)
from ._tool_results import (
    TRUNCATED_TAG as TRUNCATED_TAG,
    ToolResultLimit as ToolResultLimit,
)
from ._usage import (
    UsageRecord as UsageRecord,
)

__all__ = [
    "CallId",
    "CellId",
    "Clock",
    "CostBreakdown",
    "CostRecord",
    "CostUnknownWarning",
    "EventId",
    "HarnessRunStatus",
    "IdSource",
    "Identifier",
    "LimitKind",
    "LimitTracker",
    "MODE_KINDS",
    "PriceSource",
    "RANDOM_IDS",
    "RETRIEVED_TAG",
    "RunId",
    "RunPhase",
    "RunStatus",
    "SUBAGENT_INPUT_FIELD",
    "SYSTEM_CLOCK",
    "SessionId",
    "TRUNCATED_TAG",
    "ThreadId",
    "ToolResultLimit",
    "UsageRecord",
    "call_with_retry",
    "is_retryable",
]
