"""The adapters' public request API: the exact wire body, the headers (values hidden), a response reader."""

from __future__ import annotations

import json

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, usage_body
from tinyagents_nb.harness import ModelRequest, UserMessage
from tinyagents_nb.harness.providers import AnthropicModel, OpenAIChatModel

pytestmark = pytest.mark.anyio

KEY = "sk-test-request-api-0123456789SECRET"


async def test_openai_request_body_is_what_a_call_sends(replay_server: ReplayServer) -> None:
    model = OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key=KEY)
    request = ModelRequest(messages=[UserMessage(text="hi")], max_output_tokens=12)
    body = model.request_body(request)
    replay_server.enqueue(200, chat_completion("hello", usage=usage_body(3, 1)))
    try:
        await model.invoke(request)
    finally:
        await model.aclose()
    assert replay_server.requests[0].body == body
    assert KEY not in json.dumps(body)
    headers = model.request_headers()
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(headers)
    assert KEY not in str(headers)
    assert "Authorization" in repr(headers)
    response = model.parse_response(chat_completion("parsed", usage=usage_body(5, 2)))
    assert response.message.text == "parsed"
    assert (response.usage.input_tokens, response.provider) == (5, "openai")


async def test_anthropic_request_body_headers_and_parse() -> None:
    model = AnthropicModel("claude-sonnet-4-5", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    body = model.request_body(ModelRequest(messages=[UserMessage(text="hi")]))
    assert body["model"] == "claude-sonnet-4-5"
    assert "stream" not in body
    assert KEY not in json.dumps(body)
    headers = model.request_headers()
    assert headers["x-api-key"] == KEY
    assert KEY not in repr(headers)
    response = model.parse_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 4, "output_tokens": 1},
        }
    )
    assert response.message.text == "ok"
    assert response.provider == "anthropic"
