from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from tinyagents_nb.harness import (
    AssistantMessage,
    ImageRef,
    JsonBlock,
    Message,
    SystemMessage,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolMessage,
    UserMessage,
    dump_messages,
    load_messages,
    messages_from_json,
    messages_to_json,
)


def transcript() -> list[Message]:
    return [
        SystemMessage(text="be brief", tags=["stable"]),
        UserMessage(text="look", blocks=[ImageRef(url="https://example.invalid/a.png", detail="low")], name="ana"),
        AssistantMessage(
            text="",
            reasoning="need the tool",
            tool_calls=[ToolCall(id="c1", name="lookup", arguments={"q": "x", "n": [1, 2.5, None]})],
            blocks=[ThinkingBlock(text="hm", signature="sig==")],
        ),
        ToolMessage(tool_call_id="c1", name="lookup", text="found", blocks=[JsonBlock(data={"rows": [1, 2]})]),
        ToolMessage(tool_call_id="c2", name="boom", text="bad", is_error=True),
        AssistantMessage(text="done", blocks=[TextBlock(text="done")]),
    ]


def test_json_round_trip_is_lossless() -> None:
    original = transcript()
    text = messages_to_json(original)
    back = messages_from_json(text)
    assert back == original
    assert [type(m) for m in back] == [type(m) for m in original]
    assert json.loads(text)[2]["tool_calls"][0]["arguments"] == {"q": "x", "n": [1, 2.5, None]}


def test_dump_and_load_python_round_trip() -> None:
    original = transcript()
    dumped = dump_messages(original)
    assert all(isinstance(d, dict) for d in dumped)
    assert load_messages(dumped) == original


def test_sequences_are_frozen_to_tuples() -> None:
    msg = AssistantMessage(tool_calls=[ToolCall(id="1", name="f")])
    assert isinstance(msg.tool_calls, tuple)
    with pytest.raises(AttributeError):
        msg.text = "x"  # type: ignore[misc]


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(ValidationError):
        load_messages([{"role": "wizard", "text": "hi"}])


def test_tool_call_from_wire_arguments() -> None:
    good = ToolCall.from_json_arguments(id="1", name="f", arguments='{"a": 1}')
    assert good.arguments == {"a": 1}
    assert good.arguments_valid
    empty = ToolCall.from_json_arguments(id="1", name="f", arguments="")
    assert empty.arguments == {}
    assert empty.arguments_valid
    bad = ToolCall.from_json_arguments(id="1", name="f", arguments='{"a": 1')
    assert not bad.arguments_valid
    assert bad.raw_arguments == '{"a": 1'
    not_object = ToolCall.from_json_arguments(id="1", name="f", arguments="[1, 2]")
    assert not not_object.arguments_valid


def test_deltas_are_tagged() -> None:
    assert TextDelta(text="a").type == "text"
    assert ThinkingDelta(text="a").type == "thinking"
    assert ToolCallDelta(index=0, arguments='{"').type == "tool_call"


json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(text=st.text(max_size=200), args=st.dictionaries(st.text(max_size=10), json_values, max_size=5))
def test_round_trip_property(text: str, args: dict[str, object]) -> None:
    msgs: list[Message] = [
        UserMessage(text=text),
        AssistantMessage(text=text, tool_calls=[ToolCall(id="i", name="n", arguments=args)]),
        ToolMessage(tool_call_id="i", name="n", text=text),
    ]
    assert messages_from_json(messages_to_json(msgs)) == msgs
