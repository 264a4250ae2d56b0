"""Resume a run from its journal: rebuild the transcript and spend, settle unfinished tool calls, continue.

The resumed run is a new run (its own id) whose record links the original and the step it continued
from; the original is marked ``resumed`` so it is not continued twice. Spend already recorded is
charged to the new run's trackers before it starts, so its budgets count it and its ``usage``/``cost``
are the whole job's. A tool call that started and never finished is run again only when the tool is
declared ``idempotent``; otherwise the model is told it was skipped, since it may have taken effect.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Protocol

from .._approval_gate import gate_tool_call, require_approval
from .._context import RunContext
from .._cost import CostUnknownWarning
from .._errors import ConfigurationError, LimitExceeded, RunTimeout, SubAgentDepthError
from .._event_text import preview
from .._events import RunResumed, ToolCompleted, ToolReplayed, ToolStarted
from .._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    dump_messages,
    load_messages,
)
from .._middleware import MiddlewareStack
from .._policy import RunPolicy
from .._tool_phase import emit_interrupted
from .._tool_progress import bind_reporter, unbind_reporter
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


__all__ = ["ResumePlan", "plan_resume", "replay_answered"]

SKIPPED_NOTE = (
    "The run was interrupted while this call of `{name}` was in progress. It was not run again because the tool "
    "is not marked idempotent, and it may or may not have taken effect: check before calling it again."
)
NOT_RUN_NOTE = "The run was interrupted before this call of `{name}` ran; it was not run. Call it again if needed."


class _Transcript:
    """One run's journaled transcript: its messages, the calls that started, its end if it ended."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.messages: list[Message] = []
        self.started: set[str] = set()
        self.ended: tuple[str, str] | None = None  # (status, final text) of a sub-agent that ended
        self.pending: list[ToolCall] = []

    def add(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "input":
            self.messages = load_messages(data["messages"])
        elif kind in ("model", "tool.done"):
            self.messages.extend(load_messages([data["message"]]))
        elif kind == "tool.started":
            self.started.add(str(data["id"]))
        elif kind == "end":
            self.ended = (str(data["status"]), str(data.get("text") or ""))

    def close(self) -> None:
        """Find the calls the last turn left open; drop a final answer the run never ended on."""
        answered = {m.tool_call_id for m in self.messages if isinstance(m, ToolMessage)}
        last = next((m for m in reversed(self.messages) if isinstance(m, AssistantMessage)), None)
        self.pending = [] if last is None else [c for c in last.tool_calls if c.id not in answered]
        if self.messages and isinstance(self.messages[-1], AssistantMessage) and not self.messages[-1].tool_calls:
            self.messages.pop()  # the final answer was journaled but the run never ended: ask again


class ResumePlan(_Transcript):
    """What the journal says about a run: its transcript, spend, the calls left open and its sub-agents.

    ``earlier`` are the steps of the runs it continued (oldest first): a sub-agent one of them started
    for a call still open here is found there.
    """

    def __init__(self, run_id: str, steps: list[StoredStep], earlier: Sequence[tuple[str, list[StoredStep]]] = ()):
        super().__init__(run_id)
        self.spent: list[tuple[Usage, str, str | None]] = []
        self.meta: dict[str, Any] = {}  # what kind of run it is (``DurableJournal(meta=...)``)
        self.from_step = steps[-1].seq if steps else 0
        roots = {run_id, *(rid for rid, _ in earlier)}
        children: dict[str, _Transcript] = {}
        self._children: dict[tuple[str, str], _Transcript] = {}
        base: int | None = None  # where the job's own messages begin (after the first run's input)
        self.model_calls = 0  # the job's model calls before the interruption: the root's ...
        self.tree_model_calls = 0  # ... and its tree's (sub-agents included)
        for rid, run_steps in [*earlier, (run_id, steps)]:
            for step in run_steps:
                if base is None and step.kind == "input":
                    base = len(step.data["messages"])
                if step.kind in ("model", "sub.model"):
                    self.tree_model_calls += 1
                    self.model_calls += step.kind == "model"
                if step.kind.startswith("sub."):
                    self._sub(children, roots, step.kind[4:], step.data)
                elif rid != run_id:
                    continue
                elif step.kind == "meta":
                    self.meta = dict(step.data)
                elif step.kind == "carried":  # spend a resumed run took over from the run it continued
                    for entry in step.data["spent"]:
                        self.spent.append((Usage(**entry["usage"]), str(entry["model"]), entry.get("provider")))
                else:
                    self.add(step.kind, step.data)
                if rid == run_id and step.kind in ("model", "sub.model") and not step.data.get("cached"):
                    model = str(step.data.get("model") or "unknown")
                    self.spent.append((Usage(**step.data.get("usage", {})), model, step.data.get("provider")))
        if not self.messages:
            raise ConfigurationError(f"run {run_id} has no journaled input to resume from")
        self.close()
        for child in children.values():
            child.close()
        self.answered = _answered(self.messages[base or 0 :])

    def _sub(self, children: dict[str, _Transcript], roots: set[str], kind: str, data: dict[str, Any]) -> None:
        child_id = str(data["run"])
        if kind == "input":
            child = children[child_id] = _Transcript(child_id)
            parent = str(data.get("parent"))
            if data.get("call"):  # the latest child a call started is the one to continue
                self._children[("" if parent in roots else parent, str(data["call"]))] = child
        elif child_id not in children:
            return
        children[child_id].add(kind, data)

    def child(self, parent: _Transcript, call_id: str) -> _Transcript | None:
        """The sub-agent run the call ``call_id`` of ``parent`` started, if the journal has one."""
        return self._children.get(("" if parent is self else parent.run_id, call_id))


def _answered(messages: Sequence[Message]) -> list[tuple[ToolCall, ToolMessage]]:
    """The tool calls ``messages`` answer, each with its answer, in the order they were answered."""
    calls = {c.id: c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    return [(calls[m.tool_call_id], m) for m in messages if isinstance(m, ToolMessage) and m.tool_call_id in calls]


def replay_answered(ctx: RunContext[Any], plan: ResumePlan) -> int:
    """Report what the job did before the interruption: ``run.resumed``, then a ``tool.replayed`` per answered call.

    Emitted by the resumed run after ``run.started`` (nothing is run again), so its dashboard, record
    and counts cover every call of the job. Returns how many tool calls.
    """
    ctx.emit(RunResumed, resumed_from=plan.run_id, from_step=plan.from_step, model_calls=plan.tree_model_calls)
    report = _Report(ctx)
    for call, message in plan.answered:
        report.replayed(call, message)
    return report.count


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
    earlier: list[tuple[str, list[StoredStep]]] = []
    previous = run.resumed_from
    while previous is not None and len(earlier) < 100:
        earlier.insert(0, (previous, store.steps(previous)))
        found = store.get(previous)
        previous = found.resumed_from if found is not None else None
    return ResumePlan(run_id, store.steps(run_id), earlier)


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
        timeout_action=harness.policy.approval_timeout_action,  # as the loop does: a resumed run is a run
        rerun=interrupted,
    )


async def _settle(
    harness: Resumable,
    ctx: RunContext[Any],
    plan: ResumePlan,
    at: _Transcript,
    journal: DurableJournal | None = None,
) -> list[Message]:
    """Answer every call the interrupted turn of ``at`` left open, so the transcript is valid for the provider.

    An idempotent tool's call runs again; a call that never started runs (after its approval, if
    the tool asks for one); a non-idempotent call that started is run again only when approved
    (a person at the approval card, or ``unattended_approval="approve"``), else skipped with a note.
    A sub-agent's call answers with the child's journaled answer if it ended, or continues the child
    from its own last step (inside this run) if it was cut off. The resumed run's own calls (``at``
    is ``plan``) are reported as its tool events: each answered now has ``tool.started`` and
    ``tool.completed``; a finished child's journaled answer is ``tool.replayed``.
    """
    report = _Report(ctx) if at is plan else None
    answers: list[Message] = []
    for call in at.pending:
        tool = harness.tools.get(call.name)
        interrupted = call.id in at.started
        subagent = getattr(tool, "subagent", None)  # a SubAgentTool (not imported: it imports the harness)
        child = plan.child(at, call.id) if subagent is not None else None
        if tool is None:
            answers.append(_note(NOT_RUN_NOTE, call, report))
            continue
        if child is not None and child.ended is not None and child.ended[0] == "completed":
            message = ToolResult.ok(child.ended[1]).to_message(call)  # it finished: not run again
            if report is not None:
                report.replayed(call, message)
            answers.append(message)
            continue
        if child is None and not (interrupted and getattr(tool, "idempotent", False)):
            decided = await _decide(harness, ctx, tool, call, interrupted)
            if isinstance(decided, ToolResult):
                why = decided.to_message(call).text
                answers.append(_note(f"{SKIPPED_NOTE if interrupted else NOT_RUN_NOTE} ({why})", call, report))
                continue
            call = decided
        if journal is not None:
            journal.settled(ctx.run_id, "tool.started", {"id": call.id, "name": call.name})
        started = report.started(call) if report is not None else 0.0
        try:
            message = await _answer(tool, subagent, ctx, plan, child, call)
        except BaseException as exc:  # a Stop (or the task's cancel) while it ran: the call is closed, as in the loop
            if report is not None:
                report.failed(call, exc, started)
            raise
        if report is not None:
            report.completed(call, message, started)
        if journal is not None:
            journal.settled(ctx.run_id, "tool.done", {"message": dump_messages([message])[0]})
        answers.append(message)
    return answers


async def _answer(
    tool: Tool, subagent: Any, ctx: RunContext[Any], plan: ResumePlan, child: _Transcript | None, call: ToolCall
) -> ToolMessage:
    """Run one open call now: the tool, or the sub-agent it continues."""
    if child is not None:
        return await _continue_child(tool.name, subagent, ctx, plan, child, call)
    try:
        result = await tool.call(ctx, call.arguments if isinstance(call.arguments, dict) else {})
    except Exception as exc:  # a tool error is the model's to handle, as in the loop
        return ToolMessage(tool_call_id=call.id, name=call.name, text=f"{type(exc).__name__}: {exc}", is_error=True)
    return result.to_message(call)


class _Report:
    """The tool events of the calls a resumed run answers while it settles (and how many it answered)."""

    def __init__(self, ctx: RunContext[Any]) -> None:
        self.ctx = ctx
        self.count = 0

    def started(self, call: ToolCall) -> float:
        self.ctx.emit(ToolStarted, call_id=call.id, tool_name=call.name, arguments=call.arguments)
        return self.ctx.clock.monotonic()

    def completed(self, call: ToolCall, message: ToolMessage, started: float) -> None:
        self.count += 1
        self.ctx.emit(
            ToolCompleted,
            call_id=call.id,
            tool_name=call.name,
            output=preview(message.text),
            is_error=message.is_error,
            duration_s=self.ctx.clock.monotonic() - started,
        )

    def failed(self, call: ToolCall, exc: BaseException, started: float) -> None:
        emit_interrupted(self.ctx, call, exc, self.ctx.clock.monotonic() - started)

    def replayed(self, call: ToolCall, message: ToolMessage) -> None:
        self.count += 1
        self.ctx.emit(
            ToolReplayed,
            call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            output=preview(message.text),
            is_error=message.is_error,
        )


async def _continue_child(
    name: str, subagent: Any, ctx: RunContext[Any], plan: ResumePlan, child: _Transcript, call: ToolCall
) -> ToolMessage:
    """Continue a sub-agent cut off mid-run from its journaled transcript, as a child of the resumed run.

    Its answer, or its error, answers the parent's call as ``SubAgentTool.call`` would.
    """
    messages = [*child.messages, *await _settle(subagent.harness, ctx, plan, child)]
    token = bind_reporter(ctx, call, None)  # the child's journal names the parent's call it answers
    try:
        run = await subagent.invoke_in_parent(ctx, messages)
    except (LimitExceeded, SubAgentDepthError) as exc:
        text = f"sub-agent `{name}` stopped because it hit a limit ({exc}). This is a limit signal, not an answer."
        return ToolResult.error(text).to_message(call)
    except Exception as exc:
        return ToolResult.error(f"sub-agent `{name}` failed: {type(exc).__name__}: {exc}").to_message(call)
    finally:
        unbind_reporter(token)
    return ToolResult.ok(run.final_text).to_message(call)


def carry_over(harness: Resumable, ctx: RunContext[Any], runs: RunStore, plan: ResumePlan) -> DurableJournal | None:
    """Charge the spend already recorded to the new run ``ctx`` and tell its journal what it continues.

    Both resumes do it before they settle. Returns the ``DurableJournal`` of ``harness`` that
    journals to ``runs``, if any (the run begins it before settling, which marks the original
    resumed); without one the run marks the original once the open calls are settled.
    """
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
    for mw in harness.middleware.middleware:
        if isinstance(mw, DurableJournal) and mw.store.same_file(runs):
            mw.resuming(new_id, plan.run_id, plan.from_step, plan.spent)
            return mw
    return None


def begin_journal(journal: DurableJournal, run_id: str, plan: ResumePlan) -> None:
    """Journal the resumed run from before its open calls are settled (it marks the original resumed).

    The calls the original had started and left open are marked started in the new run too: a kill
    or a Stop while one of them waits for its card must not let the next resume run it unasked.
    """
    journal.begin(run_id, plan.messages)
    for call in plan.pending:
        if call.id in plan.started:
            journal.settled(run_id, "tool.started", {"id": call.id, "name": call.name})


def _note(note: str, call: ToolCall, report: _Report | None = None) -> ToolMessage:
    """A call answered with a note instead of running (reported like a denied call: started, then an error)."""
    message = ToolMessage(tool_call_id=call.id, name=call.name, text=note.format(name=call.name), is_error=True)
    if report is not None:
        report.completed(call, message, report.started(call))
    return message
