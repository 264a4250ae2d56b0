"""Steering a running sub-agent through the parent's handle; ``SteeringOutcome``."""

from __future__ import annotations

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    Pause,
    RunConfig,
    RunContext,
    SteeringError,
    SteeringHandle,
    SubAgent,
    ToolMessage,
)
from tinyagents_nb.harness.steering import SteeringOutcome, SteeringPolicy, SubAgentHandle
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel

pytestmark = pytest.mark.anyio


def parent_with_slow_child(child_model: object) -> AgentHarness[None]:
    child = SubAgent("worker", AgentHarness(model=child_model), description="Works slowly.")  # type: ignore[arg-type]
    model = ScriptedModel([ScriptedModel.tool_call("worker", {"input": "work"}), "parent done"])
    return AgentHarness(model=model, tools=[child.as_tool()])


def steerable() -> RunContext[None]:
    return RunContext(config=RunConfig(run_id="p")).with_steering(SteeringHandle(SteeringPolicy.allow_all()))


async def wait_for_child(stream: object) -> SubAgentHandle:
    with anyio.fail_after(10):
        async for event in stream:  # type: ignore[attr-defined]
            if event.kind == "subagent.started":  # the child is listed before this is emitted
                break
    (handle,) = stream.children()  # type: ignore[attr-defined]
    return handle  # type: ignore[no-any-return]


async def test_a_parent_redirects_a_running_child_and_it_ends_unlisted() -> None:
    # the child answers with a tool-free turn after a slow first call; a redirect lands before its second call
    inner = ScriptedModel([ScriptedModel.tool_call("missing", {}), "child done"])
    stream = parent_with_slow_child(SlowModel(inner, delay_s=0.2)).invoke_streaming("go", context=steerable())
    stream.start()
    handle = await wait_for_child(stream)
    assert handle.name == "worker"
    assert stream.child(handle.run_id) is handle
    receipt = handle.redirect("be brief")
    run = await stream.result()
    assert run.final_text == "parent done"
    assert receipt.accepted is True
    assert any("be brief" in m.text for m in inner.requests[1].messages)  # applied before its next call
    assert not any("be brief" in m.text for m in inner.requests[0].messages)
    assert handle.steering.outcome is SteeringOutcome.CONTINUE
    assert stream.children() == []
    with pytest.raises(SteeringError, match="no running sub-agent"):
        stream.child(handle.run_id)


async def test_cancelling_a_child_stops_only_the_child() -> None:
    stream = parent_with_slow_child(SlowModel(ScriptedModel(["never"]), delay_s=30)).invoke_streaming(
        "go", context=steerable()
    )
    stream.start()
    handle = await wait_for_child(stream)
    handle.cancel("not needed")
    run = await stream.result()
    assert run.ok
    assert run.final_text == "parent done"
    (result,) = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert "cancelled: not needed" in result.text
    assert handle.is_cancelled
    assert not stream.context.cancellation.is_cancelled


async def test_cancelling_the_parent_still_stops_the_child() -> None:
    stream = parent_with_slow_child(SlowModel(ScriptedModel(["never"]), delay_s=30)).invoke_streaming(
        "go", context=steerable()
    )
    stream.start()
    handle = await wait_for_child(stream)
    stream.cancel("stop all")
    run = await stream.wait()
    assert run.status == "cancelled"
    assert handle.is_cancelled


async def test_pause_outcome_and_no_children_without_steering() -> None:
    stream = parent_with_slow_child(SlowModel(ScriptedModel(["child"]), delay_s=0.2)).invoke_streaming("go")
    async for event in stream:
        if event.kind == "subagent.started":
            break
    assert stream.children() == []  # the run accepts no steering, so neither do its children
    await stream.result()
    handle = SteeringHandle(SteeringPolicy.allow_all())
    paused = AgentHarness(model=ScriptedModel(["x"])).invoke_streaming("go", context=RunContext().with_steering(handle))
    handle.send(Pause())
    with anyio.fail_after(10):
        async for event in paused:
            if event.kind == "steering.applied":
                break
    assert handle.outcome is SteeringOutcome.PAUSE
    paused.resume()
    await paused.result()
    assert handle.outcome is SteeringOutcome.CONTINUE
