"""The whole agent loop over ``AnthropicModel`` and a real 127.0.0.1 replay server."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from tests.harness.anthropic_samples import (
    error_body,
    message_body,
    message_start,
    rechunk,
    stream,
    text_block,
    thinking_block,
    tool_block,
    usage,
)
from tests.harness.replay_server import ReplayServer
from tinyagents_nb.harness import (
    AgentHarness,
    AnthropicModel,
    AssistantMessage,
    RetryPolicy,
    RunContext,
    RunPolicy,
    ThinkingBlock,
    ToolMessage,
    event_to_dict,
    messages_from_json,
    messages_to_json,
    tool,
)
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-LOOP-SECRET-0a1b2c3d4e5f"
FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, max_retry_after_s=0.05)
SIGNATURE = "EuYBCkQYAiJAgCs1le6/Pol5Z4/JdQ0zSXs9EPNzRpvXF3fUpQRZ3pY="

_open: list[AnthropicModel] = []


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 21C"


@pytest.fixture(autouse=True)
async def close_clients() -> Any:
    yield
    while _open:
        await _open.pop().aclose()


def harness(server: ReplayServer, model: str = "claude-sonnet-4-5", **kwargs: Any) -> AgentHarness[None]:
    options = {key: kwargs.pop(key) for key in ("thinking_budget", "cache", "cache_ttl") if key in kwargs}
    chat = AnthropicModel(model, base_url=server.base_url, api_key=KEY, **options)
    _open.append(chat)
    kwargs.setdefault("policy", RunPolicy(retry=FAST))
    return AgentHarness(model=chat, tools=[weather], system_prompt="You are terse.", **kwargs)


def assert_no_secret(ctx: RunContext[Any], *objs: object) -> None:
    for _, event in ctx.events.recent():
        assert KEY not in json.dumps(event_to_dict(event), default=str)
    for obj in objs:
        assert KEY not in repr(obj)
        assert KEY not in str(obj)


async def test_tool_loop_with_thinking_round_trips_the_signed_block(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200,
        stream(
            thinking_block(0, ["Two cities, ", "two calls."], SIGNATURE),
            tool_block(1, "toolu_a", "weather", ['{"city":', ' "Oslo"}']),
            tool_block(2, "toolu_b", "weather", ['{"city": "R', 'ome"}']),
            stop_reason="tool_use",
            usage_raw=usage(40, 1, cache_write=1500, cache_read=0),
            output_tokens=60,
        ),
    )
    replay_server.enqueue(
        200,
        stream(
            text_block(0, ["Oslo 21C, ", "Rome 21C."]),
            usage_raw=usage(30, 1, cache_write=0, cache_read=1500),
            output_tokens=9,
        ),
    )
    h = harness(replay_server, thinking_budget=1024)
    ctx = RunContext()
    run = await h.invoke_streaming("weather in Oslo and Rome?", context=ctx).wait()
    assert run.status == "completed", run.error
    assert run.final_text == "Oslo 21C, Rome 21C."
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["Oslo: 21C", "Rome: 21C"]
    thinker = next(m for m in run.messages if isinstance(m, AssistantMessage) and m.tool_calls)
    assert thinker.blocks == (ThinkingBlock(text="Two cities, two calls.", signature=SIGNATURE),)
    assert messages_from_json(messages_to_json(run.messages)) == list(run.messages)  # lossless for journals
    second = replay_server.requests[1].body
    assert second["system"][0]["text"] == "You are terse."
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    replayed = second["messages"][1]["content"]
    assert replayed[0] == {"type": "thinking", "thinking": "Two cities, two calls.", "signature": SIGNATURE}
    assert [b["type"] for b in replayed] == ["thinking", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in second["messages"][2]["content"]] == ["toolu_a", "toolu_b"]
    assert second["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert second["messages"][2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # usage and cost: cache writes and reads are inside input and priced by genai-prices
    assert run.usage.input_tokens == 40 + 1500 + 30 + 1500
    assert (run.usage.cache_write_tokens, run.usage.cached_input_tokens) == (1500, 1500)
    assert run.cost is not None
    assert run.cost.total_usd is not None
    # claude-sonnet-4-5: $3 input, $3.75 cache write, $0.30 cache read, $15 output per MTok
    expected = (
        Decimal(70) * 3 + Decimal(1500) * Decimal("3.75") + Decimal(1500) * Decimal("0.3") + Decimal(69) * 15
    ) / 1_000_000
    assert run.cost.total_usd == expected
    assert_no_secret(ctx, run, h.model)


async def test_overloaded_then_rate_limited_then_answered(replay_server: ReplayServer) -> None:
    replay_server.enqueue(529, error_body("overloaded_error", "Overloaded"))
    replay_server.enqueue(429, error_body("rate_limit_error", "slow down"), headers={"retry-after": "2"})
    replay_server.enqueue(200, message_body([{"type": "text", "text": "fine"}]))
    h = harness(replay_server)
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await h.invoke_in_context(ctx, "hi")
    assert run.final_text == "fine"
    assert len(replay_server.requests) == 3
    retries = rec.of_kind("retry.scheduled")
    assert len(retries) == 2
    assert retries[1].delay_s == pytest.approx(0.05)  # type: ignore[attr-defined]  # retry-after 2 s, capped by the policy
    assert_no_secret(ctx, run)


async def test_cut_stream_without_retries_keeps_the_partial_text(replay_server: ReplayServer) -> None:
    chunks = rechunk([message_start(usage(5, 1)), *text_block(0, ["The answer ", "is ", "42."])], 9)
    replay_server.enqueue(200, chunks, drop_after=len(chunks) - 4)  # cut inside the text block
    h = harness(replay_server, policy=RunPolicy(retry=RetryPolicy.none()))
    ctx = RunContext()
    run = await h.invoke_streaming("?", context=ctx).wait()
    assert run.status == "failed"
    partial = run.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.tags == ("partial",)
    assert partial.text.startswith("The answer")


class Forecast(BaseModel):
    city: str
    celsius: int


async def test_structured_output_uses_native_json_on_new_models(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, message_body([{"type": "text", "text": '{"city": "Oslo", "celsius": 21}'}]))
    h = harness(replay_server, policy=RunPolicy(retry=FAST, output=Forecast))
    run = await h.invoke("forecast for Oslo")
    assert run.structured is not None
    assert run.structured.value == Forecast(city="Oslo", celsius=21)
    body = replay_server.requests[0].body
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert set(body["output_config"]["format"]["schema"]["properties"]) == {"city", "celsius"}


async def test_structured_output_uses_a_forced_tool_on_older_models(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200,
        message_body(
            [{"type": "tool_use", "id": "toolu_s", "name": "Forecast", "input": {"city": "Rome", "celsius": 25}}],
            stop_reason="tool_use",
        ),
    )
    h = harness(replay_server, "claude-3-5-haiku-latest", policy=RunPolicy(retry=FAST, output=Forecast))
    run = await h.invoke("forecast for Rome")
    assert run.structured is not None
    assert run.structured.value == Forecast(city="Rome", celsius=25)
    body = replay_server.requests[0].body
    assert "output_config" not in body
    assert "Forecast" in [t["name"] for t in body["tools"]]
