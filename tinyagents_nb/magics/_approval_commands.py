"""``%agent pending``, ``%agent approve [CALL]``, ``%agent deny [CALL] "reason"`` and ``%agent budget``.

Approvals are answered on the run that waits: a call id is looked up across the session's active
runs (and their sub-agents, which share their root's desk); with one call pending anywhere, the id
may be left out. When models of different runs reused a call id, ``CALL@RUN`` names the run (its
``--name``, or a prefix of its run id); a bare id waiting in several runs is refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

from IPython.core.error import UsageError

from tinyagents_nb.harness import ApprovalRequest

from ._command_host import Command, CommandHost
from ._display import usd_text
from ._handle import NotebookRun
from ._session import NotebookSession

__all__ = ["APPROVAL_COMMANDS"]


def _pending(session: NotebookSession) -> list[tuple[NotebookRun, ApprovalRequest]]:
    return [(run, request) for run in session.active_runs() for request in run.stream.pending_approvals()]


def _one(session: NotebookSession, call_id: str | None, verb: str) -> tuple[NotebookRun, ApprovalRequest]:
    waiting = _pending(session)
    if call_id is not None:
        call, _, where = call_id.partition("@")  # CALL@RUN: the run's --name, or (a prefix of) its run id
        found = [(run, r) for run, r in waiting if r.call_id == call and (not where or _in_run(run, r, where))]
        if not found:
            ids = ", ".join(r.call_id for _, r in waiting) or "none"
            raise UsageError(f"no tool call {call_id!r} is waiting for approval (waiting: {ids})")
        if len(found) > 1:  # models of different runs reused a call id: never guess which one is meant
            labels = [run.label for run, _ in found]
            unique = len(set(labels)) == len(labels)  # sibling sub-agents of one run share its label
            named = ", ".join(f"{r.call_id}@{run.label if unique else r.run_id}" for run, r in found)
            raise UsageError(f"tool call {call!r} is waiting in {len(found)} runs; name one: %agent {verb} {named}")
        return found[0]
    if len(waiting) == 1:
        return waiting[0]
    if not waiting:
        raise UsageError("no tool call is waiting for approval")
    ids = ", ".join(r.call_id for _, r in waiting)
    raise UsageError(f"{len(waiting)} tool calls are waiting; name one: %agent {verb} CALL (waiting: {ids})")


def _in_run(run: NotebookRun, request: ApprovalRequest, where: str) -> bool:
    return where in (run.label, run.name) or request.run_id.startswith(where) or run.run_id.startswith(where)


def _pending_cmd(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    if args:
        raise UsageError(f"%agent pending takes no arguments, got {' '.join(args)!r}")
    waiting = _pending(session)
    if not waiting:
        print("no tool call is waiting for approval")
        return
    for run, request in waiting:
        arguments = ", ".join(f"{k}={v!r}" for k, v in request.arguments.items())
        print(f"{request.call_id}: {request.tool_name}({arguments})  [run {run.label}]")


def _approve(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    if len(args) > 1:
        raise UsageError(f"%agent approve takes at most one call id, got {' '.join(args)!r}")
    run, request = _one(session, args[0] if args else None, "approve")
    run.stream.approve(request.call_id, run_id=request.run_id, by="%agent approve")
    print(f"approved {request.tool_name} ({request.call_id})")


def _deny(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    ids = {r.call_id for _, r in _pending(session)}
    call_id = args[0] if args and args[0].partition("@")[0] in ids else None
    reason = " ".join(args[1:] if call_id is not None else args).strip() or None
    run, request = _one(session, call_id, "deny")
    run.stream.deny(request.call_id, reason, run_id=request.run_id, by="%agent deny")
    print(f"denied {request.tool_name} ({request.call_id})" + (f": {reason}" if reason else ""))


def _budget(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    if args:
        raise UsageError(
            "%agent budget takes no arguments; set the caps with %config AgentMagics.max_cost_usd = 0.5 "
            "and %config AgentMagics.session_max_cost_usd = 5"
        )
    spent = session.context.costs.total()
    run_cap = "none" if session.max_cost_usd is None else f"${session.max_cost_usd:,.6f}"
    lines = [f"per run: {run_cap}", f"session spend: {usd_text(spent.total_usd)}"]
    if spent.unpriced_calls:
        lines[-1] += f" ({spent.unpriced_calls} unpriced call(s), priced part ${spent.known_usd:,.6f})"
    if session.session_max_cost_usd is not None:
        left = max(session.session_max_cost_usd - float(spent.known_usd), 0.0)
        lines.append(f"session cap: ${session.session_max_cost_usd:,.6f} (${left:,.6f} left)")
    else:
        lines.append("session cap: none")
    lines.append(f"approvals: {session.approvals}")
    print("\n".join(lines))


APPROVAL_COMMANDS: Mapping[str, Command] = {
    "approve": _approve,
    "budget": _budget,
    "deny": _deny,
    "pending": _pending_cmd,
}
