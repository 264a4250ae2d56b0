"""Stop ends the whole RLM tree before the root's run returns, even when a child is slow to stop."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from tinyagents_nb.harness import AgentEvent, ModelRequest, ModelResponse, RunCancelled, RunContext, SubAgentStarted
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel
from tinyagents_nb.rlm import RLM

from .test_rlm_recursion import fenced, task_of

pytestmark = pytest.mark.anyio


async def test_a_child_slow_to_stop_has_ended_when_the_stopped_root_returns() -> None:
    ctx = RunContext()

    async def reply(request: ModelRequest) -> ModelResponse:
        if "ROOT" in task_of(request):
            return fenced("print(rlm_query('CHILD', 1))")
        with anyio.CancelScope(shield=True):  # a provider call that finishes before it notices the cancellation
            await anyio.sleep(0.6)
        return fenced("print('never runs')")

    def on_event(offset: int, event: AgentEvent) -> None:
        if event.kind == "run.started" and event.depth == 1:
            threading.Timer(0.1, lambda: ctx.cancellation.cancel("Stop")).start()

    ctx.events.add_listener(on_event)
    rec = EventRecorder(ctx.events)
    started = time.monotonic()
    with pytest.raises(RunCancelled):
        await RLM(model=FunctionModel(reply), environment="local").invoke_in_context(ctx, "ROOT", context={})
    took = time.monotonic() - started
    ended = {e.run_id: e.kind for e in rec.events if e.kind in ("run.completed", "run.failed", "run.cancelled")}
    child = next(e.child_run_id for e in rec.events if isinstance(e, SubAgentStarted))
    assert ended.get(child) == "run.cancelled"  # the child ended first, not after the root returned
    assert ended.get(ctx.run_id) == "run.cancelled"
    assert took < 10
