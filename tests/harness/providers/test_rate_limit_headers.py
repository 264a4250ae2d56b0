"""Adapters surface the provider's rate-limit headers (``model.rate_limit_info``), parsed for both wires."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, error_body, sse_text_chunks
from tinyagents_nb.harness import ModelRequest, ProviderError, UserMessage
from tinyagents_nb.harness.providers import AnthropicModel, OpenAIChatModel, RateLimitInfo
from tinyagents_nb.harness.providers.wire import parse_rate_limit_headers

pytestmark = pytest.mark.anyio

OPENAI_HEADERS = {
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-remaining-requests": "499",
    "x-ratelimit-reset-requests": "120ms",
    "x-ratelimit-limit-tokens": "200000",
    "x-ratelimit-remaining-tokens": "198765",
    "x-ratelimit-reset-tokens": "6m0.5s",
}


def test_openai_headers_parse_durations() -> None:
    info = parse_rate_limit_headers(OPENAI_HEADERS, monotonic=5.0)
    assert info == RateLimitInfo(
        limit_requests=500,
        remaining_requests=499,
        reset_requests_s=0.12,
        limit_tokens=200_000,
        remaining_tokens=198_765,
        reset_tokens_s=360.5,
        observed_at=5.0,
    )
    assert parse_rate_limit_headers({"content-type": "application/json"}) is None
    odd = parse_rate_limit_headers({"x-ratelimit-remaining-requests": "x", "x-ratelimit-reset-requests": "soon"})
    assert odd is not None
    assert odd.remaining_requests is None
    assert odd.reset_requests_s is None


def test_anthropic_headers_parse_rfc3339_resets() -> None:
    now = dt.datetime(2026, 11, 26, 12, 0, 0, tzinfo=dt.UTC)
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2026-11-26T12:00:02Z",
        "anthropic-ratelimit-input-tokens-limit": "30000",
        "anthropic-ratelimit-input-tokens-remaining": "29000",
        "anthropic-ratelimit-input-tokens-reset": "2026-11-26T12:00:01.5Z",
    }
    info = parse_rate_limit_headers(headers, now=now, monotonic=1.0)
    assert info is not None
    assert (info.limit_requests, info.remaining_requests, info.reset_requests_s) == (50, 0, 2.0)
    assert (info.limit_tokens, info.remaining_tokens, info.reset_tokens_s) == (30_000, 29_000, 1.5)
    headers["anthropic-ratelimit-tokens-remaining"] = "10"  # the combined limit wins when sent
    headers["anthropic-ratelimit-tokens-limit"] = "80000"
    info = parse_rate_limit_headers(headers, now=now)
    assert info is not None
    assert (info.remaining_tokens, info.limit_tokens) == (10, 80_000)


async def test_openai_adapter_keeps_the_latest_report_on_success_stream_and_429(replay_server: ReplayServer) -> None:
    model = OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key="sk-test-rl")
    assert model.rate_limit_info is None
    replay_server.enqueue(200, chat_completion("hi"), headers=OPENAI_HEADERS)
    replay_server.enqueue(
        200, sse_text_chunks(["a", "b"]), headers={**OPENAI_HEADERS, "x-ratelimit-remaining-requests": "7"}
    )
    replay_server.enqueue(
        429,
        error_body("slow down", type="rate_limit_error"),
        headers={**OPENAI_HEADERS, "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"},
    )
    request = ModelRequest(messages=[UserMessage(text="hi")])
    try:
        await model.invoke(request)
        info = model.rate_limit_info
        assert info is not None
        assert info.remaining_requests == 499
        [item async for item in model.stream(request)]
        assert model.rate_limit_info is not None
        assert model.rate_limit_info.remaining_requests == 7
        with pytest.raises(ProviderError):
            await model.invoke(request)
        assert model.rate_limit_info is not None
        assert (model.rate_limit_info.remaining_requests, model.rate_limit_info.reset_requests_s) == (0, 1.0)
    finally:
        await model.aclose()


async def test_anthropic_adapter_keeps_the_latest_report(replay_server: ReplayServer) -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    replay_server.enqueue(
        200,
        body,
        headers={"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "12"},
    )
    model = AnthropicModel("claude-sonnet-4-5", base_url=replay_server.base_url, api_key="sk-ant-test-rl")
    try:
        await model.invoke(ModelRequest(messages=[UserMessage(text="hi")]))
    finally:
        await model.aclose()
    info = model.rate_limit_info
    assert info is not None
    assert (info.limit_requests, info.remaining_requests) == (50, 12)
