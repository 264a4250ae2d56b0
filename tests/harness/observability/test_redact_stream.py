"""Redaction across stream deltas: a secret split over deltas never reaches a persisting sink in clear."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from tests.harness.replay_server import ReplayServer, sse_text_chunks, usage_body
from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    ModelCompleted,
    ModelDelta,
    RunContext,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    event_to_dict,
)
from tinyagents_nb.harness.events import CacheHit
from tinyagents_nb.harness.observability import JournalSink, RedactingSink, SQLiteEventJournal
from tinyagents_nb.harness.observability._redact_stream import merge_spans
from tinyagents_nb.harness.providers import OpenAIChatModel

pytestmark = pytest.mark.anyio

L: Any = {"run_id": "r", "root_run_id": "r"}
SECRET = "tk_EchoSecret9f8e7d6c5b4a3210XyZ"


class Collect:
    def __init__(self) -> None:
        self.items: list[tuple[int, AgentEvent]] = []
        self.flushed = 0

    def __call__(self, offset: int, event: AgentEvent) -> None:
        self.items.append((offset, event))

    def flush(self) -> None:
        self.flushed += 1

    def texts(self) -> list[str]:
        out = []
        for _, event in self.items:
            if isinstance(event, ModelDelta):
                delta = event.delta
                out.append(delta.arguments if isinstance(delta, ToolCallDelta) else delta.text)
        return out


def _delta(text: str, call: str = "c1", **kw: Any) -> ModelDelta:
    return ModelDelta(call_id=call, delta=TextDelta(text=text), **(L | kw))


def _done(call: str = "c1") -> ModelCompleted:
    return ModelCompleted(call_id=call, model="m", **L)


def _feed(sink: RedactingSink, events: list[AgentEvent]) -> None:
    for offset, event in enumerate(events):
        sink(offset, event)


def _assert_no_piece_of_secret(texts: list[str], secret: str = SECRET) -> None:
    """Not even a 6-character run of the secret may pass (a near-complete key is as bad as the key)."""
    joined = "\n".join(texts).lower()
    for start in range(len(secret) - 5):
        assert secret[start : start + 6].lower() not in joined, secret[start : start + 6]


def test_a_secret_split_across_two_deltas_is_redacted_in_the_delta_where_it_began() -> None:
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    _feed(sink, [_delta("my key is " + SECRET[:7]), _delta(SECRET[7:] + " and more"), _done()])
    assert inner.texts() == ["my key is [REDACTED]", " and more"]
    assert [offset for offset, _ in inner.items] == [0, 1, 2]
    _assert_no_piece_of_secret(inner.texts())


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_a_secret_streamed_in_small_pieces_never_passes(size: int) -> None:
    text = f"Here: {SECRET}. And again {SECRET.upper()} done."
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    _feed(sink, [*map(_delta, pieces), _done()])
    assert "".join(inner.texts()) == "Here: [REDACTED]. And again [REDACTED] done."
    assert [offset for offset, _ in inner.items] == list(range(len(pieces) + 1))  # every offset, in order
    _assert_no_piece_of_secret(inner.texts())


def test_safe_deltas_are_released_before_the_stream_ends() -> None:
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    _feed(sink, [_delta("plain words " * 2) for _ in range(20)])
    assert len(inner.items) >= 15  # only the last ~window characters are held back
    assert "held=" in repr(sink)


@pytest.mark.parametrize(
    ("pieces", "leak"),
    [
        (["curl -H 'Authorization: Bear", "er eyJhbGciOiJIUzI1", "NiJ9.payload.sig' x"], "eyJhbGciOiJIUzI1"),
        (["use sk-proj-", "abcdefghij", "klmnop1234567890 now"], "abcdefghijklmnop"),
        (["export OPENAI_API_", "KEY=notskprefix", "12345 in env"], "notskprefix"),
    ],
)
def test_key_shaped_text_split_across_deltas_is_caught_by_the_patterns(pieces: list[str], leak: str) -> None:
    inner = Collect()
    sink = RedactingSink(inner)  # no configured secret: only the default patterns
    _feed(sink, [*map(_delta, pieces), _done()])
    joined = "".join(inner.texts())
    assert "[REDACTED]" in joined
    for size in range(6, len(leak) + 1):
        assert all(leak[i : i + size] not in text for text in inner.texts() for i in range(len(leak) - size + 1))


def test_tool_arguments_and_reasoning_are_separate_channels_each_redacted() -> None:
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    events: list[AgentEvent] = [
        ModelDelta(call_id="c1", delta=ToolCallDelta(index=0, id="call_1", name="login", arguments='{"k": "'), **L),
        ModelDelta(call_id="c1", delta=ThinkingDelta(text="I will pass " + SECRET[:10]), **L),
        ModelDelta(call_id="c1", delta=ToolCallDelta(index=0, arguments=SECRET[:12]), **L),
        ModelDelta(call_id="c1", delta=ThinkingDelta(text=SECRET[10:] + " now"), **L),
        ModelDelta(call_id="c1", delta=ToolCallDelta(index=0, arguments=SECRET[12:] + '"}'), **L),
        _done(),
    ]
    _feed(sink, events)
    assert inner.texts() == ['{"k": "', "I will pass [REDACTED]", "[REDACTED]", " now", '"}']
    first = inner.items[0][1]
    assert isinstance(first, ModelDelta)
    assert isinstance(first.delta, ToolCallDelta)
    assert (first.delta.id, first.delta.name) == ("call_1", "login")


def test_an_interrupting_event_releases_held_deltas_without_leaking_a_secret_prefix() -> None:
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    # Another run's event arrives mid-stream; the held tail is released in order, before it.
    _feed(
        sink,
        [
            _delta("the key: " + SECRET[:9]),
            CacheHit(call_id="other", key="k", **L),
            _delta(SECRET[9:] + " end"),
            _done(),
        ],
    )
    assert [offset for offset, _ in inner.items] == [0, 1, 2, 3]
    assert inner.texts() == ["the key: [REDACTED]", " end"]
    _assert_no_piece_of_secret(inner.texts())


def test_secrets_match_in_any_case_and_flush_passes_everything_on() -> None:
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    _feed(sink, [_delta("x " + SECRET.swapcase()[:20]), _delta(SECRET.swapcase()[20:])])
    assert sink.scrub_text(SECRET.upper()) == "[REDACTED]"
    sink.flush()
    assert inner.texts() == ["x [REDACTED]", ""]
    assert inner.flushed == 1


def test_unchanged_deltas_pass_as_the_same_objects_and_hold_can_be_disabled() -> None:
    events: list[AgentEvent] = [_delta(f"word{n} ") for n in range(30)]
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    _feed(sink, [*events, _done()])
    assert all(a is b for (_, a), b in zip(inner.items, events, strict=False))
    immediate = Collect()
    RedactingSink(immediate, secrets=[SECRET], hold_deltas=False)(0, events[0])
    assert len(immediate.items) == 1


_WORDS = st.sampled_from(["the ", "key ", SECRET, SECRET.upper(), "tk_", "Echo", "\n", "x", "9f8e ", "Secret"])


@settings(max_examples=200, deadline=None)
@given(words=st.lists(_WORDS, max_size=12), cuts=st.lists(st.integers(1, 9), min_size=1, max_size=60))
def test_any_split_of_any_text_redacts_exactly_like_the_whole_text(words: list[str], cuts: list[int]) -> None:
    text = "".join(words) + " end."  # a stream that ends on a secret's prefix has that prefix redacted too
    pieces, pos, n = [], 0, 0
    while pos < len(text):
        size = cuts[n % len(cuts)]
        pieces.append(text[pos : pos + size])
        pos, n = pos + size, n + 1
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET], patterns=())
    _feed(sink, [*map(_delta, pieces), _done()])
    assert "".join(inner.texts()) == sink.scrub_text(text)
    assert [offset for offset, _ in inner.items] == list(range(len(pieces) + 1))


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(1, len(SECRET) - 1), interrupt=st.booleans(), prefix=st.text(max_size=20))
def test_no_run_of_six_secret_characters_passes_even_when_a_stream_is_interrupted(
    cut: int, interrupt: bool, prefix: str
) -> None:
    inner = Collect()
    sink = RedactingSink(inner, secrets=[SECRET])
    events: list[AgentEvent] = [_delta(prefix + SECRET[:cut])]
    if interrupt:
        events.append(CacheHit(call_id="other", key="k", **L))
    events += [_delta(SECRET[cut:] + " tail"), _done()]
    _feed(sink, events)
    _assert_no_piece_of_secret(inner.texts())


def test_merge_spans() -> None:
    assert merge_spans([(5, 9), (0, 2), (2, 3), (8, 12), (4, 4)]) == [(0, 2), (2, 3), (5, 12)]


# ------------------------------------------------------------------------------------------ end to end
async def test_a_streamed_key_never_reaches_the_sqlite_journal(replay_server: ReplayServer, tmp_path: Path) -> None:
    answer = f"Your key is {SECRET}, keep it safe."
    pieces = [answer[i : i + 4] for i in range(0, len(answer), 4)]  # tokens of ~4 characters, like a real stream
    replay_server.enqueue(200, sse_text_chunks(pieces, usage=usage_body(9, len(pieces))))
    model = OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key="sk-e2e-0123456789abcdef")
    journal = SQLiteEventJournal(tmp_path / "run.db")
    ctx = RunContext()
    ctx.events.add_listener(RedactingSink(JournalSink(journal), secrets=[SECRET]))
    harness: AgentHarness[None] = AgentHarness(model=model)
    try:
        run, _ = await harness.invoke_with_status(ctx, "what is my key?", streaming=True)
    finally:
        await model.aclose()
    assert run.status == "completed"
    journal.close()
    rows = (
        sqlite3.connect(tmp_path / "run.db")
        .execute("SELECT kind, event FROM tinyagents_events ORDER BY seq")
        .fetchall()
    )
    deltas = [json.loads(event)["delta"]["text"] for kind, event in rows if kind == "model.delta"]
    assert "".join(deltas) == "Your key is [REDACTED], keep it safe."
    assert len(deltas) == len(pieces)
    _assert_no_piece_of_secret([repr(rows)])
    # The unredacted run itself still has the text (redaction is the sink's job, not the run's).
    assert (
        any(SECRET in json.dumps(event_to_dict(event)) for _, event in ctx.events.recent()) or SECRET in run.final_text
    )
