"""Runtime details: identifiers and clocks, run status, accounting records, retry helpers and tags.

What tests, dashboards and integrations need beside the front namespace: typed ids (``RunId``,
``ThreadId`` ...), the clock and id sources, run phases and the live run status, cost and usage
records, limit kinds, and the tags the harness puts on messages (``RETRIEVED_TAG``, ``REPAIR_TAG``,
``TRUNCATED_TAG``). Also the small helpers whose results the harness records, so that code outside
it can produce the same values: ``arguments_sha256`` (the digest in ``approval.decided`` events, to
match an audit log against the arguments a tool ran with), ``freeze_json``/``freeze_json_object``/
``thaw_json`` (how ``metadata`` and ``configurable`` are validated and frozen), and
``describe_error`` (the ``"Type: message"`` line of error reports, which never raises).
"""

from __future__ import annotations

from ._approval import (
    arguments_sha256 as arguments_sha256,
)
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
from ._errors import (
    describe_error as describe_error,
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
from ._json import (
    freeze_json as freeze_json,
    freeze_json_object as freeze_json_object,
    thaw_json as thaw_json,
)
from ._limits import (
    LimitKind as LimitKind,
    LimitTracker as LimitTracker,
)
from ._messages import (
    REPAIR_TAG as REPAIR_TAG,
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
    "REPAIR_TAG",
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
    "arguments_sha256",
    "call_with_retry",
    "describe_error",
    "freeze_json",
    "freeze_json_object",
    "is_retryable",
    "thaw_json",
]
