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
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._errors import ConfigurationError, TinyAgentsError, ToolArgumentsError
from ._json import freeze_json_object, thaw_json

__all__ = [
    "ApprovalDecision",
    "ApprovalDesk",
    "ApprovalError",
    "ApprovalRequest",
    "ArgumentsCheck",
    "Decider",
    "UnattendedApproval",
    "arguments_sha256",
]

ArgumentsCheck: TypeAlias = Callable[[Mapping[str, Any]], None]
"""A tool's ``validate_arguments``: raises ``ToolArgumentsError`` for arguments it would refuse."""
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
    __slots__ = ("check", "future", "loop", "request")

    def __init__(
        self,
        request: ApprovalRequest,
        check: ArgumentsCheck | None,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.request = request
        self.check = check
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
        decision = decision_for(request, approved=False, decided_by="person", decider=by, reason=reason)
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

    async def _wait(self, request: ApprovalRequest, check: ArgumentsCheck | None) -> ApprovalDecision:
        """Wait for a person's decision; ``check`` validates edited arguments (the tool's own check)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ApprovalDecision] = loop.create_future()
        entry = _Entry(request, check, loop, future)
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


def decision_for(request: ApprovalRequest, *, approved: bool, decided_by: Decider, **extra: Any) -> ApprovalDecision:
    return ApprovalDecision(
        call_id=request.call_id,
        tool_name=request.tool_name,
        approved=approved,
        decided_by=decided_by,
        arguments=request.arguments,
        arguments_sha256=arguments_sha256(request.arguments),
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
