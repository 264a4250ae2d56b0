"""The event catalogue: one frozen dataclass per lifecycle boundary.

Every event carries its run's lineage (``run_id``, ``parent_run_id``, ``root_run_id``, ``depth``) and a
wall-clock ``ts``, so one shared sink can show a whole recursion tree and a journal can rebuild it
off-process. ``kind`` is a stable dotted string (``"model.delta"``); journals, trajectory asserts and
the notebook dashboard filter on it, so kinds are never renamed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from ._event_dict import event_to_dict as event_to_dict
from ._limits import LimitKind
from ._messages import MessageDelta
from ._usage import Usage

__all__ = [
    "AgentEvent",
    "ApprovalDecided",
    "ApprovalRequested",
    "CacheHit",
    "CacheMiss",
    "ContextPressure",
    "ControlApplied",
    "CostRecorded",
    "FallbackUsed",
    "LimitReached",
    "MemoryLoaded",
    "MemorySaved",
    "MiddlewareCompleted",
    "MiddlewareStarted",
    "ModelCompleted",
    "ModelDelta",
    "ModelDiscarded",
    "ModelFailed",
    "ModelRetracted",
    "ModelSelected",
    "ModelStarted",
    "RateLimitWaited",
    "RetryScheduled",
    "RunCancelledEvent",
    "RunCompleted",
    "RunFailed",
    "RunResumed",
    "RunStarted",
    "SteeringApplied",
    "StructuredRepair",
    "SubAgentCompleted",
    "SubAgentReused",
    "SubAgentStarted",
    "ToolCompleted",
    "ToolDeltaEvent",
    "ToolFailed",
    "ToolReplayed",
    "ToolStarted",
    "UsageRecorded",
    "event_to_dict",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentEvent:
    """Base of every event: what happened (``kind``), in which run of the tree, and when."""

    kind: str = "event"
    run_id: str
    parent_run_id: str | None = None
    root_run_id: str
    depth: int = 0
    ts: float = field(default_factory=time.time)


# ------------------------------------------------------------------------------------------ run
@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(AgentEvent):
    kind: Literal["run.started"] = "run.started"
    thread_id: str | None = None
    model: str | None = None
    input: str = ""
    agent: str | None = None
    provider: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunCompleted(AgentEvent):
    kind: Literal["run.completed"] = "run.completed"
    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    tool_calls: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFailed(AgentEvent):
    kind: Literal["run.failed"] = "run.failed"
    error_type: str
    error: str
    duration_s: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResumed(AgentEvent):
    """A resumed run continues ``resumed_from`` (from its step ``from_step``); just after ``run.started``.

    ``model_calls`` were made in the run's tree before the interruption (its ``usage`` includes them);
    the tool calls answered before it follow, one ``tool.replayed`` each.
    """

    kind: Literal["run.resumed"] = "run.resumed"
    resumed_from: str
    from_step: int = 0
    model_calls: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class RunCancelledEvent(AgentEvent):
    """The run ended cancelled (named with ``Event`` to stay apart from the ``RunCancelled`` error)."""

    kind: Literal["run.cancelled"] = "run.cancelled"
    reason: str | None = None
    duration_s: float = 0.0


# ------------------------------------------------------------------------------------------ model
@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSelected(AgentEvent):
    """Which model serves call ``call_id`` when it is not simply the harness's primary model, and why.

    ``reason`` is ``fallback`` (the previous model failed), ``configurable`` (the run's
    ``RunConfig.configurable["model"]`` chose it), ``capabilities`` (the request's required
    capabilities skipped the first choice) or ``request`` (a middleware named it in
    ``ModelRequest.model``); emitted just before that model's ``model.started``, whose request was
    re-fitted to the chosen model's window when that is smaller.
    A call served by the primary model as configured emits none, keeping the common path quiet.
    """

    kind: Literal["model.selected"] = "model.selected"
    call_id: str
    model: str
    provider: str | None = None
    reason: str = "fallback"


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelStarted(AgentEvent):
    kind: Literal["model.started"] = "model.started"
    call_id: str
    model: str
    provider: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelDelta(AgentEvent):
    """One streamed fragment of model call ``call_id``.

    ``attempt`` numbers the call's stream attempts (retries and fallbacks included, from 1): the text
    of an attempt later named by ``model.discarded`` is not part of the answer.
    """

    kind: Literal["model.delta"] = "model.delta"
    call_id: str
    delta: MessageDelta
    attempt: int = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelDiscarded(AgentEvent):
    """A streamed attempt failed and another attempt follows: drop its deltas (``call_id`` + ``attempt``)."""

    kind: Literal["model.discarded"] = "model.discarded"
    call_id: str
    attempt: int
    reason: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRetracted(AgentEvent):
    """An answer already streamed (or answered) was withdrawn: an output guardrail tripped on it.

    Consumers hide the text of ``call_id`` (not strike it through: it was blocked for its content);
    the run also drops the answer from its transcript, so records and threads never keep it.
    """

    kind: Literal["model.retracted"] = "model.retracted"
    call_id: str
    reason: str = ""
    guardrail: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCompleted(AgentEvent):
    kind: Literal["model.completed"] = "model.completed"
    call_id: str
    model: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    duration_s: float = 0.0
    cached: bool = False
    provider: str | None = None
    response_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelFailed(AgentEvent):
    kind: Literal["model.failed"] = "model.failed"
    call_id: str
    model: str
    error_type: str
    error: str
    attempt: int = 1


# ------------------------------------------------------------------------------------------ tool
@dataclass(frozen=True, kw_only=True, slots=True)
class ToolStarted(AgentEvent):
    kind: Literal["tool.started"] = "tool.started"
    call_id: str
    tool_name: str
    arguments: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCompleted(AgentEvent):
    kind: Literal["tool.completed"] = "tool.completed"
    call_id: str
    tool_name: str
    output: str = ""
    is_error: bool = False
    duration_s: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolFailed(AgentEvent):
    """A started tool call that ended without a result.

    ``status`` says how: ``failed`` (it raised), ``timed_out`` (the run's deadline) or ``cancelled``
    (a Stop, or the run's task was cancelled, while it ran).
    """

    kind: Literal["tool.failed"] = "tool.failed"
    call_id: str
    tool_name: str
    error_type: str
    error: str
    duration_s: float = 0.0
    status: str = "failed"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolReplayed(AgentEvent):
    """A resumed run's call answered before the interruption, from its journal: never run again, no span."""

    # so a resumed run's record and counts cover every tool call of the job

    kind: Literal["tool.replayed"] = "tool.replayed"
    call_id: str
    tool_name: str
    arguments: Any = None
    output: str = ""
    is_error: bool = False


# ------------------------------------------------------------------------------------------ approvals
@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequested(AgentEvent):
    """A tool call that needs approval is waiting (or is about to be decided by a policy)."""

    kind: Literal["approval.requested"] = "approval.requested"
    call_id: str
    tool_name: str
    arguments: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalDecided(AgentEvent):
    """How an approval request ended.

    ``decided_by`` is ``person``, ``policy`` (the tool's rule), ``unattended`` (nobody could answer)
    or ``withdrawn`` (a Stop or the deadline ended the wait); ``arguments_sha256`` hashes the
    canonical JSON of the exact arguments approved, and ``arguments`` holds them when edited.
    """

    kind: Literal["approval.decided"] = "approval.decided"
    call_id: str
    tool_name: str
    approved: bool
    decided_by: str
    decider: str | None = None
    reason: str | None = None
    arguments_sha256: str = ""
    edited: bool = False
    arguments: Any = None
    decided_at: float = 0.0
    wait_s: float = 0.0
    rerun: bool = False  # about a call an interruption cut off, asked by a resumed run


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDeltaEvent(AgentEvent):
    """Progress reported by a running tool (``ToolDelta``); named with ``Event`` to stay apart from it."""

    kind: Literal["tool.delta"] = "tool.delta"
    call_id: str
    tool_name: str
    message: str = ""
    progress: float | None = None
    data: Any = None


# ------------------------------------------------------------------------------------------ sub-agents
@dataclass(frozen=True, kw_only=True, slots=True)
class SubAgentStarted(AgentEvent):
    """Emitted by the parent run; ``child_run_id`` is the node it adds to the tree.

    ``call_id`` is the parent's tool call that started it, when it runs inside one (a tracer nests
    the child under that call).
    """

    kind: Literal["subagent.started"] = "subagent.started"
    name: str
    child_run_id: str
    call_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SubAgentCompleted(AgentEvent):
    kind: Literal["subagent.completed"] = "subagent.completed"
    name: str
    child_run_id: str
    status: str = "completed"
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, kw_only=True, slots=True)
class SubAgentReused(AgentEvent):
    kind: Literal["subagent.reused"] = "subagent.reused"
    name: str
    turn: int


# ------------------------------------------------------------------------------------------ accounting
@dataclass(frozen=True, kw_only=True, slots=True)
class UsageRecorded(AgentEvent):
    kind: Literal["usage.recorded"] = "usage.recorded"
    call_id: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, kw_only=True, slots=True)
class CostRecorded(AgentEvent):
    """``usd`` is ``None`` when the model's price is unknown (never reported as zero)."""

    kind: Literal["cost.recorded"] = "cost.recorded"
    call_id: str | None = None
    model: str | None = None
    usd: Decimal | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitReached(AgentEvent):
    """A limit tripped; ``limit`` is a ``LimitKind`` (a ``str``) or, for a limit it does not name, a string."""

    kind: Literal["limit.reached"] = "limit.reached"
    limit: LimitKind | str
    maximum: float | None = None

    @property
    def limit_kind(self) -> LimitKind | None:
        """``limit`` as a ``LimitKind``, or ``None`` for a limit the enum does not name."""
        found = LimitKind.of(self.limit)
        return found if isinstance(found, LimitKind) else None


# ------------------------------------------------------------------------------------------ resilience
@dataclass(frozen=True, kw_only=True, slots=True)
class RetryScheduled(AgentEvent):
    kind: Literal["retry.scheduled"] = "retry.scheduled"
    call_id: str
    attempt: int
    delay_s: float
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimitWaited(AgentEvent):
    """The rate limiter held call ``call_id`` back for ``waited_s`` seconds (only when it waited)."""

    kind: Literal["rate_limit.waited"] = "rate_limit.waited"
    call_id: str
    waited_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class FallbackUsed(AgentEvent):
    kind: Literal["fallback.used"] = "fallback.used"
    call_id: str
    from_model: str
    to_model: str
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheHit(AgentEvent):
    kind: Literal["cache.hit"] = "cache.hit"
    call_id: str
    key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheMiss(AgentEvent):
    kind: Literal["cache.miss"] = "cache.miss"
    call_id: str
    key: str


# ------------------------------------------------------------------------------------------ control and context
@dataclass(frozen=True, kw_only=True, slots=True)
class SteeringApplied(AgentEvent):
    kind: Literal["steering.applied"] = "steering.applied"
    command: str
    accepted: bool = True
    detail: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ControlApplied(AgentEvent):
    """A hook's control was honoured: ``stop_with_final`` ended the run with ``detail`` as its answer."""

    kind: Literal["control.applied"] = "control.applied"
    control: str
    detail: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class StructuredRepair(AgentEvent):
    """The model's structured answer was invalid; it is asked again with the error (one more model call)."""

    kind: Literal["structured.repair"] = "structured.repair"
    attempt: int
    max_attempts: int
    output: str = ""
    strategy: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextPressure(AgentEvent):
    """One action of the context-pressure chain, with the estimate before and after it."""

    kind: Literal["context.pressure"] = "context.pressure"
    action: str
    tokens_before: int
    tokens_after: int
    limit_tokens: int = 0
    removed_messages: int = 0
    detail: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryLoaded(AgentEvent):
    kind: Literal["memory.loaded"] = "memory.loaded"
    thread_id: str | None = None
    messages: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class MemorySaved(AgentEvent):
    kind: Literal["memory.saved"] = "memory.saved"
    thread_id: str | None = None
    messages: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class MiddlewareStarted(AgentEvent):
    """A middleware hook starts (only with ``RunPolicy(middleware_events=True)``)."""

    kind: Literal["middleware.started"] = "middleware.started"
    middleware: str
    hook: str


@dataclass(frozen=True, kw_only=True, slots=True)
class MiddlewareCompleted(AgentEvent):
    """A middleware hook returned (``error`` names the exception when it raised instead)."""

    kind: Literal["middleware.completed"] = "middleware.completed"
    middleware: str
    hook: str
    duration_s: float = 0.0
    error: str | None = None
