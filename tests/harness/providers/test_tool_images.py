"""Images in tool results: on the wire for models with vision, left out (text only) for the others.

A tool returns ``ToolResult(text, blocks=[ImageRef(data: URI)])``; the whole loop runs over real
adapters and a 127.0.0.1 replay server, and the tests read the bytes each adapter sent.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.harness.anthropic_samples import message_body
from tests.harness.replay_server import ReplayServer, chat_completion
from tinyagents_nb.harness import (
    AgentHarness,
    AnthropicModel,
    ImageRef,
    ModelProfile,
    OpenAIChatModel,
    ToolResult,
    tool,
)

pytestmark = pytest.mark.anyio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 24).decode()
URL = f"data:image/png;base64,{PNG}"


@tool
def chart() -> ToolResult:
    """Draw the chart."""
    return ToolResult(text="[image/png: a bar chart]", blocks=[ImageRef(url=URL, media_type="image/png")])


def openai_run(server: ReplayServer, model: str, **kwargs: Any) -> AgentHarness[None]:
    chat = OpenAIChatModel(model, base_url=server.base_url, api_key="sk-test-0000", **kwargs)
    return AgentHarness(model=chat, tools=[chart])


async def test_openai_chat_sends_a_tool_results_image_in_a_user_message_after_the_tool_messages(
    replay_server: ReplayServer,
) -> None:
    replay_server.enqueue(200, chat_completion(tool_calls=[("call_1", "chart", "{}"), ("call_2", "chart", "{}")]))
    replay_server.enqueue(200, chat_completion("a bar chart"))
    run = await openai_run(replay_server, "gpt-4o").invoke("draw it")
    assert run.final_text == "a bar chart"
    sent = json.loads(replay_server.requests[1].raw)["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["user", "assistant", "tool", "tool", "user"]  # tool messages stay next to their call
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "[image/png: a bar chart]"}
    images = sent[4]["content"]
    assert images == [
        {"type": "text", "text": "The image returned by tool call call_1 (chart):"},
        {"type": "image_url", "image_url": {"url": URL}},
        {"type": "text", "text": "The image returned by tool call call_2 (chart):"},
        {"type": "image_url", "image_url": {"url": URL}},
    ]


async def test_a_model_without_vision_reads_the_text_and_never_receives_the_image(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion(tool_calls=[("call_1", "chart", "{}")]))
    replay_server.enqueue(200, chat_completion("done"))
    await openai_run(replay_server, "gpt-3.5-turbo").invoke("draw it")
    raw = replay_server.requests[1].raw.decode()
    assert PNG not in raw
    assert "image_url" not in raw
    sent = json.loads(raw)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["content"] == "[image/png: a bar chart]\n[1 image left out: this model does not accept images]"


async def test_a_registered_profile_decides_vision_over_the_name(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion(tool_calls=[("call_1", "chart", "{}")]))
    replay_server.enqueue(200, chat_completion("done"))
    profile = ModelProfile(name="my-local-vlm", provider="openai", supports_vision=True)
    await openai_run(replay_server, "my-local-vlm", profile=profile).invoke("draw it")
    assert URL in replay_server.requests[1].raw.decode()


async def test_anthropic_puts_the_image_inside_the_tool_result_block(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200,
        message_body([{"type": "tool_use", "id": "toolu_1", "name": "chart", "input": {}}], stop_reason="tool_use"),
    )
    replay_server.enqueue(200, message_body([{"type": "text", "text": "a bar chart"}]))
    chat = AnthropicModel("claude-sonnet-4-5", base_url=replay_server.base_url, api_key="sk-ant-test-0000")
    try:
        run = await AgentHarness(model=chat, tools=[chart]).invoke("draw it")
    finally:
        await chat.aclose()
    assert run.final_text == "a bar chart"
    last = json.loads(replay_server.requests[1].raw)["messages"][-1]
    assert last["role"] == "user"
    (result,) = last["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_1"
    text, image = result["content"][:2]
    assert text["type"] == "text"
    assert text["text"] == "[image/png: a bar chart]"
    assert image["type"] == "image"
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}
