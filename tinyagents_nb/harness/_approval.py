"""Human in the loop: side-effecting tool calls wait for a person (or a policy) to approve them.

A tool opts in with ``requires_approval``: ``True`` (always ask), or a callable that sees the run
context and the call's arguments and answers per call with ``True``/``"ask"`` (ask a person),
``False`` (no approval needed) or ``"approve"``/``"deny"`` (the policy decides by itself). Any
``Tool`` may carry the attribute; ``require_approval`` adds it to a tool you do not own (an MCP
server's, a sub-agent).

When a call needs a person, the run emits ``approval.requested`` and waits, cancellably and within
its deadline, on the run tree's ``ApprovalDesk`` (``AgentStream.approve`` / ``deny`` reach it from any
thread, e.g. a widget callback). Requests are keyed by ``(run id, call id)``: sibling sub-agents whose
models reuse a call id wait side by side. A decision handed out by ``approve``/``deny`` is the one the
run records, even when a Stop lands at the same moment; a request already withdrawn makes them
raise instead. ``RunPolicy.approval_timeout_s`` bounds a person's wait, then
``approval_timeout_action`` decides (``deny`` by default, ``approve``, or ``fail`` the run). **Nobody can answer** when the run has no desk (it was started with
``invoke``/``run_sync``: there is no handle to answer with) or its desk is marked unattended (the
notebook session does that when the kernel has no frontend that can click); then
``RunPolicy.unattended_approval`` decides at once, and when that is ``None`` the call is denied:
an approval gate fails closed, never hangs. Every request ends with ``approval.decided``: who or
what decided (``person``, ``policy``, ``unattended``, or ``withdrawn`` when a Stop or the deadline
ended the wait, ``timeout`` when nobody answered in time), when (the run's clock), and the SHA-256 of the canonical JSON of the exact arguments approved.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._clock import Clock
from ._errors import ConfigurationError, TinyAgentsError, ToolArgumentsError
from ._json import freeze_json_object, thaw_json

__all__ = [
    "ApprovalDecision",
    "ApprovalDesk",
    "ApprovalError",
    "ApprovalRequest",
    "ApprovalTimeoutAction",
    "ArgumentsCheck",
    "Decider",
    "UnattendedApproval",
    "arguments_sha256",
]

ArgumentsCheck: TypeAlias = Callable[[Mapping[str, Any]], None]
"""A tool's ``validate_arguments``: raises ``ToolArgumentsError`` for arguments it would refuse."""
Decider: TypeAlias = Literal["person", "policy", "unattended", "withdrawn", "timeout"]
UnattendedApproval: TypeAlias = Literal["deny", "approve"]
ApprovalTimeoutAction: TypeAlias = Literal["deny", "approve", "fail"]
"""What an approval nobody answered within ``RunPolicy.approval_timeout_s`` becomes (``fail``: the run fails)."""


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
    requested_at: float = 0.0
    rerun: bool = False
    """The call was cut off by an interruption and may have taken effect: approving runs it again (resume)."""


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
    decided_at: float = 0.0
    rerun: bool = False
    """A resumed run's decision about a call an interruption cut off (approved: it runs again)."""


class _Entry:
    """One waiting request; ``decision`` is set, under the desk's lock, when one is handed out."""

    __slots__ = ("check", "clock", "decision", "future", "loop", "request")

    def __init__(
        self,
        request: ApprovalRequest,
        check: ArgumentsCheck | None,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.request = request
        self.check = check
        self.clock = clock
        self.loop = loop
        self.future = future
        self.decision: ApprovalDecision | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.request.run_id, self.request.call_id)


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
        self._pending: dict[tuple[str, str], _Entry] = {}  # by (run id, call id)

    def pending(self) -> list[ApprovalRequest]:
        """The calls waiting now, oldest first."""
        with self._lock:
            return [entry.request for entry in self._pending.values()]

    def approve(
        self,
        call_id: str | None = None,
        *,
        run_id: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        by: str | None = None,
    ) -> ApprovalDecision:
        """Approve a pending call (the only one when ``call_id`` is omitted), optionally with edited arguments.

        Edited arguments are validated now, by the tool when it can (``FunctionTool``), so a typo is
        reported here and the call stays pending; the tool validates them again when it runs.
        ``run_id`` tells apart calls of different runs of the tree that share a call id.

        Raises:
            ApprovalError: No such pending call, several pending and none named, invalid arguments,
                or the request was withdrawn (a Stop, a deadline) before this decision was taken.
        """
        with self._lock:
            entry = self._find(call_id, run_id)
        request = entry.request
        approved = request.arguments
        if arguments is not None:
            approved = _check_arguments(entry.check, arguments)
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
            decided_at=entry.clock.time(),
            rerun=request.rerun,
        )
        self._settle(entry, decision)
        return decision

    def deny(
        self, call_id: str | None = None, reason: str | None = None, *, run_id: str | None = None, by: str | None = None
    ) -> ApprovalDecision:
        """Deny a pending call (the only one when ``call_id`` is omitted); the model is told ``reason``.

        Raises:
            ApprovalError: No such pending call, several pending and none named, or already withdrawn.
        """
        with self._lock:
            entry = self._find(call_id, run_id)
        request = entry.request
        decision = decision_for(
            request, approved=False, decided_by="person", decided_at=entry.clock.time(), decider=by, reason=reason
        )
        self._settle(entry, decision)
        return decision

    def _find(self, call_id: str | None, run_id: str | None) -> _Entry:
        pending = self._pending
        found = [
            entry
            for (run, call), entry in pending.items()
            if (call_id is None or call == call_id) and (run_id is None or run == run_id)
        ]
        if len(found) == 1:
            return found[0]
        waiting = ", ".join(call for _, call in pending) or "none"
        if not pending:
            raise ApprovalError("no tool call is waiting for approval")
        if not found:
            where = f" in run {run_id!r}" if run_id is not None else ""
            raise ApprovalError(f"no tool call {call_id!r}{where} is waiting for approval (waiting: {waiting})")
        if call_id is None:
            raise ApprovalError(
                f"{len(found)} tool calls are waiting for approval; name one: {', '.join(e.request.call_id for e in found)}",
                hint="pass the call id shown on the approval card or by `%agent pending`",
            )
        runs = ", ".join(e.request.run_id for e in found)
        raise ApprovalError(
            f"tool call id {call_id!r} is waiting in {len(found)} runs ({runs}); name the run",
            hint="pass run_id=… (shown on the approval card and in ApprovalRequest.run_id)",
        )

    def _settle(self, entry: _Entry, decision: ApprovalDecision) -> None:
        """Hand ``decision`` to the waiting run: atomic with a withdrawal, so exactly one of them wins."""
        with self._lock:
            if self._pending.get(entry.key) is not entry:  # decided meanwhile by another thread, or withdrawn
                raise ApprovalError(f"tool call {entry.request.call_id!r} was decided or withdrawn meanwhile")
            del self._pending[entry.key]
            entry.decision = decision
        try:
            entry.loop.call_soon_threadsafe(_resolve, entry.future, decision)
        except RuntimeError:  # the run's loop is closed: nobody is waiting any more
            pass

    def _open(self, request: ApprovalRequest, check: ArgumentsCheck | None, clock: Clock) -> _Entry:
        """Put ``request`` on the desk; its ``future`` resolves with a person's decision."""
        loop = asyncio.get_running_loop()
        entry = _Entry(request, check, clock, loop, loop.create_future())
        with self._lock:
            if entry.key in self._pending:
                raise ApprovalError(
                    f"tool call id {request.call_id!r} of run {request.run_id!r} is already waiting for approval"
                )
            self._pending[entry.key] = entry
        return entry

    def _withdraw(self, entry: _Entry) -> ApprovalDecision | None:
        """Take ``entry`` off the desk; the decision already handed out for it, if any (that one stands)."""
        with self._lock:
            if self._pending.get(entry.key) is entry:
                del self._pending[entry.key]
            return entry.decision

    def __repr__(self) -> str:
        return f"ApprovalDesk(pending={[r.call_id for r in self.pending()]}, attended={self.attended})"


def _resolve(future: asyncio.Future[Any], decision: ApprovalDecision) -> None:
    if not future.done():
        future.set_result(decision)


def decision_for(
    request: ApprovalRequest, *, approved: bool, decided_by: Decider, decided_at: float, **extra: Any
) -> ApprovalDecision:
    return ApprovalDecision(
        call_id=request.call_id,
        tool_name=request.tool_name,
        approved=approved,
        decided_by=decided_by,
        arguments=request.arguments,
        arguments_sha256=arguments_sha256(request.arguments),
        decided_at=decided_at,
        rerun=request.rerun,
        **extra,
    )


def _check_arguments(check: ArgumentsCheck | None, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(arguments, Mapping):
        raise ApprovalError(f"edited arguments must be a JSON object, got {type(arguments).__name__}")
    try:
        frozen = freeze_json_object(arguments, what="edited arguments")
    except ConfigurationError as exc:
        raise ApprovalError(str(exc)) from None
    if check is not None:
        try:
            check(thaw_json(frozen))
        except ToolArgumentsError as exc:
            raise ApprovalError(f"edited arguments rejected: {exc}") from None
    plain: dict[str, Any] = thaw_json(frozen)  # a private copy: later changes to the caller's dict change nothing
    return plain
