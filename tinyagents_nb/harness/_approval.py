"""Human in the loop: side-effecting tool calls wait for a person (or a policy) to approve them.

A tool opts in with ``requires_approval``: ``True`` (always ask), or a callable that sees the run
context and the call's arguments and answers per call with ``True``/``"ask"`` (ask a person),
``False`` (no approval needed) or ``"approve"``/``"deny"`` (the policy decides by itself). Any
``Tool`` may carry the attribute; ``require_approval`` adds it to a tool you do not own (an MCP
server's, a sub-agent).

When a call needs a person, the run emits ``approval.requested`` and waits, cancellably and within
its deadline, on the run tree's ``ApprovalDesk`` (``AgentStream.approve`` / ``deny`` reach it from any
thread, e.g. a widget callback). **Nobody can answer** when the run has no desk (it was started with
``invoke``/``run_sync``: there is no handle to answer with) or its desk is marked unattended (the
notebook session does that when the kernel has no frontend that can click); then
``RunPolicy.unattended_approval`` decides at once, and when that is ``None`` the call is denied:
an approval gate fails closed, never hangs. Every request ends with ``approval.decided``: who or
what decided (``person``, ``policy``, ``unattended``, or ``withdrawn`` when a Stop or the deadline
ended the wait), when, and the SHA-256 of the canonical JSON of the exact arguments approved.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ._errors import ConfigurationError, RunTimeout, TinyAgentsError, ToolArgumentsError
from ._events import ApprovalDecided, ApprovalRequested
from ._json import freeze_json_object, thaw_json
from ._messages import ToolCall
from ._tools import Tool, ToolResult

if TYPE_CHECKING:
    from ._context import RunContext
    from ._model import ToolSchema

__all__ = [
    "ApprovalDecision",
    "ApprovalDesk",
    "ApprovalError",
    "ApprovalRequest",
    "ApprovalRule",
    "Decider",
    "UnattendedApproval",
    "arguments_sha256",
    "gate_tool_call",
    "require_approval",
]

Verdict: TypeAlias = bool | Literal["ask", "approve", "deny"]
ApprovalRule: TypeAlias = bool | Callable[["RunContext[Any]", Mapping[str, Any]], Verdict | Awaitable[Verdict]]
"""``True``/``False``, or a per-call callable ``(ctx, arguments) -> True | False | "ask" | "approve" | "deny"``."""
Decider: TypeAlias = Literal["person", "policy", "unattended", "withdrawn"]
UnattendedApproval: TypeAlias = Literal["deny", "approve"]


class ApprovalError(TinyAgentsError):
    """An approval could not be given: no such pending call, ambiguous call, or bad edited arguments."""


def arguments_sha256(arguments: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``arguments`` (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(thaw_json(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """A tool call waiting for a decision."""

    call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    run_id: str
    requested_at: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalDecision:
    """What was decided about one call, by whom, when, and over exactly which arguments."""

    call_id: str
    tool_name: str
    approved: bool
    decided_by: Decider
    decider: str | None = None
    reason: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    arguments_sha256: str = ""
    edited: bool = False
    decided_at: float = field(default_factory=time.time)


class _Entry:
    __slots__ = ("future", "loop", "request", "tool")

    def __init__(
        self, request: ApprovalRequest, tool: Tool, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]
    ) -> None:
        self.request = request
        self.tool = tool
        self.loop = loop
        self.future = future


class ApprovalDesk:
    """The pending approvals of one run tree; thread-safe, shared by the run and its sub-agents.

    Args:
        attended: Whether someone can answer. ``False`` makes every gate decide at once by
            ``RunPolicy.unattended_approval`` (headless notebooks, batch jobs).
    """

    __slots__ = ("_lock", "_pending", "attended")

    def __init__(self, *, attended: bool = True) -> None:
        self.attended = attended
        self._lock = threading.Lock()
        self._pending: dict[str, _Entry] = {}

    def pending(self) -> list[ApprovalRequest]:
        """The calls waiting now, oldest first."""
        with self._lock:
            return [entry.request for entry in self._pending.values()]

    def approve(
        self, call_id: str | None = None, *, arguments: Mapping[str, Any] | None = None, by: str | None = None
    ) -> ApprovalDecision:
        """Approve a pending call (the only one when ``call_id`` is omitted), optionally with edited arguments.

        Edited arguments are validated now, by the tool when it can (``FunctionTool``), so a typo is
        reported here and the call stays pending; the tool validates them again when it runs.

        Raises:
            ApprovalError: No such pending call, several pending and none named, or invalid arguments.
        """
        with self._lock:
            entry = self._find(call_id)
        request = entry.request
        approved = request.arguments
        if arguments is not None:
            approved = _check_arguments(entry.tool, arguments)
        digest = arguments_sha256(approved)
        decision = ApprovalDecision(
            call_id=request.call_id,
            tool_name=request.tool_name,
            approved=True,
            decided_by="person",
            decider=by,
            arguments=approved,
            arguments_sha256=digest,
            edited=digest != arguments_sha256(request.arguments),
        )
        self._settle(request.call_id, decision)
        return decision

    def deny(self, call_id: str | None = None, reason: str | None = None, *, by: str | None = None) -> ApprovalDecision:
        """Deny a pending call (the only one when ``call_id`` is omitted); the model is told ``reason``.

        Raises:
            ApprovalError: No such pending call, or several pending and none named.
        """
        with self._lock:
            request = self._find(call_id).request
        decision = _decision(request, approved=False, decided_by="person", decider=by, reason=reason)
        self._settle(request.call_id, decision)
        return decision

    def _find(self, call_id: str | None) -> _Entry:
        pending = self._pending
        if call_id is None:
            if len(pending) == 1:
                return next(iter(pending.values()))
            if not pending:
                raise ApprovalError("no tool call is waiting for approval")
            raise ApprovalError(
                f"{len(pending)} tool calls are waiting for approval; name one: {', '.join(pending)}",
                hint="pass the call id shown on the approval card or by `%agent pending`",
            )
        entry = pending.get(call_id)
        if entry is None:
            waiting = ", ".join(pending) or "none"
            raise ApprovalError(f"no tool call {call_id!r} is waiting for approval (waiting: {waiting})")
        return entry

    def _settle(self, call_id: str, decision: ApprovalDecision) -> None:
        with self._lock:
            entry = self._pending.pop(call_id, None)
        if entry is None:  # decided meanwhile by another thread, or the wait was withdrawn
            raise ApprovalError(f"tool call {call_id!r} was decided or withdrawn meanwhile")
        try:
            entry.loop.call_soon_threadsafe(_resolve, entry.future, decision)
        except RuntimeError:  # the run's loop is closed: nobody is waiting any more
            pass

    async def _wait(self, request: ApprovalRequest, tool: Tool) -> ApprovalDecision:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ApprovalDecision] = loop.create_future()
        entry = _Entry(request, tool, loop, future)
        with self._lock:
            if request.call_id in self._pending:
                raise ApprovalError(f"tool call id {request.call_id!r} is already waiting for approval")
            self._pending[request.call_id] = entry
        try:
            return await future
        finally:
            with self._lock:
                if self._pending.get(request.call_id) is entry:
                    del self._pending[request.call_id]

    def __repr__(self) -> str:
        return f"ApprovalDesk(pending={[r.call_id for r in self.pending()]}, attended={self.attended})"


def _resolve(future: asyncio.Future[Any], decision: ApprovalDecision) -> None:
    if not future.done():
        future.set_result(decision)


def _decision(request: ApprovalRequest, *, approved: bool, decided_by: Decider, **extra: Any) -> ApprovalDecision:
    return ApprovalDecision(
        call_id=request.call_id,
        tool_name=request.tool_name,
        approved=approved,
        decided_by=decided_by,
        arguments=request.arguments,
        arguments_sha256=arguments_sha256(request.arguments),
        **extra,
    )


def _check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(arguments, Mapping):
        raise ApprovalError(f"edited arguments must be a JSON object, got {type(arguments).__name__}")
    try:
        frozen = freeze_json_object(arguments, what="edited arguments")
    except ConfigurationError as exc:
        raise ApprovalError(str(exc)) from None
    validate = getattr(tool, "validate_arguments", None)
    if callable(validate):
        try:
            validate(thaw_json(frozen))
        except ToolArgumentsError as exc:
            raise ApprovalError(f"edited arguments rejected: {exc}") from None
    plain: dict[str, Any] = thaw_json(frozen)  # a private copy: later changes to the caller's dict change nothing
    return plain


# ------------------------------------------------------------------------------------------ the gate
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
) -> ToolCall | ToolResult:
    """The call to run (possibly with approved, edited arguments), or the error result of a denial.

    Called by the loop for every tool call; a tool without ``requires_approval`` costs one
    ``getattr``. Raises ``Cancelled`` when a Stop ends the wait and the run's ``RunTimeout``
    when its deadline does (after recording the withdrawn request).
    """
    rule = getattr(tool, "requires_approval", False)
    if rule is False or rule is None:
        return call
    verdict = await _verdict(rule, ctx, call)
    if verdict is False:
        return call
    request = ApprovalRequest(call_id=call.id, tool_name=call.name, arguments=call.arguments, run_id=ctx.run_id)
    ctx.emit(ApprovalRequested, call_id=call.id, tool_name=call.name, arguments=call.arguments)
    desk: ApprovalDesk | None = ctx.approvals
    waited = time.monotonic()
    if verdict in ("approve", "deny"):
        decision = _decision(
            request, approved=verdict == "approve", decided_by="policy", reason="decided by the tool's approval rule"
        )
    elif desk is None or not desk.attended:
        why = "the run has no approval handle" if desk is None else "the session is unattended"
        decision = _decision(
            request,
            approved=unattended == "approve",
            decided_by="unattended",
            reason=f"nobody can answer ({why}); unattended_approval={unattended!r}",
        )
    else:
        timed_out = True
        try:
            with ctx.cancellation.scope(timeout_s=remaining_s()):
                decision = await desk._wait(request, tool)
                timed_out = False
        except BaseException:  # a Stop (Cancelled) or the task itself was cancelled
            _withdrawn(ctx, request, "the run was stopped while the call waited", waited)
            raise
        if timed_out:
            _withdrawn(ctx, request, "the run's deadline passed while the call waited", waited)
            raise on_deadline()
    _emit_decided(ctx, decision, time.monotonic() - waited)
    if not decision.approved:
        from_ = {"person": "by a person", "policy": "by policy", "unattended": "automatically"}[decision.decided_by]
        why = f": {decision.reason}" if decision.reason else ""
        return ToolResult.error(f"the call to tool `{call.name}` was denied {from_}{why}. Do not retry it unchanged.")
    return replace(call, arguments=decision.arguments) if decision.edited else call


def _withdrawn(ctx: RunContext[Any], request: ApprovalRequest, reason: str, waited: float) -> None:
    decision = _decision(request, approved=False, decided_by="withdrawn", reason=reason)
    _emit_decided(ctx, decision, time.monotonic() - waited)


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
