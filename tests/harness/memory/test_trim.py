from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tinyagents_nb.harness.memory import KeepFirstAndLast, KeepLast, MaxTokens, trim_messages
from tinyagents_nb.harness.models import HeuristicCounter, TokenEstimator


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
    # the first two messages are half of turn 0 (its question and an unanswered call): the turn goes whole
    assert out == [SystemMessage(text="s"), *turn(2)]
    out = trim_messages(msgs, KeepFirstAndLast(first=4, last=2))
    assert out == [SystemMessage(text="s"), *turn(0, calls=1), *turn(2)]


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


def test_trimming_never_keeps_an_answer_without_its_question() -> None:
    """The audit's case: a cut between a question and its answer used to keep the answer alone."""
    msgs: list[Message] = [SystemMessage(text="s"), *turn(0), *turn(1, calls=1), *turn(2)]
    # the last 5 start at turn 1's assistant call: turn 1 goes whole, the current turn stays
    assert trim_messages(msgs, KeepLast(n=5)) == [SystemMessage(text="s"), *turn(2)]
    assert trim_messages(msgs, KeepLast(n=6)) == [SystemMessage(text="s"), *turn(1, calls=1), *turn(2)]
    # the current question is kept even when the pick misses it
    assert trim_messages(msgs, KeepLast(n=1)) == [SystemMessage(text="s"), *turn(2)]
    assert trim_messages(msgs, KeepLast(n=0)) == [SystemMessage(text="s"), UserMessage(text="q2")]


def test_the_current_turn_keeps_its_question_and_drops_old_rounds_whole() -> None:
    ids = [f"c{k}" for k in range(4)]
    rounds: list[Message] = []
    for c in ids:
        rounds += [
            AssistantMessage(tool_calls=[ToolCall(id=c, name="t")]),
            ToolMessage(tool_call_id=c, name="t", text="r"),
        ]
    msgs: list[Message] = [SystemMessage(text="s"), UserMessage(text="task"), *rounds]
    out = trim_messages(msgs, KeepLast(n=3))  # lands on a result: its round goes, the question stays
    assert out == [SystemMessage(text="s"), UserMessage(text="task"), *rounds[-2:]]


def test_max_tokens_reserves_the_question_and_stays_within_budget() -> None:
    est = TokenEstimator(HeuristicCounter())
    msgs: list[Message] = [SystemMessage(text="s" * 40)] + [m for i in range(6) for m in turn(i)]
    msgs[-2] = UserMessage(text="q" * 200)  # a long current question
    limit = est.count_message(msgs[0]) + est.count_message(msgs[-2]) + 2 * est.count_message(turn(1)[0]) + 10
    out = trim_messages(msgs, MaxTokens(limit=limit), estimator=est)
    assert out[:1] == msgs[:1]
    assert msgs[-2] in out
    assert sum(est.count_message(m) for m in out) <= limit


def _turns_of(msgs: list[Message]) -> list[list[int]]:
    """Indices of each earlier turn (question to next question), system messages excluded."""
    questions = [i for i, m in enumerate(msgs) if isinstance(m, UserMessage)]
    bounds = [*questions, len(msgs)]
    return [
        [j for j in range(bounds[k], bounds[k + 1]) if not isinstance(msgs[j], SystemMessage)]
        for k in range(len(questions) - 1)
    ]


@given(
    shape=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=10),
    n=st.integers(min_value=0, max_value=40),
    first=st.integers(min_value=0, max_value=10),
    notes=st.sets(st.integers(min_value=0, max_value=10)),
)
def test_trimming_cuts_only_at_turn_boundaries(shape: list[int], n: int, first: int, notes: set[int]) -> None:
    msgs: list[Message] = [SystemMessage(text="s")]
    for i, calls in enumerate(shape):
        msgs += turn(i, calls)
        if i in notes:
            msgs.append(SystemMessage(text=f"note {i}"))
    est = TokenEstimator(HeuristicCounter())
    current = max(i for i, m in enumerate(msgs) if isinstance(m, UserMessage))
    for strategy in (KeepLast(n=n), KeepFirstAndLast(first=first, last=n), MaxTokens(limit=n * 10 + 1)):
        out = trim_messages(msgs, strategy, estimator=est)
        kept = {id(m) for m in out}
        assert pairs_intact(out), (strategy, out)
        assert [m for m in msgs if isinstance(m, SystemMessage)] == [m for m in out if isinstance(m, SystemMessage)]
        assert id(msgs[current]) in kept  # the current question
        for unit in _turns_of(msgs):  # every earlier turn: whole or not at all
            assert len({id(msgs[i]) in kept for i in unit}) == 1, (strategy, unit, out)
        assert [m for m in msgs if id(m) in kept] == out  # order preserved, nothing invented
        if isinstance(strategy, MaxTokens):
            floor = sum(est.count_message(m) for m in msgs if isinstance(m, SystemMessage)) + est.count_message(
                msgs[current]
            )
            if floor <= strategy.limit:
                assert sum(est.count_message(m) for m in out) <= strategy.limit


def test_a_structured_repair_request_is_not_a_new_question() -> None:
    """The repair prompt follows the question it repairs: trimming must not treat the question as an old turn."""
    repair = UserMessage(text="fix your JSON", tags=("structured_repair",))
    msgs: list[Message] = [
        SystemMessage(text="s"),
        *turn(0),
        UserMessage(text="task"),
        AssistantMessage(text="{bad"),
        repair,
    ]
    out = trim_messages(msgs, KeepLast(n=1))
    assert out == [SystemMessage(text="s"), UserMessage(text="task"), repair]
