"""``AnthropicModel`` against a real 127.0.0.1 server replaying Messages wire bytes in small pieces."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.harness.anthropic_samples import (
    error_body,
    event,
    message_body,
    message_end,
    message_start,
    rechunk,
    stream,
    text_block,
    thinking_block,
    tool_block,
    usage,
)
from tests.harness.replay_server import ReplayServer, drain
from tinyagents_nb.harness import (
    AnthropicModel,
    ConfigurationError,
    ContextLimitError,
    ModelNotFound,
    ModelRequest,
    ProviderError,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
    UserMessage,
    resolve_model,
)
from tinyagents_nb.harness.models import ModelStreamItem, StreamAccumulator, StreamBlock, StreamUsage

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-SECRET-7d6c5b4a39281706"
TOOLS = (ToolSchema(name="weather", description="Weather.", parameters={"type": "object"}),)


def make(server: ReplayServer, model: str = "claude-sonnet-4-5", **kwargs: Any) -> AnthropicModel:
    kwargs.setdefault("api_key", KEY)
    return AnthropicModel(model, base_url=server.base_url, **kwargs)


def ask(text: str = "hi", **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text=text)], **kwargs)


def fold(items: list[ModelStreamItem]) -> Any:
    acc = StreamAccumulator()
    for item in items:
        acc.add(item)
    return acc.response()


def assert_no_key(*objs: object) -> None:
    for obj in objs:
        assert KEY not in repr(obj)
        assert KEY not in str(obj)


# ------------------------------------------------------------------------------------------ streaming
async def test_streamed_text_split_inside_lines_and_utf8_characters(replay_server: ReplayServer) -> None:
    pieces = ["Grüße aus ", "Tōkyō 🌸", " — fin."]
    replay_server.enqueue(200, stream(text_block(0, pieces), usage_raw=usage(25, 1), output_tokens=9, size=3))
    model = make(replay_server)
    items, error = await drain(model, ask("hello", max_output_tokens=300))
    assert error is None
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "Grüße aus Tōkyō 🌸 — fin."
    response = fold(items)
    assert response.finish_reason == "stop"
    assert response.usage.input_tokens == 25
    assert response.usage.output_tokens == 9
    assert response.model == "claude-sonnet-4-5-20250929"
    assert response.response_id == "msg_01replay"
    sent = replay_server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body["stream"] is True
    assert sent.body["max_tokens"] == 300
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}
    ]


async def test_tool_input_split_across_many_deltas_and_two_calls_in_one_turn(replay_server: ReplayServer) -> None:
    fragments_a = ['{"ci', 'ty"', ': "O', "slo", '"}']
    fragments_b = ["", '{"city": ', '"Ro', 'me"}']
    replay_server.enqueue(
        200,
        stream(
            text_block(0, ["Checking both."]),
            tool_block(1, "toolu_a", "weather", fragments_a),
            tool_block(2, "toolu_b", "weather", fragments_b),
            stop_reason="tool_use",
            size=5,
        ),
    )
    items, error = await drain(make(replay_server), ask(tools=TOOLS))
    assert error is None
    deltas = [i for i in items if isinstance(i, ToolCallDelta)]
    assert len(deltas) >= 9  # one per start plus one per non-empty fragment: nothing was joined early
    response = fold(items)
    assert response.message.text == "Checking both."
    assert response.message.tool_calls == (
        ToolCall(id="toolu_a", name="weather", arguments={"city": "Oslo"}),
        ToolCall(id="toolu_b", name="weather", arguments={"city": "Rome"}),
    )
    assert response.finish_reason == "tool_calls"


async def test_thinking_streams_as_deltas_and_closes_as_a_signed_block(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200,
        stream(
            thinking_block(0, ["Oslo is ", "cold."], "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pk"),
            text_block(1, ["Bring a coat."]),
        ),
    )
    model = make(replay_server, thinking_budget=2048)
    items, error = await drain(model, ask())
    assert error is None
    assert "".join(i.text for i in items if isinstance(i, ThinkingDelta)) == "Oslo is cold."
    blocks = [i.block for i in items if isinstance(i, StreamBlock)]
    assert blocks == [ThinkingBlock(text="Oslo is cold.", signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pk")]
    response = fold(items)
    assert response.message.reasoning == "Oslo is cold."
    assert response.message.blocks == tuple(blocks)
    body = replay_server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] >= 2048 + 1024


async def test_cache_usage_is_read_from_message_start_and_delta(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200,
        stream(
            text_block(0, ["ok"]),
            usage_raw=usage(12, 1, cache_write=2048, cache_read=4096, write_1h=2048),
            output_tokens=30,
        ),
    )
    items, _ = await drain(make(replay_server, cache_ttl="1h"), ask())
    (reported,) = [i.usage for i in items if isinstance(i, StreamUsage)]
    assert reported.input_tokens == 12 + 2048 + 4096
    assert reported.cached_input_tokens == 4096
    assert reported.cache_write_tokens == 2048
    assert reported.cache_write_1h_tokens == 2048
    assert reported.output_tokens == 30


async def test_missing_usage_and_unknown_events_are_tolerated(replay_server: ReplayServer) -> None:
    events = [
        message_start(None),
        event("ping"),
        event("future_event", {"whatever": [1, 2]}),
        *text_block(0, ["still "]),
        event("content_block_start", {"index": 1, "content_block": {"type": "server_widget", "x": 1}}),
        event("content_block_delta", {"index": 1, "delta": {"type": "widget_delta", "y": 2}}),
        event("content_block_stop", {"index": 1}),
        *text_block(2, ["fine"]),
        *message_end("end_turn", None),
    ]
    replay_server.enqueue(200, rechunk(events, 11))
    items, error = await drain(make(replay_server), ask())
    assert error is None
    assert not any(isinstance(i, StreamUsage) for i in items)
    response = fold(items)
    assert response.message.text == "still fine"
    assert response.usage.is_empty


async def test_a_cut_stream_keeps_the_partial_text_and_is_retryable(replay_server: ReplayServer) -> None:
    events = [message_start(usage(5, 1)), *text_block(0, ["The answer ", "is ", "42."])]
    chunks = rechunk(events, 9)
    replay_server.enqueue(200, chunks, drop_after=len(chunks) - 4)
    items, error = await drain(make(replay_server), ask())
    assert isinstance(error, ProviderError)
    assert error.retryable
    assert error.code == "stream_interrupted"
    assert fold(items).message.text.startswith("The answer")


async def test_clean_eof_before_the_stop_reason_is_an_interruption(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, rechunk([message_start(usage(5, 1)), *text_block(0, ["half"])]), chunked=False)
    items, error = await drain(make(replay_server), ask())
    assert isinstance(error, ProviderError)
    assert error.code == "stream_interrupted"
    assert fold(items).message.text == "half"


async def test_in_stream_overloaded_error_is_retryable_and_typed(replay_server: ReplayServer) -> None:
    events = [
        message_start(usage(5, 1)),
        *text_block(0, ["par"]),
        event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    replay_server.enqueue(200, rechunk(events))
    items, error = await drain(make(replay_server), ask())
    assert isinstance(error, ProviderError)
    assert error.retryable
    assert error.code == "overloaded_error"
    assert fold(items).message.text == "par"


async def test_malformed_event_is_a_retryable_error(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, [message_start(usage(1, 1)), b"event: content_block_delta\ndata: {not json\n\n"])
    _, error = await drain(make(replay_server), ask())
    assert isinstance(error, ProviderError)
    assert error.code == "malformed_stream"
    assert error.retryable


# ------------------------------------------------------------------------------------------ unary
async def test_invoke_parses_a_message(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200,
        message_body(
            [{"type": "text", "text": "Hi there"}],
            usage_raw=usage(100, 7, cache_write=None, cache_read=None),
            stop_reason="max_tokens",
        ),
    )
    model = make(replay_server)
    try:
        response = await model.invoke(ask("hi"))
    finally:
        await model.aclose()
    assert response.message.text == "Hi there"
    assert response.finish_reason == "length"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (100, 7)
    assert response.provider == "anthropic"
    assert response.response_id == "msg_01replay"  # a tracer's gen_ai.response.id
    assert "stream" not in replay_server.requests[0].body


# ------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("status", "kind", "message", "retryable"),
    [
        (529, "overloaded_error", "Overloaded", True),
        (500, "api_error", "Internal server error", True),
        (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", True),
        (400, "invalid_request_error", "messages: roles must alternate", False),
        (401, "authentication_error", f"invalid x-api-key {KEY}", False),
        (403, "permission_error", "Your API key does not have permission", False),
        (413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", False),
    ],
)
async def test_http_errors_are_typed(
    replay_server: ReplayServer, status: int, kind: str, message: str, retryable: bool
) -> None:
    replay_server.enqueue(status, error_body(kind, message), headers={"retry-after": "7"} if status == 429 else None)
    items, error = await drain(make(replay_server), ask())
    assert items == []
    assert isinstance(error, ProviderError)
    assert (error.status, error.retryable, error.code) == (status, retryable, kind)
    if status == 429:
        assert error.retry_after_s == 7.0
    if status in (401, 403):
        assert error.hint
        assert "ANTHROPIC_API_KEY" in error.hint
    assert_no_key(error, error.args)


async def test_prompt_too_long_is_a_context_limit_error(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        400, error_body("invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum")
    )
    _, error = await drain(make(replay_server), ask())
    assert isinstance(error, ContextLimitError)
    assert (error.estimated_tokens, error.limit_tokens) == (213462, 200000)


async def test_unknown_model_is_model_not_found(replay_server: ReplayServer) -> None:
    replay_server.enqueue(404, error_body("not_found_error", "model: claude-nope"))
    model = make(replay_server, "claude-nope")
    with pytest.raises(ModelNotFound):
        await model.invoke(ask())
    await model.aclose()


async def test_x_should_retry_header_wins(replay_server: ReplayServer) -> None:
    replay_server.enqueue(500, error_body("api_error", "boom"), headers={"x-should-retry": "false"})
    _, error = await drain(make(replay_server), ask())
    assert isinstance(error, ProviderError)
    assert not error.retryable


async def test_transport_failure_never_shows_the_key() -> None:
    model = AnthropicModel("claude-sonnet-4-5", api_key=KEY, base_url="http://127.0.0.1:9/v1", timeout_s=2)
    _, error = await drain(model, ask())
    assert isinstance(error, ProviderError)
    assert error.retryable
    assert error.__cause__ is None
    assert error.__context__ is None
    assert_no_key(error, error.args, model)


# ------------------------------------------------------------------------------------------ construction
def test_repr_and_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as info:
        AnthropicModel("claude-sonnet-4-5")
    assert info.value.hint
    assert "ANTHROPIC_API_KEY" in info.value.hint
    model = AnthropicModel("claude-sonnet-4-5", api_key=KEY, thinking_budget=1024, cache_ttl="1h")
    assert KEY not in repr(model)
    assert KEY not in str(vars(model) if hasattr(model, "__dict__") else "")
    assert "api_key=<set>" in repr(model)
    for bad in ({"thinking_budget": 100}, {"cache_ttl": "2h"}, {"max_tokens": 0}, {"cache": "yes"}, {"timeout_s": -1}):
        with pytest.raises(ConfigurationError):
            AnthropicModel("claude-sonnet-4-5", api_key=KEY, **bad)


def test_profile_sets_max_tokens_and_structured_output() -> None:
    new = AnthropicModel("claude-sonnet-4-5", api_key=KEY)
    assert new.profile.structured_output == "native"
    assert new.profile.supports_reasoning
    assert new.options.max_tokens == 8192
    assert new.options.native_json
    old = AnthropicModel("claude-3-haiku-20240307", api_key=KEY)
    assert old.profile.structured_output == "tool"
    assert old.options.max_tokens == 4096
    assert AnthropicModel("claude-sonnet-4-5", api_key=KEY, max_tokens=500).options.max_tokens == 500
    # the profile's output cap is what the model sends, so the harness reserves that, not 64,000
    assert new.profile.max_output_tokens == 8192
    assert AnthropicModel("claude-sonnet-4-5", api_key=KEY, thinking_budget=16_000).profile.max_output_tokens == 17_024
    assert (
        AnthropicModel("claude-3-haiku-20240307", api_key=KEY, thinking_budget=16_000).profile.max_output_tokens == 4096
    )


def test_resolve_model_builds_the_native_adapter_and_compat_stays_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyagents_nb.harness import OpenAIChatModel

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    native = resolve_model("anthropic:claude-sonnet-4-5", cache_ttl="1h")
    assert isinstance(native, AnthropicModel)
    assert native.options.cache_ttl == "1h"
    compat = resolve_model("anthropic-compat:claude-sonnet-4-5")
    assert isinstance(compat, OpenAIChatModel)
    assert compat.provider == "anthropic-compat"
    assert compat.profile.structured_output == "tool"


# ------------------------------------------------------------------------------------------ loops
def test_one_model_serves_several_event_loops_and_threads(replay_server: ReplayServer) -> None:
    model = make(replay_server)
    for _ in range(4):
        replay_server.enqueue(200, message_body([{"type": "text", "text": "ok"}]))

    async def call() -> str:
        try:
            return (await model.invoke(ask())).message.text
        finally:
            await model.aclose()  # this loop's client only; other threads' loops keep theirs

    assert asyncio.run(call()) == "ok"
    assert asyncio.run(call()) == "ok"  # a new loop: the first loop's client is not reused
    results: list[str] = []

    def in_thread() -> None:
        results.append(asyncio.run(call()))

    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert results == ["ok", "ok"]
    assert len(replay_server.requests) == 4


async def test_thinking_tokens_itemised_in_the_usage_become_reasoning_tokens(replay_server: ReplayServer) -> None:
    # the Messages API's recorded shape: message_delta's usage itemises output_tokens_details.thinking_tokens
    events = [
        message_start(usage(31, 1)),
        *thinking_block(0, ["Let me think."], "EqQBCgIYAhIMsig"),
        *text_block(1, ["Forty-two."]),
        event("message_delta", {
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 96, "output_tokens_details": {"thinking_tokens": 80}},
        }),
        event("message_stop", {}),
    ]  # fmt: skip
    replay_server.enqueue(200, rechunk(events, 11))
    items, error = await drain(make(replay_server, thinking_budget=2048), ask())
    assert error is None
    (reported,) = [i.usage for i in items if isinstance(i, StreamUsage)]
    assert (reported.output_tokens, reported.reasoning_tokens) == (96, 80)

    body = message_body(
        [{"type": "text", "text": "Forty-two."}],
        usage_raw={**usage(31, 96), "output_tokens_details": {"thinking_tokens": 80}},
    )
    replay_server.enqueue(200, body)
    response = await make(replay_server).invoke(ask())
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (96, 80)
