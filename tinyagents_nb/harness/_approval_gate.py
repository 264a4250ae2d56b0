"""The approval gate: the loop asks it before every tool call whether the call may run, as is or edited.

See ``_approval`` for the desk a person answers at. A tool opts in with ``requires_approval``;
``require_approval`` adds that to a tool you do not own. The gate fails closed: when nobody can
answer, ``RunPolicy.unattended_approval`` decides at once (``None``: deny), a Stop or the
deadline withdraws a waiting request, and ``RunPolicy.approval_timeout_s`` ends a person's wait
with ``approval_timeout_action``. Every timestamp and wait comes from the run's clock.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ._approval import (
    ApprovalDecision,
    ApprovalDesk,
    ApprovalError,
    ApprovalRequest,
    ApprovalTimeoutAction,
    UnattendedApproval,
    decision_for,
)
from ._errors import ConfigurationError, RunTimeout
from ._events import ApprovalDecided, ApprovalRequested
from ._limits import tighter
from ._messages import ToolCall
from ._tools import Tool, ToolResult

if TYPE_CHECKING:
    from ._context import RunContext
    from ._model import ToolSchema

__all__ = ["ApprovalRule", "gate_tool_call", "require_approval"]

Verdict: TypeAlias = bool | Literal["ask", "approve", "deny"]
ApprovalRule: TypeAlias = bool | Callable[["RunContext[Any]", Mapping[str, Any]], Verdict | Awaitable[Verdict]]
"""``True``/``False``, or a per-call callable ``(ctx, arguments) -> True | False | "ask" | "approve" | "deny"``."""


async def _verdict(rule: Any, ctx: RunContext[Any], call: ToolCall) -> Verdict:
    if not callable(rule):
        return bool(rule)
    verdict = rule(ctx, call.arguments)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if verdict not in (True, False, "ask", "approve", "deny"):
        raise ConfigurationError(
            f"the approval rule of tool `{call.name}` returned {verdict!r}; "
            "return True/'ask', False, 'approve' or 'deny'"
        )
    return verdict  # type: ignore[no-any-return]


async def gate_tool_call(
    ctx: RunContext[Any],
    tool: Tool,
    call: ToolCall,
    *,
    unattended: UnattendedApproval | None,
    remaining_s: Callable[[], float | None],
    on_deadline: Callable[[], RunTimeout],
    timeout_s: float | None = None,
    timeout_action: ApprovalTimeoutAction = "deny",
    rerun: bool = False,
) -> ToolCall | ToolResult:
    """The call to run (possibly with approved, edited arguments), or the error result of a denial.

    Called by the loop for every tool call; a tool without ``requires_approval`` costs one
    ``getattr``. Raises ``Cancelled`` when a Stop ends the wait and the run's ``RunTimeout``
    when its deadline does (after recording the withdrawn request), and ``ApprovalError`` when
    nobody answered within ``timeout_s`` and ``timeout_action`` is ``fail``. ``rerun`` marks the
    request as a resumed run's question about a call an interruption cut off.
    """
    rule = getattr(tool, "requires_approval", False)
    if rule is False or rule is None:
        return call
    verdict = await _verdict(rule, ctx, call)
    if verdict is False:
        return call
    clock = ctx.clock
    request = ApprovalRequest(
        call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        run_id=ctx.run_id,
        requested_at=clock.time(),
        rerun=rerun,
    )
    ctx.emit(ApprovalRequested, call_id=call.id, tool_name=call.name, arguments=call.arguments)
    desk: ApprovalDesk | None = ctx.approvals
    waited = clock.monotonic()
    if verdict in ("approve", "deny"):
        decision = decision_for(
            request,
            approved=verdict == "approve",
            decided_by="policy",
            decided_at=clock.time(),
            reason="decided by the tool's approval rule",
        )
    elif desk is None or not desk.attended:
        why = "the run has no approval handle" if desk is None else "the session is unattended"
        decision = decision_for(
            request,
            approved=unattended == "approve",
            decided_by="unattended",
            decided_at=clock.time(),
            reason=f"nobody can answer ({why}); unattended_approval={unattended!r}",
        )
    else:
        decision = await _ask(ctx, desk, tool, request, waited, remaining_s, on_deadline, timeout_s, timeout_action)
    _emit_decided(ctx, decision, clock.monotonic() - waited)
    if not decision.approved:
        from_ = {
            "person": "by a person",
            "policy": "by policy",
            "unattended": "automatically",
            "timeout": "because nobody answered in time",
        }[decision.decided_by]
        why = f": {decision.reason}" if decision.reason else ""
        return ToolResult.error(f"the call to tool `{call.name}` was denied {from_}{why}. Do not retry it unchanged.")
    return replace(call, arguments=decision.arguments) if decision.edited else call


async def _ask(
    ctx: RunContext[Any],
    desk: ApprovalDesk,
    tool: Tool,
    request: ApprovalRequest,
    waited: float,
    remaining_s: Callable[[], float | None],
    on_deadline: Callable[[], RunTimeout],
    timeout_s: float | None,
    action: ApprovalTimeoutAction,
) -> ApprovalDecision:
    """Wait at the desk for a person; the decision they were handed is the one returned or recorded.

    A decision handed out (``approve`` returned) as a Stop or a deadline lands is recorded as it was
    given, then the Stop or deadline goes on; a request withdrawn first makes ``approve`` raise.
    """
    entry = desk._open(request, _arguments_check(tool), ctx.clock)
    left = remaining_s()
    decided: ApprovalDecision | None = None
    try:
        with ctx.cancellation.scope(timeout_s=tighter(timeout_s, left)):
            decided = await entry.future
    except BaseException:  # a Stop (Cancelled) or the task itself was cancelled
        handed = desk._withdraw(entry)
        if handed is not None:
            _emit_decided(ctx, handed, ctx.clock.monotonic() - waited)
        else:
            _withdrawn(ctx, request, "the run was stopped while the call waited", waited)
        raise
    if decided is None:  # the wait timed out; a decision handed out at that very moment stands
        decided = desk._withdraw(entry)
    if decided is not None:
        return decided
    if timeout_s is None or (left is not None and left <= timeout_s):  # the run's deadline ended the wait
        _withdrawn(ctx, request, "the run's deadline passed while the call waited", waited)
        raise on_deadline()
    reason = f"nobody answered within {timeout_s:g} s (approval_timeout_action={action!r})"
    if action == "fail":
        _withdrawn(ctx, request, reason, waited, decided_by="timeout")
        raise ApprovalError(
            f"the call to tool `{request.tool_name}` ({request.call_id}) waited {timeout_s:g} s for approval",
            hint="answer sooner, or set RunPolicy(approval_timeout_s=…, approval_timeout_action='deny')",
        )
    return decision_for(
        request, approved=action == "approve", decided_by="timeout", decided_at=ctx.clock.time(), reason=reason
    )


def _arguments_check(tool: Tool) -> Callable[[Mapping[str, Any]], None] | None:
    check = getattr(tool, "validate_arguments", None)
    return check if callable(check) else None


def _withdrawn(
    ctx: RunContext[Any], request: ApprovalRequest, reason: str, waited: float, *, decided_by: Any = "withdrawn"
) -> None:
    clock = ctx.clock
    decision = decision_for(request, approved=False, decided_by=decided_by, decided_at=clock.time(), reason=reason)
    _emit_decided(ctx, decision, clock.monotonic() - waited)


def _emit_decided(ctx: RunContext[Any], decision: ApprovalDecision, wait_s: float) -> None:
    ctx.emit(
        ApprovalDecided,
        call_id=decision.call_id,
        tool_name=decision.tool_name,
        approved=decision.approved,
        decided_by=decision.decided_by,
        decider=decision.decider,
        reason=decision.reason,
        arguments_sha256=decision.arguments_sha256,
        edited=decision.edited,
        arguments=decision.arguments if decision.edited else None,
        decided_at=decision.decided_at,
        wait_s=wait_s,
        rerun=decision.rerun,
    )


# ------------------------------------------------------------------------------------------ any tool
class _ApprovalTool:
    """A tool you do not own, with an approval rule added; everything else is delegated."""

    __slots__ = ("_tool", "requires_approval")

    def __init__(self, tool: Tool, rule: ApprovalRule) -> None:
        self._tool = tool
        self.requires_approval = rule

    @property
    def name(self) -> str:
        return self._tool.name

    @property
    def description(self) -> str:
        return self._tool.description

    @property
    def schema(self) -> ToolSchema:
        return self._tool.schema

    @property
    def timeout_s(self) -> float | None:
        return self._tool.timeout_s

    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult:
        return await self._tool.call(ctx, arguments)

    def validate_arguments(self, arguments: Mapping[str, Any]) -> None:
        validate = getattr(self._tool, "validate_arguments", None)
        if callable(validate):
            validate(arguments)

    def __repr__(self) -> str:
        return f"require_approval({self._tool!r})"


def require_approval(tool: Tool, rule: ApprovalRule = True) -> Tool:
    """``tool`` with an approval rule, for tools built elsewhere (MCP servers, sub-agents, your own classes)."""
    if not (rule is True or rule is False or callable(rule)):
        raise ConfigurationError(f"requires_approval must be a bool or a callable, got {rule!r}")
    return _ApprovalTool(tool, rule)
