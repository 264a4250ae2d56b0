"""Resume as a streaming run: the calls the interrupted turn left open are settled inside the run.

``resume_run`` asks about a cut-off call before the resumed run starts, which suits a script that
passes an ``ApprovalDesk``. A notebook resumes through a run handle instead (``AgentStream``): its
dashboard shows the approval cards and its Stop must work while a card waits, so the question is
asked after ``run.started``, inside the run's task and under its cancellation. A Stop there ends the
resumed run ``cancelled`` before its first step is journaled, which leaves the original resumable.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from .._agent_stream import AgentStream
from .._context import RunContext
from .._loop import RunLoop
from .._loop_harness import LoopHarness
from .._messages import UserMessage
from .._run import HarnessRunStatus
from ._journal_mw import DurableJournal
from ._resume import Resumable, ResumePlan, _settle, begin_journal, carry_over, plan_resume
from ._run_store import RunStore

__all__ = ["resume_streaming"]


class StreamResumable(LoopHarness, Resumable, Protocol):
    """What a streaming resume needs of an ``AgentHarness``: what a run reads, and what resuming reads."""


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
    ) -> None:
        status = HarnessRunStatus(
            run_id=ctx.run_id,
            parent_run_id=ctx.parent_run_id,
            root_run_id=ctx.root_run_id,
            thread_id=ctx.thread_id,
            depth=ctx.depth,
            started_at=harness.policy.clock.time(),
        )
        super().__init__(harness, ctx, list(plan.messages), streaming=True, status=status)
        self._resumable = harness
        self._plan = plan
        self._runs = runs
        self._journal = journal
        self._note = note

    async def _body(self) -> str:
        journal, plan = self._journal, self._plan
        if journal is not None:  # journaled from before settling, so a kill while a card waits loses nothing
            begin_journal(journal, str(self.ctx.run_id), plan)  # it marks the original resumed
            self.ctx.journal = journal  # a sub-agent continued while settling journals in this run
        self.messages.extend(await _settle(self._resumable, self.ctx, plan, plan, journal))
        if self._note:  # what changed while the run was down (e.g. variables a restart took away)
            self.messages.append(UserMessage(text=self._note))
        if journal is None:  # not journaled: marked once settled, so a Stop on a card leaves it resumable
            self._runs.mark_resumed(plan.run_id, str(self.ctx.run_id))
        return await super()._body()


def resume_streaming(
    harness: StreamResumable,
    run_id: str,
    *,
    store: RunStore | str | os.PathLike[str],
    context: RunContext[Any] | None = None,
    note: str | None = None,
) -> AgentStream:
    """``AgentHarness.resume`` as a run handle: stream it, Stop it, answer its approvals (not started yet).

    A cut-off call of a tool that is not idempotent, and a call whose approval was pending, wait on
    the handle's ``approvals`` desk (a request for a cut-off call has ``rerun=True``: approve runs it
    again, deny skips it with a note to the model); an unattended desk lets
    ``policy.unattended_approval`` decide. ``context`` is the new run's root context (the notebook
    passes one with its steering, budgets and shared ledgers); the spend already recorded is charged
    to it now, so its budgets count it.

    Raises:
        ConfigurationError: The run is unknown, completed, already resumed or still running.
        RunStoreCorrupt: The store is damaged (it is not modified).
    """
    runs = store if isinstance(store, RunStore) else RunStore(store)
    plan = plan_resume(runs, run_id)
    ctx: RunContext[Any] = context if context is not None else RunContext()
    journal = carry_over(harness, ctx, runs, plan)
    return AgentStream(_ResumingLoop(harness, ctx, plan, runs=runs, journal=journal, note=note))
