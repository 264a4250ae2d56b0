"""Hooks that decide: ``SkipTool`` answers a call without running it; ``StopWithFinal`` ends the run."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    Middleware,
    RunContext,
    SkipTool,
    StopWithFinal,
    ToolCall,
    ToolMessage,
    ToolResult,
    tool,
)
from tinyagents_nb.harness.testkit import FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio


class CachedAnswers(Middleware):
    """Answers `lookup` for Oslo from a cache; everything else runs."""

    async def before_tool(self, ctx, call: ToolCall) -> ToolCall | SkipTool:  # type: ignore[no-untyped-def]
        if call.arguments.get("city") == "Oslo":
            return SkipTool(ToolResult.ok("cached: rainy"))
        return call


class Never(Middleware):
    def __init__(self) -> None:
        self.saw: list[str] = []

    async def before_tool(self, ctx, call: ToolCall) -> ToolCall:  # type: ignore[no-untyped-def]
        self.saw.append(call.id)
        return call


async def test_before_tool_skips_a_call_and_supplies_its_result() -> None:
    lookup = FakeTool("lookup", ["live: sunny"])
    model = ScriptedModel(
        [
            ScriptedModel.tool_calls(
                [
                    ToolCall(id="a", name="lookup", arguments={"city": "Oslo"}),
                    ToolCall(id="b", name="lookup", arguments={"city": "Rome"}),
                ]
            ),
            "done",
        ]
    )
    later = Never()
    harness = AgentHarness(model=model, tools=[lookup], middleware=[CachedAnswers(), later])
    run, events = await harness.invoke_with_events("go")
    assert run.ok
    assert [c["city"] for c in lookup.calls] == ["Rome"]  # type: ignore[index]  # Oslo never ran
    results = {m.tool_call_id: m.text for m in run.messages if isinstance(m, ToolMessage)}
    assert results == {"a": "cached: rainy", "b": "live: sunny"}
    assert later.saw == ["b"]  # a skipped call stops the before_tool chain
    completed = {e.call_id: e.output for e in events if e.kind == "tool.completed"}  # type: ignore[attr-defined]
    assert completed == results
    assert run.tool_calls == 2


class StopAfterTool(Middleware):
    async def after_tool(self, ctx, call: ToolCall, result: ToolResult) -> ToolResult:  # type: ignore[no-untyped-def]
        if call.id == "a":
            raise StopWithFinal(f"stopped with {result.text}")
        return result


async def test_stop_with_final_ends_the_run_after_the_round_trip() -> None:
    model = ScriptedModel(
        [
            ScriptedModel.tool_calls(
                [
                    ToolCall(id="a", name="lookup", arguments={"city": "X"}),
                    ToolCall(id="b", name="lookup", arguments={"city": "Y"}),
                ]
            ),
            "never asked",
        ]
    )
    harness = AgentHarness(model=model, tools=[FakeTool("lookup", ["r"])], middleware=[StopAfterTool()])
    run, events = await harness.invoke_with_events("go")
    assert run.ok
    assert run.final_text == "stopped with r"
    assert model.calls == 1
    assert model.remaining == 1
    assert [m.tool_call_id for m in run.messages if isinstance(m, ToolMessage)] == ["a", "b"]  # both answered
    assert run.messages[-1].role == "tool"  # the final text is not added to the transcript
    kinds = [e.kind for e in events]
    assert kinds[-2:] == ["control.applied", "run.completed"]
    (applied,) = [e for e in events if e.kind == "control.applied"]
    assert (applied.control, applied.detail) == ("stop_with_final", "stopped with r")  # type: ignore[attr-defined]


class Budget(Middleware):
    async def before_model(self, ctx, request):  # type: ignore[no-untyped-def]
        if len(request.messages) > 2:
            raise StopWithFinal("budget reached")
        return request


async def test_stop_from_before_model_skips_the_call() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("lookup", {"city": "X"}), "never"])
    harness = AgentHarness(model=model, tools=[FakeTool("lookup")], middleware=[Budget()])
    run = await harness.invoke("go")
    assert run.final_text == "budget reached"
    assert model.calls == 1


async def test_a_tool_can_request_the_stop_and_after_model_can_replace_a_final_answer() -> None:
    @tool
    def finish(answer: str, ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Give the final answer."""
        ctx.request_stop(answer)
        return "ok"

    model = ScriptedModel([ScriptedModel.tool_call("finish", {"answer": "42"}), "never"])
    run = await AgentHarness(model=model, tools=[finish]).invoke("go")
    assert run.final_text == "42"
    assert model.calls == 1

    class Rewrite(Middleware):
        async def after_model(self, ctx, response):  # type: ignore[no-untyped-def]
            raise StopWithFinal("rewritten")

    run = await AgentHarness(model=ScriptedModel(["original"]), middleware=[Rewrite()]).invoke("go")
    assert run.final_text == "rewritten"
    assert run.messages[-1].text == "original"


async def test_a_stale_request_does_not_end_the_next_run() -> None:
    ctx = RunContext()
    ctx.request_stop("old")
    harness = AgentHarness(model=ScriptedModel(["fresh"]))
    run = await harness.invoke_in_context(ctx, "go")
    assert run.final_text == "fresh"


class Gatekeeper(Middleware):
    async def before_tool(self, ctx, call: ToolCall) -> ToolCall:  # type: ignore[no-untyped-def]
        raise StopWithFinal("refused to run anything")


async def test_stop_from_before_tool_does_not_run_that_tool_yet_answers_it() -> None:
    fake = FakeTool("lookup")
    model = ScriptedModel([ScriptedModel.tool_call("lookup", {"city": "X"}, id="t1"), "never"])
    run = await AgentHarness(model=model, tools=[fake], middleware=[Gatekeeper()]).invoke("go")
    assert run.final_text == "refused to run anything"
    assert fake.calls == []  # the hook stopped it: the tool never ran
    (answer,) = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert answer.tool_call_id == "t1"  # the call is still answered: the transcript stays valid
    assert "not run" in answer.text
    assert model.calls == 1
