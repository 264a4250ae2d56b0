"""Recursion: sub-agents as tools, lineage on every event, usage roll-up, one cancel for the tree."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    CostTracker,
    ModelPricing,
    RunCancelled,
    RunConfig,
    RunContext,
    RunId,
    RunLimits,
    RunPolicy,
    SubAgent,
    SubAgentDepthError,
    SubAgentSession,
    ToolMessage,
    Usage,
)
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel, SlowModel, Trajectory

pytestmark = pytest.mark.anyio

U = Usage(input_tokens=100, output_tokens=10)


def tree(leaf_model: object | None = None) -> tuple[AgentHarness[None], SubAgent, SubAgent]:
    leaf = SubAgent(
        "leaf",
        AgentHarness(model=leaf_model or ScriptedModel([ScriptedModel.text("leaf answer", usage=U)])),  # type: ignore[arg-type]
        description="Looks things up.",
    )
    mid = SubAgent(
        "mid",
        AgentHarness(
            model=ScriptedModel(
                [
                    ScriptedModel.tool_call("leaf", {"input": "look up X"}, usage=U),
                    ScriptedModel.text("mid answer", usage=U),
                ]
            ),
            tools=[leaf.as_tool()],
        ),
        description="Plans research.",
    )
    root = AgentHarness(
        model=ScriptedModel(
            [
                ScriptedModel.tool_call("mid", {"input": "research X"}, usage=U),
                ScriptedModel.text("root answer", usage=U),
            ]
        ),
        tools=[mid.as_tool()],
    )
    return root, mid, leaf


async def test_two_levels_lineage_and_usage_roll_up() -> None:
    root, _, _ = tree()
    ctx = RunContext(config=RunConfig(run_id="root", thread_id="t"))
    rec = EventRecorder(ctx.events)
    run = await root.invoke_in_context(ctx, "answer X")
    assert run.final_text == "root answer"

    started = rec.of_kind("subagent.started")
    mid_id = started[0].child_run_id  # type: ignore[attr-defined]
    leaf_id = started[1].child_run_id  # type: ignore[attr-defined]
    expected = {
        "root": (None, 0),
        mid_id: ("root", 1),
        leaf_id: (mid_id, 2),
    }
    for event in rec.events:
        parent, depth = expected[event.run_id]
        assert event.root_run_id == "root", event
        assert event.parent_run_id == parent, event
        assert event.depth == depth, event
    # usage: root 2 calls, mid 2 calls, leaf 1 call
    assert run.usage == U + U + U + U + U
    assert ctx.usage.for_run(RunId("root")) == U + U
    assert ctx.usage.for_subtree(RunId(mid_id)) == U + U + U
    assert ctx.usage.for_subtree(RunId(leaf_id)) == U
    # the sub-agent's answer reached the parent as a tool result
    tool_results = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert tool_results[0].text == "mid answer"
    traj = Trajectory.from_events(rec.events)
    traj.assert_completed()
    traj.assert_order(["subagent.started:mid", "subagent.started:leaf", "subagent.completed:leaf", "run.completed"])
    assert traj.runs() == ["root", mid_id, leaf_id]
    # children inherit thread and tags
    child_started = next(e for e in rec.of_kind("run.started") if e.run_id == leaf_id)
    assert child_started.thread_id == "t"  # type: ignore[attr-defined]


async def test_one_cancel_stops_the_whole_tree() -> None:
    slow_leaf = SlowModel(ScriptedModel(["too late"]), delay_s=30)
    root, _, _ = tree(slow_leaf)
    ctx = RunContext()
    stream = root.invoke_streaming("answer X", context=ctx)
    cancelled_at = 0.0
    async for event in stream:
        if event.kind == "model.started" and event.depth == 2:
            cancelled_at = time.monotonic()
            threading.Thread(target=ctx.cancellation.cancel, args=("stop",)).start()
    run = await stream.wait()
    assert time.monotonic() - cancelled_at < 2
    assert run.status == "cancelled"
    assert isinstance(run.error, RunCancelled)
    ended = {e.run_id for _, e in ctx.events.recent() if e.kind == "run.cancelled"}
    assert len(ended) == 3  # leaf, mid and root all ended cancelled


async def test_depth_limit_becomes_an_error_result_for_the_parent() -> None:
    root, _, _ = tree()
    ctx = RunContext(config=RunConfig(max_depth=1))
    rec = EventRecorder(ctx.events)
    run = await root.invoke_in_context(ctx, "answer X")
    assert run.final_text == "root answer"
    leaf_result = next(e for e in rec.of_kind("tool.completed") if e.depth == 1)
    assert leaf_result.is_error  # type: ignore[attr-defined]
    assert "recursion depth limit" in leaf_result.output  # type: ignore[attr-defined]
    assert not [e for e in rec.events if e.depth == 2]  # no child events: the check came first


async def test_child_limit_becomes_an_error_result_and_the_parent_continues() -> None:
    looping_leaf = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("nothing", {})] * 3),
        policy=RunPolicy(limits=RunLimits(max_model_calls=1)),
    )
    leaf = SubAgent("leaf", looping_leaf)
    parent = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("leaf", {"input": "go"}), "handled"]), tools=[leaf.as_tool()]
    )
    run = await parent.invoke("x")
    assert run.final_text == "handled"
    result = run.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.is_error
    assert "configured run limit" in result.text


async def test_invoke_in_parent_depth_check_raises_before_any_event() -> None:
    leaf = SubAgent("leaf", AgentHarness(model=ScriptedModel(["x"])))
    ctx = RunContext(config=RunConfig(max_depth=0))
    rec = EventRecorder(ctx.events)
    with pytest.raises(SubAgentDepthError):
        await leaf.invoke_in_parent(ctx, "go")
    assert rec.events == []


async def test_many_children_run_concurrently_under_max_concurrency() -> None:
    active = 0
    peak = 0

    class Counting(ScriptedModel):
        async def invoke(self, request):  # type: ignore[no-untyped-def]
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await anyio.sleep(0.02)
            active -= 1
            return await super().invoke(request)

    leaf = SubAgent("leaf", AgentHarness(model=Counting(["a"] * 6)))
    calls = [("leaf", {"input": f"task {i}"}) for i in range(6)]
    root = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_calls(calls), "all done"]),
        tools=[leaf.as_tool()],
        policy=RunPolicy(limits=RunLimits(max_concurrency=3)),
    )
    run = await root.invoke("fan out")
    assert run.final_text == "all done"
    assert peak == 3


async def test_session_keeps_the_transcript_and_reports_reuse() -> None:
    model = ScriptedModel(["first", "second"])
    session = SubAgentSession(SubAgent("helper", AgentHarness(model=model), system_prompt="you help"))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    await session.send("one", parent=ctx)
    run = await session.send("two", parent=ctx)
    assert run.final_text == "second"
    assert [m.role for m in model.requests[1].messages] == ["system", "user", "assistant", "user"]
    assert session.turns == 2
    assert [e.turn for e in rec.of_kind("subagent.reused")] == [1]  # type: ignore[attr-defined]
    session.reset()
    assert session.turns == 0
    assert session.transcript == []


async def test_children_stream_when_the_parent_streams() -> None:
    root, _, _ = tree()
    ctx = RunContext()
    depths = {event.depth async for event in root.invoke_streaming("x", context=ctx) if event.kind == "model.delta"}
    assert depths == {0, 1, 2}


async def test_subagent_prompt_is_added_after_the_harness_prompt() -> None:
    model = ScriptedModel(["ok"])
    sub = SubAgent("helper", AgentHarness(model=model, system_prompt="harness rules"), system_prompt="sub rules")
    await sub.invoke_in_parent(RunContext(), "go")
    assert [m.text for m in model.requests[0].messages] == ["harness rules", "sub rules", "go"]


@pytest.mark.parametrize("max_depth", [0, 1])
async def test_the_roots_policy_depth_binds_the_whole_tree(max_depth: int) -> None:
    root, _, _ = tree()  # mid and leaf harnesses keep the default max_depth of 8
    bounded = AgentHarness(model=root.model, tools=root.tools, policy=RunPolicy(limits=RunLimits(max_depth=max_depth)))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await bounded.invoke_in_context(ctx, "answer X")
    assert run.final_text == "root answer"
    assert max(e.depth for e in rec.events) == max_depth  # nothing ran below the root's cap
    refused = [e for e in rec.of_kind("tool.completed") if e.depth == max_depth]
    assert refused[0].is_error  # type: ignore[attr-defined]
    assert "recursion depth limit" in refused[0].output  # type: ignore[attr-defined]
    assert ctx.config.max_depth == 8  # the caller's config is as it was


async def test_cost_rolls_up_through_a_middle_run_that_recorded_nothing() -> None:
    priced = CostTracker(prices={"scripted": ModelPricing(input_per_mtok=1_000, output_per_mtok=1_000)})
    leaf = SubAgent("leaf", AgentHarness(model=ScriptedModel([ScriptedModel.text("leaf answer", usage=U)])))
    silent_mid = SubAgent(  # a provider that reports no usage (or a response-cache hit)
        "mid",
        AgentHarness(
            model=ScriptedModel([ScriptedModel.tool_call("leaf", {"input": "go"}), "mid answer"]),
            tools=[leaf.as_tool()],
        ),
    )
    root = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("mid", {"input": "go"}, usage=U), ScriptedModel.text("ok")]),
        tools=[silent_mid.as_tool()],
    )
    ctx = RunContext(config=RunConfig(run_id="root"), costs=priced)
    run = await root.invoke_in_context(ctx, "x")
    one_call = priced.for_run(RunId("root")).total_usd
    assert one_call is not None
    assert one_call > 0
    assert run.usage == U + U
    assert run.cost.total_usd == 2 * one_call  # the leaf's cost reached the root through the silent mid
    assert priced.total().total_usd == run.cost.total_usd
