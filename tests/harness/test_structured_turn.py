"""Structured-output repair: an invalid answer goes back to the model with its error, a bounded number of times."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ConfigurationError,
    LimitExceeded,
    ModelProfile,
    RunContext,
    RunLimits,
    RunPolicy,
    StructuredOutputError,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.events import StructuredRepair
from tinyagents_nb.harness.runtime import REPAIR_TAG
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio

NATIVE = ModelProfile(name="m", provider="test", structured_output="native")
GOOD = '{"city": "Rome", "celsius": 21}'


class Weather(BaseModel):
    city: str
    celsius: float


@tool
def lookup(city: str) -> str:
    """Look the weather up."""
    return f"{city}: 21 C"


def repairs(ctx: RunContext[None]) -> EventRecorder:
    return EventRecorder(ctx.events)


async def test_native_answer_is_repaired_with_the_validation_error() -> None:
    model = ScriptedModel(["it is warm", '{"city": "Rome"}', GOOD], profile=NATIVE)
    ctx = RunContext()
    rec = repairs(ctx)
    run = await AgentHarness(model=model, output_type=Weather).invoke_in_context(ctx, "weather?")
    assert run.structured is not None
    assert run.structured.value == Weather(city="Rome", celsius=21)
    assert run.model_calls == 3
    events = rec.of_type(StructuredRepair)
    assert [(e.attempt, e.max_attempts, e.output, e.strategy) for e in events] == [
        (1, 2, "Weather", "native"),
        (2, 2, "Weather", "native"),
    ]
    assert "not JSON" in events[0].error
    assert "celsius" in events[1].error
    # the second request carries the first answer and the error; the transcript keeps both
    second = model.requests[1].messages
    assert second[-2] == AssistantMessage(text="it is warm")
    assert isinstance(second[-1], UserMessage)
    assert REPAIR_TAG in second[-1].tags
    assert "not JSON" in second[-1].text
    assert [m for m in run.messages if REPAIR_TAG in m.tags] == [second[-1], model.requests[2].messages[-1]]


async def test_tool_strategy_invalid_arguments_are_answered_with_the_error() -> None:
    bad = ScriptedModel.tool_call("Weather", {"city": "Oslo", "celsius": "freezing"}, id="w1")
    good = ScriptedModel.tool_call("Weather", {"city": "Oslo", "celsius": -3}, id="w2")
    model = ScriptedModel([bad, good])
    ctx = RunContext()
    rec = repairs(ctx)
    run = await AgentHarness(model=model, output_type=Weather).invoke_in_context(ctx, "weather?")
    assert run.structured is not None
    assert run.structured.value == Weather(city="Oslo", celsius=-3)
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolMessage)
    assert answer.tool_call_id == "w1"
    assert answer.is_error
    assert "celsius" in answer.text
    assert "Call `Weather` again" in answer.text
    assert [e.strategy for e in rec.of_type(StructuredRepair)] == ["tool"]


async def test_tool_strategy_text_answer_is_asked_to_call_the_schema_tool() -> None:
    model = ScriptedModel(["Rome, 21 C", ScriptedModel.tool_call("Weather", {"city": "Rome", "celsius": 21})])
    run = await AgentHarness(model=model, tools=[lookup], output_type=Weather).invoke("weather?")
    assert run.structured is not None
    ask = model.requests[1].messages[-1]
    assert isinstance(ask, UserMessage)
    assert "calling `Weather`" in ask.text


async def test_a_real_call_next_to_an_invalid_answer_still_runs() -> None:
    turn = ScriptedModel.tool_calls(
        [
            ToolCall(id="r1", name="lookup", arguments={"city": "Rome"}),
            ToolCall(id="w1", name="Weather", arguments={"city": "Rome"}),
        ]
    )
    model = ScriptedModel([turn, ScriptedModel.tool_call("Weather", {"city": "Rome", "celsius": 21})])
    run = await AgentHarness(model=model, tools=[lookup], output_type=Weather).invoke("weather?")
    assert run.structured is not None
    results = {m.tool_call_id: m for m in model.requests[1].messages if isinstance(m, ToolMessage)}
    assert results["r1"].text == "Rome: 21 C"
    assert not results["r1"].is_error
    assert results["w1"].is_error


async def test_repairs_are_bounded_and_the_last_error_is_raised() -> None:
    model = ScriptedModel(["nope", "still nope", "never asked"], profile=NATIVE)
    ctx = RunContext()
    rec = repairs(ctx)
    harness = AgentHarness(model=model, output_type=Weather, policy=RunPolicy(structured_retries=1))
    with pytest.raises(StructuredOutputError, match="still invalid after 1 repair attempts"):
        await harness.invoke_in_context(ctx, "weather?")
    assert model.calls == 2
    assert len(rec.of_type(StructuredRepair)) == 1


async def test_no_repair_when_retries_is_zero() -> None:
    model = ScriptedModel(["nope", GOOD], profile=NATIVE)
    ctx = RunContext()
    rec = repairs(ctx)
    harness = AgentHarness(model=model, output_type=Weather, policy=RunPolicy(structured_retries=0))
    with pytest.raises(StructuredOutputError, match="not JSON") as info:
        await harness.invoke_in_context(ctx, "weather?")
    assert "repair" not in str(info.value)
    assert model.calls == 1
    assert rec.of_type(StructuredRepair) == []


async def test_repair_calls_count_under_the_model_call_limit() -> None:
    model = ScriptedModel(["a", "b", "c", GOOD], profile=NATIVE)
    policy = RunPolicy(structured_retries=5, limits=RunLimits(max_model_calls=2))
    with pytest.raises(LimitExceeded):
        await AgentHarness(model=model, output_type=Weather, policy=policy).invoke("weather?")
    assert model.calls == 2


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_structured_retries_is_validated(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="structured_retries"):
        RunPolicy(structured_retries=bad)  # type: ignore[arg-type]
