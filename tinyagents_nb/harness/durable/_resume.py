"""Resume a run from its journal: rebuild the transcript and spend, settle unfinished tool calls, continue.

The resumed run is a new run (its own id) whose record links the original and the step it continued
from; the original is marked ``resumed`` so it is not continued twice. Spend already recorded is
charged to the new run's trackers before it starts, so its budgets count it and its ``usage``/``cost``
are the whole job's. A tool call that started and never finished is run again only when the tool is
declared ``idempotent``; otherwise the model is told it was skipped, since it may have taken effect.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Protocol

from .._approval import ApprovalDesk
from .._approval_gate import gate_tool_call, require_approval
from .._config import RunConfig
from .._context import RunContext
from .._cost import CostUnknownWarning
from .._errors import ConfigurationError, RunTimeout
from .._messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage, load_messages
from .._middleware import MiddlewareStack
from .._policy import RunPolicy
from .._run import AgentRun
from .._tool_registry import ToolRegistry
from .._tools import Tool, ToolResult
from .._usage import Usage
from ._journal_mw import DurableJournal
from ._run_store import RunStore, StoredStep


class Resumable(Protocol):
    """What resuming needs of an ``AgentHarness`` (a protocol, so this module does not import it)."""

    tools: ToolRegistry
    middleware: MiddlewareStack
    policy: RunPolicy

    async def invoke_in_context(self, ctx: RunContext[Any], input: list[Message]) -> AgentRun: ...


__all__ = ["ResumePlan", "plan_resume", "resume_run"]

SKIPPED_NOTE = (
    "The run was interrupted while this call of `{name}` was in progress. It was not run again because the tool "
    "is not marked idempotent, and it may or may not have taken effect: check before calling it again."
)
NOT_RUN_NOTE = "The run was interrupted before this call of `{name}` ran; it was not run. Call it again if needed."


class ResumePlan:
    """What the journal says about a run: its transcript, spend and the calls left unanswered."""

    def __init__(self, run_id: str, steps: list[StoredStep]) -> None:
        self.run_id = run_id
        self.messages: list[Message] = []
        self.spent: list[tuple[Usage, str, str | None]] = []
        self.started: set[str] = set()
        self.from_step = steps[-1].seq if steps else 0
        for step in steps:
            if step.kind == "input":
                self.messages = load_messages(step.data["messages"])
            elif step.kind == "model":
                self.messages.extend(load_messages([step.data["message"]]))
                if not step.data.get("cached"):
                    model = str(step.data.get("model") or "unknown")
                    self.spent.append((Usage(**step.data.get("usage", {})), model, step.data.get("provider")))
            elif step.kind == "tool.started":
                self.started.add(str(step.data["id"]))
            elif step.kind == "tool.done":
                self.messages.extend(load_messages([step.data["message"]]))
            elif step.kind == "carried":  # spend a resumed run took over from the run it continued
                for entry in step.data["spent"]:
                    self.spent.append((Usage(**entry["usage"]), str(entry["model"]), entry.get("provider")))
        if not self.messages:
            raise ConfigurationError(f"run {run_id} has no journaled input to resume from")
        answered = {m.tool_call_id for m in self.messages if isinstance(m, ToolMessage)}
        last = next((m for m in reversed(self.messages) if isinstance(m, AssistantMessage)), None)
        self.pending: list[ToolCall] = [] if last is None else [c for c in last.tool_calls if c.id not in answered]
        if isinstance(self.messages[-1], AssistantMessage) and not self.messages[-1].tool_calls:
            # the final answer was journaled but the run never ended: ask again rather than end on it
            self.messages.pop()


def plan_resume(store: RunStore, run_id: str) -> ResumePlan:
    """Check that ``run_id`` can be resumed and read its plan.

    Raises:
        ConfigurationError: The run is unknown, completed, already resumed, or still running.
    """
    run = store.get(run_id)
    if run is None:
        raise ConfigurationError(f"no run {run_id!r} in {store!r}", hint="`%agent runs` lists the stored runs")
    if run.status == "completed":
        raise ConfigurationError(f"run {run_id} completed; there is nothing to resume")
    if run.status == "resumed":
        raise ConfigurationError(f"run {run_id} was already resumed as {run.resumed_by}", hint="resume that run")
    if run.status == "running":
        raise ConfigurationError(f"run {run_id} is still running in a live process")
    return ResumePlan(run_id, store.steps(run_id))


def _deadline() -> RunTimeout:
    return RunTimeout("the run's deadline passed while an approval of a resumed call waited")


async def _decide(
    harness: Resumable, ctx: RunContext[Any], tool: Tool, call: ToolCall, interrupted: bool
) -> ToolCall | ToolResult:
    """Ask (through the run's approval desk, or its unattended policy) whether a call may run on resume.

    An interrupted call of a tool that is not idempotent is asked about whatever the tool's own rule,
    since it may already have taken effect; a call that was waiting for its approval is asked again.
    """
    rule: Any = True if interrupted else getattr(tool, "requires_approval", False)
    if rule is False or rule is None:
        return call
    return await gate_tool_call(
        ctx,
        require_approval(tool, rule),
        call,
        unattended=harness.policy.unattended_approval,
        remaining_s=lambda: None,
        on_deadline=_deadline,
        timeout_s=harness.policy.approval_timeout_s,
        rerun=interrupted,
    )


async def _settle(harness: Resumable, ctx: RunContext[Any], plan: ResumePlan) -> list[Message]:
    """Answer every call the interrupted turn left open, so the transcript is valid for the provider.

    An idempotent tool's call runs again; a call that never started runs (after its approval, if
    the tool asks for one); a non-idempotent call that started is run again only when approved
    (a person at the approval card, or ``unattended_approval="approve"``), else skipped with a note.
    """
    answers: list[Message] = []
    for call in plan.pending:
        tool = harness.tools.get(call.name)
        interrupted = call.id in plan.started
        if tool is None:
            answers.append(_note(NOT_RUN_NOTE, call))
            continue
        if not (interrupted and getattr(tool, "idempotent", False)):
            decided = await _decide(harness, ctx, tool, call, interrupted)
            if isinstance(decided, ToolResult):
                why = decided.to_message(call).text
                answers.append(_note(f"{SKIPPED_NOTE if interrupted else NOT_RUN_NOTE} ({why})", call))
                continue
            call = decided
        try:
            result = await tool.call(ctx, call.arguments if isinstance(call.arguments, dict) else {})
        except Exception as exc:  # a tool error is the model's to handle, as in the loop
            answers.append(
                ToolMessage(tool_call_id=call.id, name=call.name, text=f"{type(exc).__name__}: {exc}", is_error=True)
            )
            continue
        answers.append(result.to_message(call))
    return answers


def _note(note: str, call: ToolCall) -> ToolMessage:
    return ToolMessage(tool_call_id=call.id, name=call.name, text=note.format(name=call.name), is_error=True)


async def resume_run(
    harness: Resumable,
    run_id: str,
    *,
    store: RunStore | str | os.PathLike[str],
    config: RunConfig | None = None,
    data: Any = None,
    approvals: ApprovalDesk | None = None,
    note: str | None = None,
) -> AgentRun:
    """Continue the journaled run ``run_id`` with ``harness`` (see ``AgentHarness.resume``)."""
    runs = store if isinstance(store, RunStore) else RunStore(store)
    plan = plan_resume(runs, run_id)
    ctx: RunContext[Any] = RunContext(config=config if config is not None else RunConfig(), data=data)
    ctx.approvals = approvals
    new_id = str(ctx.run_id)
    with warnings.catch_warnings():  # an unknown price was reported when the call was made
        warnings.simplefilter("ignore", CostUnknownWarning)
        for usage, model, provider in plan.spent:  # charged once, to the run that carries the job on
            ctx.usage.record(run_id=new_id, parent_run_id=None, root_run_id=new_id, depth=0, usage=usage, model=model)
            ctx.costs.record(
                run_id=new_id,
                parent_run_id=None,
                root_run_id=new_id,
                depth=0,
                usage=usage,
                model=model,
                provider=provider,
            )
    messages = [*plan.messages, *await _settle(harness, ctx, plan)]
    if note:  # what changed while the run was down (e.g. variables a restart took away)
        messages.append(UserMessage(text=note))
    journaled = False
    for mw in harness.middleware.middleware:
        if isinstance(mw, DurableJournal) and mw.store.same_file(runs):
            mw.resuming(new_id, run_id, plan.from_step, plan.spent)  # it marks the original when it starts
            journaled = True
    if not journaled:
        runs.mark_resumed(run_id, new_id)
    return await harness.invoke_in_context(ctx, messages)
