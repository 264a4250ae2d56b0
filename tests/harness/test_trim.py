from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from tinyagents_nb.harness._errors import ConfigurationError
from tinyagents_nb.harness._messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage
from tinyagents_nb.harness._trim import KeepFirstAndLast, KeepLast, MaxTokens, trim_messages


def turn(i: int, calls: int = 0) -> list[Message]:
    if not calls:
        return [UserMessage(text=f"q{i}"), AssistantMessage(text=f"a{i}")]
    ids = [f"c{i}-{k}" for k in range(calls)]
    return [
        UserMessage(text=f"q{i}"),
        AssistantMessage(tool_calls=[ToolCall(id=c, name="t") for c in ids]),
        *[ToolMessage(tool_call_id=c, name="t", text="r") for c in ids],
        AssistantMessage(text=f"a{i}"),
    ]


def pairs_intact(messages: list[Message]) -> bool:
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            if open_calls:
                return False
            open_calls = {c.id for c in message.tool_calls}
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
        elif open_calls:
            return False
    return not open_calls


def test_keep_last_keeps_system_and_repairs_the_cut() -> None:
    msgs: list[Message] = [SystemMessage(text="s"), *turn(0), *turn(1, calls=2)]
    # last 3 would start at a tool result: the orphans are dropped
    out = trim_messages(msgs, KeepLast(n=3))
    assert out[0] == SystemMessage(text="s")
    assert pairs_intact(out)
    assert out[-1] == AssistantMessage(text="a1")


def test_keep_first_and_last() -> None:
    msgs: list[Message] = [SystemMessage(text="s"), *turn(0, calls=1), *turn(1), *turn(2)]
    out = trim_messages(msgs, KeepFirstAndLast(first=2, last=2))
    assert pairs_intact(out)
    assert out[:2] == [SystemMessage(text="s"), UserMessage(text="q0")]  # the unanswered call was cut off
    assert out[-2:] == turn(2)


def test_max_tokens_keeps_the_most_recent_that_fit() -> None:
    msgs: list[Message] = [SystemMessage(text="s")] + [m for i in range(50) for m in turn(i)]
    out = trim_messages(msgs, MaxTokens(limit=60))
    assert out[0].role == "system"
    assert out[-1] == AssistantMessage(text="a49")
    assert 2 < len(out) < 20


def test_input_is_not_modified_and_bad_strategies_rejected() -> None:
    msgs: list[Message] = [*turn(0), *turn(1)]
    before = list(msgs)
    trim_messages(msgs, KeepLast(n=1))
    assert msgs == before
    with pytest.raises(ConfigurationError):
        KeepLast(n=-1)
    with pytest.raises(ConfigurationError):
        MaxTokens(limit=0)


@given(
    shape=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12),
    n=st.integers(min_value=0, max_value=40),
    first=st.integers(min_value=0, max_value=10),
)
def test_trimming_never_breaks_tool_pairs(shape: list[int], n: int, first: int) -> None:
    msgs: list[Message] = [SystemMessage(text="s")]
    for i, calls in enumerate(shape):
        msgs += turn(i, calls)
    for strategy in (KeepLast(n=n), KeepFirstAndLast(first=first, last=n), MaxTokens(limit=n * 10 + 1)):
        out = trim_messages(msgs, strategy)
        assert pairs_intact(out), (strategy, out)
        assert out[0] == SystemMessage(text="s")
