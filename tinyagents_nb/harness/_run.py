"""What a run returns: ``AgentRun`` (the result) and ``HarnessRunStatus`` (its live state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._cost import CostTotals
from ._messages import Message
from ._usage import Usage

if TYPE_CHECKING:
    from ._structured import StructuredOutput

__all__ = ["AgentRun", "HarnessRunStatus", "RunPhase", "RunStatus"]

RunStatus = Literal["running", "completed", "failed", "cancelled"]
RunPhase = Literal["idle", "model", "tools", "paused", "done"]


@dataclass(kw_only=True, slots=True)
class AgentRun:
    """The outcome of one run.

    Attributes:
        run_id: The run.
        messages: The full transcript (input, assistant turns, tool results). On a cancel or failure it
            holds everything up to that point, plus any streamed partial text tagged ``"partial"``.
        final_text: The last assistant message's text (empty unless completed).
        structured: The validated structured output, when one was requested.
        usage: Tokens used by this run and every sub-agent run beneath it.
        cost: Cost of the same subtree (``cost.total_usd`` is ``None`` if any price is unknown).
        status: ``completed``, ``failed`` or ``cancelled``.
        error: The error that ended a failed or cancelled run.
        model_calls: Model calls made by this run (not its children).
        tool_calls: Tool calls answered in this run.
        duration_s: Wall-clock duration.
    """

    run_id: str
    messages: list[Message] = field(default_factory=list)
    final_text: str = ""
    structured: StructuredOutput | None = None
    usage: Usage = field(default_factory=Usage)
    cost: CostTotals | None = None
    status: RunStatus = "completed"
    error: BaseException | None = None
    model_calls: int = 0
    tool_calls: int = 0
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def text(self) -> str:
        return self.final_text

    def __repr__(self) -> str:
        return (
            f"AgentRun(run_id={self.run_id!r}, status={self.status!r}, messages={len(self.messages)}, "
            f"model_calls={self.model_calls}, tool_calls={self.tool_calls}, usage={self.usage.total_tokens} tokens)"
        )


@dataclass(kw_only=True, slots=True)
class HarnessRunStatus:
    """The live state of a run, updated at every phase change (cheap attribute writes only)."""

    run_id: str
    parent_run_id: str | None
    root_run_id: str
    thread_id: str | None
    depth: int = 0
    status: RunStatus = "running"
    phase: RunPhase = "idle"
    model_calls: int = 0
    tool_calls: int = 0
    active_model_call: str | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def is_terminal(self) -> bool:
        return self.status != "running"
