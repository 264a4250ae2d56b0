"""The Messages request mapping: transcript shape, cache breakpoints, thinking and structured output."""

from __future__ import annotations

import json
from typing import Any

from tests.harness.anthropic_samples import message_body, usage
from tinyagents_nb.harness import (
    AssistantMessage,
    ImageRef,
    JsonBlock,
    ModelRequest,
    SystemMessage,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
    messages_from_json,
    messages_to_json,
)
from tinyagents_nb.harness.models import ResponseFormat
from tinyagents_nb.harness.providers.wire import (
    AnthropicWireOptions,
    anthropic_body,
    anthropic_tools,
    parse_anthropic_message,
)

MAX_BREAKPOINTS = 4  # Messages accepts at most four cache_control breakpoints per request

OPTS = AnthropicWireOptions(max_tokens=4096)
TOOLS = (ToolSchema(name="weather", description="Weather.", parameters={"type": "object"}),)


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where ``cache_control`` sits, as readable paths."""
    found = []
    for i, tool in enumerate(body.get("tools", ())):
        if "cache_control" in tool:
            found.append(f"tools[{i}]")
    for i, block in enumerate(body.get("system", ())):
        if "cache_control" in block:
            found.append(f"system[{i}]")
    for m, message in enumerate(body["messages"]):
        for b, block in enumerate(message["content"]):
            if "cache_control" in block:
                found.append(f"messages[{m}].content[{b}]")
    return found


def tool_turns() -> list[Any]:
    return [
        SystemMessage(text="You are terse."),
        UserMessage(text="Weather in Oslo and Rome?"),
        AssistantMessage(
            text="Checking.",
            tool_calls=[
                ToolCall(id="toolu_a", name="weather", arguments={"city": "Oslo"}),
                ToolCall(id="toolu_b", name="weather", arguments={"city": "Rome"}),
            ],
            blocks=[ThinkingBlock(text="Two cities.", signature="sig-1")],
        ),
        ToolMessage(tool_call_id="toolu_a", name="weather", text="Oslo: 21C"),
        ToolMessage(tool_call_id="toolu_b", name="weather", text="", is_error=True, blocks=[JsonBlock(data={"e": 1})]),
    ]


def test_system_is_hoisted_and_tool_results_share_one_user_message() -> None:
    body = anthropic_body(ModelRequest(messages=tool_turns(), tools=TOOLS), model="m", options=OPTS, stream=False)
    assert body["system"][0]["text"] == "You are terse."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]
    assert assistant[0]["thinking"] == "Two cities."
    assert assistant[0]["signature"] == "sig-1"
    assert assistant[2]["input"] == {"city": "Oslo"}
    results = body["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results] == ["toolu_a", "toolu_b"]
    assert results[1]["is_error"] is True
    assert results[1]["content"] == [{"type": "text", "text": '{"e":1}'}]
    assert body["max_tokens"] == 4096
    assert body["tools"][0]["input_schema"] == {"type": "object"}


def test_a_user_turn_after_tool_results_joins_them_after_the_results() -> None:
    messages = [*tool_turns(), UserMessage(text="and Paris?")]
    body = anthropic_body(ModelRequest(messages=messages), model="m", options=OPTS, stream=False)
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]


def test_unsigned_reasoning_from_other_providers_is_not_sent() -> None:
    messages = [UserMessage(text="q"), AssistantMessage(text="a", reasoning="hmm", blocks=[ThinkingBlock(text="x")])]
    body = anthropic_body(ModelRequest(messages=messages), model="m", options=OPTS, stream=False)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]


def test_redacted_thinking_round_trips_through_json_and_back_to_the_wire() -> None:
    message = AssistantMessage(text="ok", blocks=[ThinkingBlock(text="", signature="ENCRYPTED", redacted=True)])
    (back,) = messages_from_json(messages_to_json([message]))
    assert back == message
    body = anthropic_body(ModelRequest(messages=[UserMessage(text="q"), back]), model="m", options=OPTS, stream=False)
    assert body["messages"][1]["content"][0] == {"type": "redacted_thinking", "data": "ENCRYPTED"}


def test_images_become_base64_or_url_sources() -> None:
    user = UserMessage(
        text="what is this?",
        blocks=[ImageRef(url="data:image/jpeg;base64,QUJD"), ImageRef(url="https://example.com/a.png")],
    )
    body = anthropic_body(ModelRequest(messages=[user]), model="m", options=OPTS, stream=False)
    content = body["messages"][0]["content"]
    assert content[1]["source"] == {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}
    assert content[2]["source"] == {"type": "url", "url": "https://example.com/a.png"}


def test_cache_breakpoints_mark_tools_system_newest_message_and_previous_user_turn() -> None:
    body = anthropic_body(ModelRequest(messages=tool_turns(), tools=TOOLS), model="m", options=OPTS, stream=False)
    assert breakpoints(body) == ["tools[0]", "system[0]", "messages[0].content[0]", "messages[2].content[1]"]
    assert len(breakpoints(body)) <= MAX_BREAKPOINTS
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral"}


def test_cache_breakpoints_never_exceed_four_and_skip_thinking_blocks() -> None:
    many_systems = [SystemMessage(text=f"s{i}") for i in range(3)]
    messages = [
        *many_systems,
        UserMessage(text="q"),
        AssistantMessage(blocks=[ThinkingBlock(text="t", signature="s")], text="a"),
    ]
    body = anthropic_body(ModelRequest(messages=messages, tools=TOOLS), model="m", options=OPTS, stream=False)
    marks = breakpoints(body)
    assert len(marks) == MAX_BREAKPOINTS
    assert "messages[1].content[0]" not in marks  # the thinking block
    assert "messages[1].content[1]" in marks


def test_cache_off_and_one_hour_ttl() -> None:
    request = ModelRequest(messages=tool_turns(), tools=TOOLS)
    off = anthropic_body(request, model="m", options=AnthropicWireOptions(max_tokens=10, cache=False), stream=False)
    assert breakpoints(off) == []
    hour = anthropic_body(request, model="m", options=AnthropicWireOptions(max_tokens=10, cache_ttl="1h"), stream=False)
    assert hour["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_cached_tools_payload_is_not_mutated_by_breakpoints() -> None:
    cached = anthropic_tools(TOOLS)
    anthropic_body(
        ModelRequest(messages=tool_turns(), tools=TOOLS), model="m", options=OPTS, stream=False, tools=cached
    )
    assert "cache_control" not in json.dumps(cached)


def test_thinking_settings_relax_tool_choice_and_drop_temperature() -> None:
    options = AnthropicWireOptions(max_tokens=2000, thinking_budget=4000)
    request = ModelRequest(messages=[UserMessage(text="q")], tools=TOOLS, tool_choice="weather", temperature=0.2)
    body = anthropic_body(request, model="m", options=options, stream=True)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    assert body["max_tokens"] > 4000
    assert body["tool_choice"] == {"type": "auto"}
    assert "temperature" not in body
    assert body["stream"] is True
    plain = anthropic_body(request, model="m", options=OPTS, stream=False)
    assert plain["tool_choice"] == {"type": "tool", "name": "weather"}
    assert plain["temperature"] == 0.2
    required = anthropic_body(
        ModelRequest(messages=[UserMessage(text="q")], tools=TOOLS, tool_choice="required"),
        model="m",
        options=OPTS,
        stream=False,
    )
    assert required["tool_choice"] == {"type": "any"}


def test_native_json_output_only_where_the_model_supports_it() -> None:
    fmt = ResponseFormat(type="json_schema", name="answer", schema={"type": "object"})
    request = ModelRequest(messages=[UserMessage(text="q")], response_format=fmt)
    native = anthropic_body(
        request, model="m", options=AnthropicWireOptions(max_tokens=10, native_json=True), stream=False
    )
    assert native["output_config"] == {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    assert "output_config" not in anthropic_body(request, model="m", options=OPTS, stream=False)


def test_settings_override_any_field() -> None:
    request = ModelRequest(messages=[UserMessage(text="q")], settings={"max_tokens": 7, "top_k": 3})
    body = anthropic_body(request, model="m", options=OPTS, stream=False)
    assert (body["max_tokens"], body["top_k"]) == (7, 3)


def test_usage_counts_cache_reads_and_writes_inside_input() -> None:
    got = parse_anthropic_message(
        message_body([], usage_raw=usage(10, 5, cache_write=300, cache_read=700, write_1h=100)),
        model="m",
        provider="anthropic",
    ).usage
    assert (got.input_tokens, got.cached_input_tokens, got.cache_write_tokens, got.cache_write_1h_tokens) == (
        1010,
        700,
        300,
        100,
    )
    assert got.output_tokens == 5


def test_stop_reasons_map_to_the_harness_finish_reasons() -> None:
    def finish(stop_reason: str | None) -> str | None:
        body = message_body([{"type": "text", "text": "x"}]) | {"stop_reason": stop_reason}
        return parse_anthropic_message(body, model="m", provider="anthropic").finish_reason

    assert [
        finish(r) for r in ("end_turn", "stop_sequence", "tool_use", "max_tokens", "refusal", "pause_turn", None)
    ] == [
        "stop",
        "stop",
        "tool_calls",
        "length",
        "content_filter",
        "pause_turn",
        None,
    ]


def test_unary_message_with_thinking_text_and_tools() -> None:
    body = message_body(
        [
            {"type": "thinking", "thinking": "Let me see.", "signature": "sig-9"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Looking "},
            {"type": "text", "text": "it up."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        ],
        stop_reason="tool_use",
    )
    response = parse_anthropic_message(body, model="m", provider="anthropic")
    message = response.message
    assert message.text == "Looking it up."
    assert message.reasoning == "Let me see."
    assert message.blocks == (
        ThinkingBlock(text="Let me see.", signature="sig-9"),
        ThinkingBlock(text="", signature="opaque", redacted=True),
    )
    assert message.tool_calls == (ToolCall(id="toolu_1", name="weather", arguments={"city": "Oslo"}),)
    assert response.finish_reason == "tool_calls"
    assert response.model == "claude-sonnet-4-5-20250929"
