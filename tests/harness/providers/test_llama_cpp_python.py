"""llama-cpp-python's server, replayed from its real bytes (tests/fixtures/llama-cpp-python/).

Its habits differ from llama.cpp's ``llama-server``: no usage on streams (asked for or not), HTTP
500 for an assistant turn with ``"content": null``, a named ``tool_choice`` honoured while a
``json_schema`` response format is rejected (500), an overflow worded the OpenAI way on a unary
call, and, on a streamed call, a 200 whose event stream is empty. Each test serves the recorded
bytes from a 127.0.0.1 replay server and drives the public API; where the harness sends a request
the recording was made from, the test also checks that it still sends exactly that body, so a
change in request shapes shows up as a stale recording instead of passing against old bytes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from tests.harness.recorded import Recording
from tests.harness.replay_server import ReplayServer, drain
from tinyagents_nb.harness import (
    AgentHarness,
    ContextLimitError,
    ModelPricing,
    ModelRequest,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    TextDelta,
    ToolSchema,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.models import StreamAccumulator, StreamUsage
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec

pytestmark = pytest.mark.anyio

HOST = "llama-cpp-python"
FAST = RetryPolicy(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.002)
WEATHER_TOOL = ToolSchema(
    name="get_weather",
    description="The current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def rec(name: str) -> Recording:
    return Recording.load(HOST, name)


class Weather(BaseModel):
    """The structured answer the structured-output recordings ask for."""

    city: str
    celsius: float


def model_on(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("smollm2", provider=ProviderSpec.compatible(base_url=server.base_url))


def priced() -> RunContext[None]:
    """A context that knows the local model's (made-up) price, so its calls are priced, not unknown."""
    ctx = RunContext()
    ctx.costs.register_price("compatible:smollm2", ModelPricing(input_per_mtok=1_000, output_per_mtok=1_000))
    return ctx


def ask(text: str, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text=text)], temperature=0.0, **fields)


# ------------------------------------------------------------------------------------------- usage
async def test_a_unary_answer_reports_usage_and_it_is_taken_exactly(replay_server: ReplayServer) -> None:
    recording = rec("unary_text")
    recording.enqueue(replay_server)
    response = await model_on(replay_server).invoke(ask("Say hi.", max_output_tokens=8))
    assert replay_server.requests[0].body == recording.request
    reported = recording.json()["usage"]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (
        reported["prompt_tokens"],
        reported["completion_tokens"],
    )
    assert not response.usage.estimated
    assert response.message.text == recording.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("name", ["stream_include_usage", "stream_plain"])
async def test_its_streams_carry_no_usage_even_when_asked(replay_server: ReplayServer, name: str) -> None:
    recording = rec(name)
    assert not any(event.get("usage") for event in recording.events())  # the habit, in the real bytes
    recording.enqueue(replay_server)
    items, error = await drain(model_on(replay_server), ask("Say hi.", max_output_tokens=8))
    assert error is None
    if name == "stream_include_usage":
        assert replay_server.requests[0].body == recording.request
    text = "".join(item.text for item in items if isinstance(item, TextDelta))
    assert text == "".join(str(e["choices"][0]["delta"].get("content") or "") for e in recording.events())
    assert not [item for item in items if isinstance(item, StreamUsage)]  # nothing invented at the wire


async def test_a_streamed_run_records_an_estimate_marked_as_such_and_prices_it(replay_server: ReplayServer) -> None:
    recording = rec("stream_include_usage")
    recording.enqueue(replay_server)
    ctx = priced()
    harness = AgentHarness(model=model_on(replay_server), policy=RunPolicy(max_output_tokens=8, temperature=0.0))
    run, _ = await harness.invoke_with_status(ctx, "Say hi.", streaming=True)
    assert run.status == "completed", run.error
    assert replay_server.requests[0].body == recording.request
    assert run.usage.estimated
    assert run.usage.input_tokens > 0
    assert run.usage.output_tokens > 0  # the 9 deltas that arrived, estimated: not zero
    totals = ctx.costs.total()
    assert totals.known_usd is not None and totals.known_usd > 0


# -------------------------------------------------------------------------------- content: null
def like_the_server(body: Any) -> tuple[int, bytes | list[bytes], dict[str, str]]:
    """Answer as the recorded server did: a tool call first, a 500 for ``"content": null`` later."""
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    if not assistants:
        return rec("tool_choice_named").answer()
    if any(m.get("content") is None for m in assistants):
        return rec("tool_result_content_null").answer()
    return rec("tool_result_content_empty").answer()


def test_the_recorded_rejection_is_about_the_null_content() -> None:
    recording = rec("tool_result_content_null")
    assert recording.status == 500
    message = recording.json()["error"]["message"]
    assert "'content'), 'msg': 'Input should be a valid string', 'input': None" in message


async def test_a_real_tool_loop_never_sends_null_content_so_the_server_accepts_it(replay_server: ReplayServer) -> None:
    replay_server.respond_with(like_the_server)

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return "3 C and light snow"

    harness = AgentHarness(model=model_on(replay_server), tools=[get_weather], policy=RunPolicy(retry=FAST))
    run, _ = await harness.invoke_with_status(priced(), "What is the weather in Oslo?")
    assert run.status == "completed", run.error
    first, second = (r.body for r in replay_server.requests)
    (assistant,) = [m for m in second["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["id"] == rec("tool_choice_named").json()["choices"][0]["message"]["tool_calls"][
        0
    ]["id"]  # the server's own call id goes back


async def test_the_null_content_rejection_is_a_readable_provider_error(replay_server: ReplayServer) -> None:
    rec("tool_result_content_null").enqueue(replay_server)
    with pytest.raises(ProviderError) as info:
        await model_on(replay_server).invoke(ask("x"))
    assert info.value.status == 500
    assert "Input should be a valid string" in str(info.value)


# ------------------------------------------------------------------------------------ tool_choice
@pytest.mark.parametrize("name", ["tool_choice_named", "tool_choice_named_stream"])
async def test_a_named_tool_choice_comes_back_as_one_call(replay_server: ReplayServer, name: str) -> None:
    recording = rec(name)
    recording.enqueue(replay_server)
    model = model_on(replay_server)
    request = ask("What is the weather in Oslo?", tools=(WEATHER_TOOL,), tool_choice="get_weather", max_output_tokens=32)
    if name.endswith("_stream"):
        items, error = await drain(model, request)
        assert error is None
        acc = StreamAccumulator()
        for item in items:
            acc.add(item)
        response = acc.response()
    else:
        response = await model.invoke(request)
    assert replay_server.requests[0].body == recording.request
    (call,) = response.message.tool_calls
    assert call.name == "get_weather"
    assert call.id.startswith("call__0_get_weather_cmpl-")
    assert call.arguments == {"city": "Oslo"}
