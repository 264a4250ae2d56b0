"""A resumed run's tool events and counts cover every call of the job: replayed, settled, then its own (fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tinyagents_nb.harness import AgentEvent, AgentHarness, ConfigurationError, ModelRequest, RunContext, tool
from tinyagents_nb.harness.durable import DurableJournal, RunStore, plan_resume, resume_streaming
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel

from .test_resume_plan import plain, ran

pytestmark = pytest.mark.anyio

EARLIER_TURN = [  # the thread's history before this run: its call is not one of the job's
    {"role": "user", "text": "before"},
    {"role": "assistant", "tool_calls": [{"id": "h1", "name": "plain", "arguments": {"x": 0}}]},
    {"role": "tool", "tool_call_id": "h1", "name": "plain", "text": "plain 0"},
    {"role": "assistant", "text": "ok"},
    {"role": "user", "text": "go"},
]


def _interrupted(store: RunStore, run_id: str = "run-old") -> None:
    """A run that answered ``a``, then asked for ``b`` (cut off while it ran) and ``c`` (never started)."""
    store.start_run(run_id, agent=None, model=None, prompt="go")
    store.add_step(run_id, "input", {"messages": EARLIER_TURN})
    first = {"role": "assistant", "tool_calls": [{"id": "a", "name": "plain", "arguments": {"x": 1}}]}
    store.add_step(run_id, "model", {"message": first, "usage": {}, "model": "m"})
    store.add_step(run_id, "tool.started", {"id": "a", "name": "plain"})
    answer = {"role": "tool", "tool_call_id": "a", "name": "plain", "text": "plain 1"}
    store.add_step(run_id, "tool.done", {"message": answer})
    calls = [{"id": "b", "name": "plain", "arguments": {"x": 2}}, {"id": "c", "name": "plain", "arguments": {"x": 3}}]
    store.add_step(run_id, "model", {"message": {"role": "assistant", "tool_calls": calls}, "usage": {}, "model": "m"})
    store.add_step(run_id, "tool.started", {"id": "b", "name": "plain"})
    store.end_run(run_id, "failed")


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    ran.clear()
    return RunStore(tmp_path / "runs.sqlite")


def _tools(events: list[AgentEvent]) -> list[tuple[str, Any]]:
    return [(e.kind, getattr(e, "call_id", None)) for e in events if e.kind.startswith(("tool.", "run."))]


async def test_calls_from_before_are_replayed_and_settled_calls_have_their_events(store: RunStore) -> None:
    _interrupted(store)
    harness = AgentHarness(model=ScriptedModel(["finished"]), tools=[plain])
    stream = resume_streaming(harness, "run-old", store=store)
    stream.approvals.attended = False  # nobody to ask: the cut-off call is skipped with a note
    events = [event async for event in stream]
    run = await stream.result()
    assert ran == ["plain 3"]  # only the call that never started runs; a is replayed, never run again
    assert _tools(events) == [
        ("run.started", None),
        ("run.resumed", None),  # what the job did before: its model calls (its tool calls follow, replayed)
        ("tool.replayed", "a"),  # answered before the interruption (not h1: the thread's earlier turn)
        ("tool.started", "b"),  # skipped with a note: reported like a denied call
        ("tool.completed", "b"),
        ("tool.started", "c"),
        ("tool.completed", "c"),
        ("run.completed", None),
    ]
    replayed = next(e for e in events if e.kind == "tool.replayed")
    assert (replayed.tool_name, replayed.arguments, replayed.output, replayed.is_error) == (  # type: ignore[attr-defined]
        "plain",
        {"x": 1},
        "plain 1",
        False,
    )
    skipped = next(e for e in events if e.kind == "tool.completed" and e.call_id == "b")  # type: ignore[attr-defined]
    assert skipped.is_error  # type: ignore[attr-defined]
    assert "not run again" in skipped.output  # type: ignore[attr-defined]
    resumed = next(e for e in events if e.kind == "run.resumed")
    assert (resumed.resumed_from, resumed.model_calls) == ("run-old", 2)  # type: ignore[attr-defined]
    assert (run.tool_calls, run.model_calls) == (3, 3)  # the job's calls, as its usage is the job's spend
    assert (events[-1].tool_calls, events[-1].model_calls) == (3, 3)  # type: ignore[attr-defined]  # run.completed


async def test_a_resume_of_a_resume_replays_each_call_of_the_job_once(store: RunStore) -> None:
    _interrupted(store)
    failing = True

    def model(request: ModelRequest) -> str:
        nonlocal failing
        if failing:
            failing = False
            raise RuntimeError("the host went away")
        return "finished"

    harness = AgentHarness(model=FunctionModel(model), tools=[plain], middleware=[DurableJournal(store)])
    with pytest.raises(RuntimeError):
        await harness.resume("run-old", store=store)  # settles b and c, then fails on its model call
    (second,) = [r for r in store.runs() if r.resumed_from == "run-old"]
    assert second.status == "failed"
    ran.clear()
    stream = resume_streaming(harness, second.run_id, store=store)
    events = [event async for event in stream]
    run = await stream.result()
    assert ran == []
    assert [e.call_id for e in events if e.kind == "tool.replayed"] == ["a", "b", "c"]  # type: ignore[attr-defined]
    assert not any(e.kind == "tool.started" for e in events)
    assert (run.tool_calls, run.model_calls) == (3, 3)  # the failed model call of the second run never answered


async def test_the_script_resume_counts_the_jobs_calls_too(store: RunStore) -> None:
    _interrupted(store)
    run = await AgentHarness(model=ScriptedModel(["finished"]), tools=[plain]).resume("run-old", store=store)
    assert run.tool_calls == 3
    assert ran == ["plain 3"]


async def test_a_plan_read_before_is_not_read_again(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupted(store)
    plan = plan_resume(store, "run-old")
    reads: list[str] = []
    steps = RunStore.steps
    monkeypatch.setattr(RunStore, "steps", lambda self, run_id: reads.append(run_id) or steps(self, run_id))
    harness = AgentHarness(model=ScriptedModel(["finished"]), tools=[plain])
    with pytest.raises(ConfigurationError, match="not run run-other"):
        resume_streaming(harness, "run-other", store=store, plan=plan)
    stream = resume_streaming(harness, "run-old", store=store, context=RunContext(), plan=plan)
    stream.approvals.attended = False
    run = await stream.result()
    assert run.final_text == "finished"
    assert reads == []  # the journal was read once, by plan_resume


async def test_a_settled_call_cut_off_again_is_closed_by_tool_failed(store: RunStore) -> None:
    store.start_run("run-old", agent=None, model=None, prompt="go")
    store.add_step("run-old", "input", {"messages": [{"role": "user", "text": "go"}]})
    calls = [{"id": "s", "name": "slow", "arguments": {}}]
    store.add_step("run-old", "model", {"message": {"role": "assistant", "tool_calls": calls}, "usage": {}})
    store.add_step("run-old", "tool.started", {"id": "s", "name": "slow"})
    store.end_run("run-old", "failed")
    seen: list[AgentEvent] = []

    @tool(idempotent=True)
    async def slow(ctx: RunContext[None]) -> str:
        """Takes long (safe to repeat)."""
        ctx.events.add_listener(lambda offset, event: seen.append(event))  # the resumed run's events from here on
        await anyio.sleep(30)
        return "done"

    harness = AgentHarness(model=ScriptedModel(["finished"]), tools=[slow])
    with anyio.move_on_after(0.5):  # the task is cancelled while the call runs again (a kernel shutdown, say)
        await harness.resume("run-old", store=store)
    (closed,) = [e for e in seen if e.kind.startswith("tool.")]
    assert (closed.kind, closed.call_id, closed.status) == ("tool.failed", "s", "cancelled")  # type: ignore[attr-defined]
