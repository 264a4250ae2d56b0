"""Resume a run as a run of its own: the calls the interrupted turn left open are settled inside the run.

Both resumes run a ``_ResumingLoop``: ``resume_run`` (``AgentHarness.resume``) to its end, for a script
that passes an ``ApprovalDesk``; ``resume_streaming`` as a run handle (``AgentStream``), for a
notebook: its dashboard shows the approval cards and its Stop must work while a card waits. Either
way the question is asked after ``run.started``, inside the run's task and under its cancellation. A
Stop there ends the resumed run ``cancelled`` before its first step is journaled, which leaves the
original resumable.

The run reports the job's calls from before the interruption (``run.resumed`` with its model calls,
then a ``tool.replayed`` per tool call; nothing is run again) and those it answers while settling
(``tool.started``/``tool.completed``), and counts them all in its ``model_calls``/``tool_calls``, so
its record, dashboard and run list agree on every call of the job, as its usage covers its spend.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from .._agent_stream import AgentStream
from .._approval import ApprovalDesk
from .._config import RunConfig
from .._context import RunContext
from .._errors import ConfigurationError
from .._loop import RunLoop
from .._loop_harness import LoopHarness
from .._messages import UserMessage
from .._run import AgentRun, HarnessRunStatus
from ._journal_mw import DurableJournal
from ._resume import Resumable, ResumePlan, _settle, begin_journal, carry_over, plan_resume, replay_answered
from ._run_store import RunStore

__all__ = ["resume_run", "resume_streaming"]


class StreamResumable(LoopHarness, Resumable, Protocol):
    """What a resume needs of an ``AgentHarness``: what a run reads, and what resuming reads."""


class _ResumingLoop(RunLoop):
    """A run that first answers the open calls of the run it continues (asking a person where it must)."""

    def __init__(
        self,
        harness: StreamResumable,
        ctx: RunContext[Any],
        plan: ResumePlan,
        *,
        runs: RunStore,
        journal: DurableJournal | None,
        note: str | None,
        streaming: bool = True,
    ) -> None:
        status = HarnessRunStatus(
            run_id=ctx.run_id,
            parent_run_id=ctx.parent_run_id,
            root_run_id=ctx.root_run_id,
            thread_id=ctx.thread_id,
            depth=ctx.depth,
            started_at=harness.policy.clock.time(),
        )
        super().__init__(harness, ctx, list(plan.messages), streaming=streaming, status=status)
        self._resumable = harness
        self._plan = plan
        self._runs = runs
        self._journal = journal
        self._note = note
        self._earlier = 0  # calls answered before this run's own turns: replayed, then settled

    @property
    def tool_calls(self) -> int:
        """Every tool call of the job: those replayed from the journal and settled, then this run's."""
        return self._earlier + self.tool_phase.completed

    async def _body(self) -> str:
        journal, plan = self._journal, self._plan
        self._earlier = replay_answered(self.ctx, plan)
        self.model_calls = self.status.model_calls = plan.model_calls  # the job's, as its usage is
        if journal is not None:  # journaled from before settling, so a kill while a card waits loses nothing
            begin_journal(journal, str(self.ctx.run_id), plan)  # it marks the original resumed
            self.ctx.journal = journal  # a sub-agent continued while settling journals in this run
        settled = await _settle(self._resumable, self.ctx, plan, plan, journal)
        self._earlier += len(settled)
        self.status.tool_calls = self.tool_calls
        self.messages.extend(settled)
        if self._note:  # what changed while the run was down (e.g. variables a restart took away)
            self.messages.append(UserMessage(text=self._note))
        if journal is None:  # not journaled: marked once settled, so a Stop on a card leaves it resumable
            self._runs.mark_resumed(plan.run_id, str(self.ctx.run_id))
        return await super()._body()


def _prepare(
    harness: StreamResumable,
    run_id: str,
    store: RunStore | str | os.PathLike[str],
    ctx: RunContext[Any],
    plan: ResumePlan | None,
    note: str | None,
    *,
    streaming: bool,
) -> _ResumingLoop:
    runs = store if isinstance(store, RunStore) else RunStore(store)
    if plan is None:
        plan = plan_resume(runs, run_id)
    elif plan.run_id != run_id:
        raise ConfigurationError(f"the plan given is run {plan.run_id}'s, not run {run_id}'s")
    journal = carry_over(harness, ctx, runs, plan)
    return _ResumingLoop(harness, ctx, plan, runs=runs, journal=journal, note=note, streaming=streaming)


async def resume_run(
    harness: StreamResumable,
    run_id: str,
    *,
    store: RunStore | str | os.PathLike[str],
    config: RunConfig | None = None,
    data: Any = None,
    approvals: ApprovalDesk | None = None,
    note: str | None = None,
    plan: ResumePlan | None = None,
) -> AgentRun:
    """Continue the journaled run ``run_id`` with ``harness`` to its end (see ``AgentHarness.resume``).

    ``plan`` is the run's ``plan_resume``, when the caller read it already (the journal is read once).
    """
    ctx: RunContext[Any] = RunContext(config=config if config is not None else RunConfig(), data=data)
    ctx.approvals = approvals
    run = await _prepare(harness, run_id, store, ctx, plan, note, streaming=False).run()
    if run.error is not None:
        raise run.error
    return run


def resume_streaming(
    harness: StreamResumable,
    run_id: str,
    *,
    store: RunStore | str | os.PathLike[str],
    context: RunContext[Any] | None = None,
    note: str | None = None,
    plan: ResumePlan | None = None,
) -> AgentStream:
    """``AgentHarness.resume`` as a run handle: stream it, Stop it, answer its approvals (not started yet).

    A cut-off call of a tool that is not idempotent, and a call whose approval was pending, wait on
    the handle's ``approvals`` desk (a request for a cut-off call has ``rerun=True``: approve runs it
    again, deny skips it with a note to the model); an unattended desk lets
    ``policy.unattended_approval`` decide. ``context`` is the new run's root context (the notebook
    passes one with its steering, budgets and shared ledgers); the spend already recorded is charged
    to it now, so its budgets count it. ``plan`` is the run's ``plan_resume`` when the caller read
    it already, so the journal is read once.

    Raises:
        ConfigurationError: The run is unknown, completed, already resumed or still running (or
            ``plan`` is another run's).
        RunStoreCorrupt: The store is damaged (it is not modified).
    """
    ctx: RunContext[Any] = context if context is not None else RunContext()
    return AgentStream(_prepare(harness, run_id, store, ctx, plan, note, streaming=True))
