"""The whole loop over the real OpenAI adapter and a real 127.0.0.1 replay server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.harness.replay_server import (
    ReplayServer,
    chat_completion,
    error_body,
    sse_text_chunks,
    sse_tool_call_chunks,
    usage_body,
)
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ContextLimitError,
    FallbackPolicy,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    ToolMessage,
    event_to_dict,
    tool,
)
from tinyagents_nb.harness.providers import OpenAIChatModel
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio

KEY = "sk-loop-SECRET-0123456789abcdef0123"
FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, max_retry_after_s=0.05)


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 21C"


_open: list[OpenAIChatModel] = []


@pytest.fixture(autouse=True)
async def close_clients() -> Any:
    yield
    while _open:
        await _open.pop().aclose()


def harness(server: ReplayServer, **kwargs: Any) -> AgentHarness[None]:
    model = OpenAIChatModel("gpt-4o-mini", base_url=server.base_url, api_key=KEY)
    _open.append(model)
    kwargs.setdefault("policy", RunPolicy(retry=FAST))
    return AgentHarness(model=model, tools=[weather], **kwargs)


def assert_no_secret(ctx: RunContext[Any], *objs: object) -> None:
    for _, event in ctx.events.recent():
        assert KEY not in json.dumps(event_to_dict(event), default=str)
    for obj in objs:
        assert KEY not in repr(obj)
        assert KEY not in str(obj)


async def run_streaming(h: AgentHarness[None], ctx: RunContext[Any], prompt: str = "weather in Oslo and Rome?") -> Any:
    stream = h.invoke_streaming(prompt, context=ctx)
    return await stream.wait()


async def test_streamed_parallel_tool_calls_through_the_loop(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200,
        sse_tool_call_chunks(
            [("call_a", "weather", ['{"ci', 'ty": "Oslo"}']), ("call_b", "weather", ['{"city"', ': "Rome"}'])],
            interleave=True,
            usage=usage_body(50, 20, cached=10),
        ),
    )
    replay_server.enqueue(200, sse_text_chunks(["Oslo 21C, ", "Rome 21C."], usage=usage_body(80, 8)))
    h = harness(replay_server)
    ctx = RunContext()
    run = await run_streaming(h, ctx)
    assert run.status == "completed", run.error
    assert run.final_text == "Oslo 21C, Rome 21C."
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["Oslo: 21C", "Rome: 21C"]
    assert run.usage.input_tokens == 130
    assert run.usage.cached_input_tokens == 10
    assert run.cost is not None
    assert run.cost.total_usd is not None
    assert run.cost.total_usd > 0
    second = replay_server.requests[1].body
    assert second is not None
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "tool"]
    assert replay_server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert_no_secret(ctx, h.model, run)


async def test_429_with_retry_after_is_retried_by_the_loop(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        429, error_body("slow down", type="requests", code="rate_limit_exceeded"), headers={"retry-after-ms": "20"}
    )
    replay_server.enqueue(200, chat_completion("fine", usage=usage_body(5, 1)))
    h = harness(replay_server)
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await h.invoke_in_context(ctx, "hi")
    assert run.final_text == "fine"
    retries = rec.of_kind("retry.scheduled")
    assert len(retries) == 1
    assert retries[0].delay_s == pytest.approx(0.02)  # type: ignore[attr-defined]
    assert_no_secret(ctx, run)


@pytest.mark.parametrize("status", [500, 503])
async def test_server_errors_are_retried(replay_server: ReplayServer, status: int) -> None:
    replay_server.enqueue(status, error_body("overloaded", type="server_error"))
    replay_server.enqueue(200, chat_completion("recovered"))
    run = await harness(replay_server).invoke("hi")
    assert run.final_text == "recovered"
    assert len(replay_server.requests) == 2


async def test_dropped_stream_is_retried_and_the_partial_is_not_lost(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, sse_text_chunks(["The answer ", "is ", "42."]), drop_after=2)
    replay_server.enqueue(200, sse_text_chunks(["The answer ", "is ", "42."]))
    h = harness(replay_server)
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await run_streaming(h, ctx, "?")
    assert run.final_text == "The answer is 42."
    assert rec.kinds().count("retry.scheduled") == 1
    # every delta that reached the user is in the event stream, including the ones before the drop
    deltas = "".join(e.delta.text for e in rec.of_kind("model.delta"))  # type: ignore[attr-defined]
    assert deltas.startswith("The answer ")
    assert deltas.endswith("The answer is 42.")


async def test_dropped_stream_without_retries_keeps_the_partial_text(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, sse_text_chunks(["The answer ", "is ", "42."]), drop_after=2)
    h = harness(replay_server, policy=RunPolicy(retry=RetryPolicy.none()))
    ctx = RunContext()
    run = await run_streaming(h, ctx, "?")
    assert run.status == "failed"
    assert isinstance(run.error, ProviderError)
    assert run.error.code == "stream_interrupted"
    partial = run.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.tags == ("partial",)
    assert partial.text.startswith("The answer")
    assert_no_secret(ctx, run.error)


async def test_401_fails_with_a_hint_and_no_key(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        401,
        error_body(f"Incorrect API key provided: {KEY[:8]}...", type="invalid_request_error", code="invalid_api_key"),
    )
    h = harness(replay_server)
    ctx = RunContext()
    with pytest.raises(ProviderError) as info:
        await h.invoke_in_context(ctx, "hi")
    assert info.value.status == 401
    assert info.value.hint
    assert len(replay_server.requests) == 1  # not retried
    assert_no_secret(ctx, info.value, info.value.args)


async def test_context_length_error_becomes_context_limit_error(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        400,
        error_body(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
            code="context_length_exceeded",
        ),
    )
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    with pytest.raises(ContextLimitError):
        await harness(replay_server).invoke_in_context(ctx, "hi")
    assert rec.kinds()[-1] == "run.failed"


async def test_fallback_to_a_second_provider_after_retries(replay_server: ReplayServer) -> None:
    for _ in range(3):
        replay_server.enqueue(503, error_body("down", type="server_error"))
    backup = ScriptedModel(["from the backup model"])
    h = harness(replay_server, policy=RunPolicy(retry=FAST, fallback=FallbackPolicy([backup])))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await h.invoke_in_context(ctx, "hi")
    assert run.final_text == "from the backup model"
    assert rec.kinds().count("retry.scheduled") == 2
    assert "fallback.used" in rec.kinds()
    assert_no_secret(ctx, run)


async def test_non_json_tool_arguments_are_answered_as_an_error(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion(None, tool_calls=[("call_1", "weather", "{city: Oslo")]))
    replay_server.enqueue(200, chat_completion("retrying properly"))
    run = await harness(replay_server).invoke("hi")
    result = run.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.is_error
    assert "{city: Oslo" in result.text
    sent = replay_server.requests[1].body
    assert sent is not None
    assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{city: Oslo"
