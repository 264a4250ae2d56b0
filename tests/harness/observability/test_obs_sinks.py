"""Observability sinks: fan-out, redaction (fail closed), journal and JSONL write-through, and a real run."""

from __future__ import annotations

import dataclasses
import json
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.harness.obs_samples import sample_events
from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    ConfigurationError,
    EventSink,
    ModelDelta,
    RunContext,
    RunFailed,
    StoreError,
    SubAgent,
    TextDelta,
    ToolCallDelta,
    ToolFailed,
    ToolStarted,
    Usage,
    event_to_dict,
    tool,
)
from tinyagents_nb.harness.events import CacheHit
from tinyagents_nb.harness.observability import (
    DEFAULT_PATTERNS,
    AgentObservation,
    FanOutSink,
    InMemoryEventJournal,
    JournalSink,
    JsonlSink,
    RedactingSink,
    RunStatusStore,
    SQLiteEventJournal,
    secrets_from_env,
)
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

L: Any = {"run_id": "r", "root_run_id": "r"}
SECRET = "hunter2-correct-horse"


class Collect:
    def __init__(self) -> None:
        self.items: list[tuple[int, AgentEvent]] = []

    def __call__(self, offset: int, event: AgentEvent) -> None:
        self.items.append((offset, event))

    @property
    def events(self) -> list[AgentEvent]:
        return [e for _, e in self.items]


def all_strings(value: object) -> list[str]:
    """Every string inside an event, found through its JSON form and its repr (what a sink could leak)."""
    return [json.dumps(event_to_dict(value)) if isinstance(value, AgentEvent) else "", repr(value)]


# ------------------------------------------------------------------------------------------ fan-out
def test_fan_out_forwards_in_order_and_survives_a_failing_listener(caplog: pytest.LogCaptureFixture) -> None:
    order: list[str] = []

    def bad(offset: int, event: AgentEvent) -> None:
        order.append("bad")
        raise RuntimeError("listener bug")

    first, last = Collect(), Collect()
    fan = FanOutSink(first, bad)
    fan.add(last)
    sink = EventSink()
    sink.add_listener(fan)
    with caplog.at_level(logging.ERROR, logger="tinyagents_nb"):
        sink.emit(CacheHit(call_id="c", key="k", **L))
        sink.emit(CacheHit(call_id="c", key="k2", **L))
    assert [o for o, _ in first.items] == [0, 1]
    assert [o for o, _ in last.items] == [0, 1]
    assert fan.errors == 2
    assert sink.listener_errors == 0
    assert "fan-out listener" in caplog.text
    with pytest.raises(ConfigurationError):
        FanOutSink("not callable")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ redaction
def test_redacts_configured_secrets_everywhere_and_leaks_no_copy() -> None:
    inner = Collect()
    red = RedactingSink(inner, secrets=[SECRET])
    events: list[AgentEvent] = [
        ToolStarted(call_id="c", tool_name="login", arguments={"user": "me", "notes": [f"pw {SECRET}"]}, **L),
        ModelDelta(call_id="c", delta=TextDelta(text=f"the key is {SECRET}!"), **L),
        ModelDelta(call_id="c", delta=ToolCallDelta(index=0, arguments=f'{{"x": "{SECRET}"}}'), **L),
        ToolFailed(call_id="c", tool_name="x", error_type="E", error=f"auth failed for {SECRET}", **L),
        RunFailed(error_type="ProviderError", error=f"401: {SECRET}", **L),
    ]
    for i, event in enumerate(events):
        red(i, event)
    assert len(inner.events) == len(events)
    assert red.dropped == 0
    for event in inner.events:
        for text in all_strings(event):
            assert SECRET not in text
    started = inner.events[0]
    assert isinstance(started, ToolStarted)
    assert started.arguments == {"user": "me", "notes": ["pw [REDACTED]"]}
    delta = inner.events[1]
    assert isinstance(delta, ModelDelta)
    assert delta.delta == TextDelta(text="the key is [REDACTED]!")
    assert type(inner.events[2]) is ModelDelta
    assert isinstance(inner.events[2].delta, ToolCallDelta)
    assert events[0].arguments["notes"] == [f"pw {SECRET}"]  # type: ignore[attr-defined]  # original untouched


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("key sk-proj-abcdefghijklmnop1234567890 used", "abcdefghijklmnop1234567890"),
        ("anthropic sk-ant-api03-AAAAbbbbCCCCdddd-eeee here", "AAAAbbbbCCCCdddd"),
        ("curl -H 'Authorization: Bearer eyJhbGciOi.payload.sig' url", "eyJhbGciOi"),
        ("header authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
        ("sent Bearer abcdef123456789 to server", "abcdef123456789"),
        ("https://api.x.com/v1?api_key=live_0123456789&q=1", "live_0123456789"),
        ('{"api_key": "plainvalue99"}', "plainvalue99"),
        ("OPENAI_API_KEY=notskprefix12345 in env", "notskprefix12345"),
        ("aws AKIAIOSFODNN7EXAMPLE key", "AKIAIOSFODNN7EXAMPLE"),
        ("gh token ghp_0123456789abcdefghijKLMN", "0123456789abcdefghij"),
        ("password: correcthorse", "correcthorse"),
    ],
)
def test_default_patterns_catch_key_shaped_text(text: str, leak: str) -> None:
    red = RedactingSink(Collect())
    out = red.scrub_text(text)
    assert leak not in out
    assert "[REDACTED]" in out


def test_default_patterns_apply_inside_nested_event_fields() -> None:
    key = "sk-proj-Zx9Zx9Zx9Zx9Zx9Zx9Zx9Zx9"
    inner = Collect()
    red = RedactingSink(inner)  # no configured secrets: patterns only
    red(0, ToolStarted(call_id="c", tool_name="http", arguments={"headers": [f"Authorization: Bearer {key}"]}, **L))
    red(1, ModelDelta(call_id="c", delta=TextDelta(text=f"use {key} please"), **L))
    red(2, RunFailed(error_type="ProviderError", error=f"401 Incorrect API key provided: {key}", **L))
    red(3, ToolFailed(call_id="c", tool_name="x", error_type="E", error="AKIAIOSFODNN7EXAMPLE rejected", **L))
    assert len(inner.events) == 4
    for event in inner.events:
        for text in all_strings(event):
            assert "Zx9Zx9" not in text
            assert "AKIAIOSFODNN7EXAMPLE" not in text
    assert inner.events[0].arguments == {"headers": ["Authorization: [REDACTED]"]}  # type: ignore[attr-defined]


def test_patterns_keep_the_label_and_leave_ordinary_text_alone() -> None:
    red = RedactingSink(Collect())
    assert red.scrub_text("Authorization: Bearer abcdefghij123") == "Authorization: [REDACTED]"
    assert red.scrub_text("use Bearer abcdefghij123 now") == "use Bearer [REDACTED] now"
    plain = "The task-runner uses max_tokens=100 and sk-short; tokens are fine."
    assert red.scrub_text(plain) is plain


def test_sensitive_mapping_keys_are_replaced_whole() -> None:
    inner = Collect()
    red = RedactingSink(inner)
    args = {"query": "weather", "api_key": "x1", "headers": {"X-Api-Key": 12345, "Accept": "json"}, "token": None}
    red(0, ToolStarted(call_id="c", tool_name="http", arguments=args, **L))
    (event,) = inner.events
    assert isinstance(event, ToolStarted)
    assert event.arguments == {
        "query": "weather",
        "api_key": "[REDACTED]",
        "headers": {"X-Api-Key": "[REDACTED]", "Accept": "json"},
        "token": None,
    }


def test_unchanged_events_pass_through_as_the_same_object() -> None:
    inner = Collect()
    red = RedactingSink(inner, secrets=[SECRET])
    events = sample_events()
    for i, event in enumerate(events):
        red(i, event)
    assert all(a is b for a, b in zip(inner.events, events, strict=True))


def test_unwalkable_objects_are_replaced_by_their_scrubbed_repr() -> None:
    class Client:
        def __repr__(self) -> str:
            return f"Client(key={SECRET})"

    inner = Collect()
    RedactingSink(inner, secrets=[SECRET])(0, ToolStarted(call_id="c", tool_name="x", arguments=[Client()], **L))
    (event,) = inner.events
    assert isinstance(event, ToolStarted)
    assert event.arguments == ["Client(key=[REDACTED])"]


def test_redaction_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    inner = Collect()
    red = RedactingSink(inner, secrets=[SECRET])

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Odd(AgentEvent):
        kind: str = "odd.event"
        secret_note: str = ""
        computed: str = dataclasses.field(init=False, default=f"derived {SECRET}")

    nested: dict[str, Any] = {}
    cursor = nested
    for _ in range(100):
        cursor["x"] = {}
        cursor = cursor["x"]
    with caplog.at_level(logging.WARNING, logger="tinyagents_nb"):
        red(0, Odd(**L))  # a field that needs scrubbing but cannot be rebuilt
        red(1, ToolStarted(call_id="c", tool_name="x", arguments=nested, **L))  # too deep to walk
        red(2, CacheHit(call_id="c", key="fine", **L))
    assert red.dropped == 2
    assert [o for o, _ in inner.items] == [2]
    assert SECRET not in caplog.text
    assert "dropped" in caplog.text


def test_redaction_validates_secrets() -> None:
    with pytest.raises(ConfigurationError, match="at least 4"):
        RedactingSink(Collect(), secrets=["abc"])
    with pytest.raises(ConfigurationError):
        RedactingSink(Collect(), secrets=[None])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        RedactingSink("inner")  # type: ignore[arg-type]
    one = RedactingSink(Collect(), secrets=SECRET)  # a lone str is one secret, not its characters
    assert one.scrub_text(f"x{SECRET}y") == "x[REDACTED]y"
    assert SECRET not in repr(one)


def test_custom_patterns_and_replacement() -> None:
    import re

    red = RedactingSink(Collect(), patterns=[re.compile(r"\d{4}-\d{4}")], sensitive_keys=None, replacement="***")
    assert red.scrub_text("card 1234-5678 sk-proj-abcdefghijklmnop123") == "card *** sk-proj-abcdefghijklmnop123"
    assert len(DEFAULT_PATTERNS) >= 5


def test_secrets_from_env_picks_credential_like_names() -> None:
    env = {"OPENAI_API_KEY": "sk-abcdefgh12345", "GH_TOKEN": "ghp_longvalue", "HOME": "/home/me", "MY_SECRET": "short"}
    assert secrets_from_env(env) == ("ghp_longvalue", "sk-abcdefgh12345")


# ------------------------------------------------------------------------------------------ journal / JSONL
def test_journal_sink_wraps_events_with_sink_offsets() -> None:
    journal = InMemoryEventJournal()
    sink = EventSink()
    sink.emit(CacheHit(call_id="c", key="before", **L))  # offset 0, before attaching
    js = JournalSink(journal)
    sink.add_listener(js)
    sink.emit(CacheHit(call_id="c", key="k1", **L))
    sink.emit(CacheHit(call_id="c", key="k2", **L))
    assert [(o.offset, o.event_id) for o in journal.read_from(0)] == [(1, "r-evt-1"), (2, "r-evt-2")]
    assert js.written == 2
    assert js.failed == 0
    js.flush()


def test_journal_sink_never_raises_and_rate_limits_its_log(caplog: pytest.LogCaptureFixture) -> None:
    journal = InMemoryEventJournal()
    js = JournalSink(journal)
    journal.close()
    sink = EventSink()
    sink.add_listener(js)
    with caplog.at_level(logging.WARNING, logger="tinyagents_nb"):
        for i in range(50):
            sink.emit(CacheHit(call_id="c", key=str(i), **L))
    assert js.failed == 50
    assert sink.listener_errors == 0
    assert js.last_error is not None
    assert "closed" in js.last_error
    assert caplog.text.count("JournalSink") == 1  # one log line, not fifty
    with pytest.raises(ConfigurationError):
        JournalSink(object())  # type: ignore[arg-type]
    with pytest.raises(StoreError):
        js.flush()


def test_journal_sink_on_a_flapping_backend_logs_a_bounded_number_of_lines(caplog: pytest.LogCaptureFixture) -> None:
    class Flaky(InMemoryEventJournal):
        def append(self, observation: AgentObservation) -> None:
            if observation.offset % 2:
                raise StoreError("disk full")
            super().append(observation)

    journal = Flaky()
    js = JournalSink(journal)
    with caplog.at_level(logging.WARNING, logger="tinyagents_nb"):
        for i in range(20):
            js(i, CacheHit(call_id="c", key=str(i), **L))
    assert (js.written, js.failed) == (10, 10)
    assert [o.offset for o in journal.read_from(0)] == list(range(0, 20, 2))
    assert len(caplog.records) == 2  # the first failure and one recovery
    assert "disk full" in caplog.records[0].getMessage()
    assert "recovered" in caplog.records[1].getMessage()


def test_jsonl_sink_appends_raw_event_lines_that_read_back(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "events.jsonl"
    sink = JsonlSink(path)
    for i, event in enumerate(sample_events()):
        sink(i * 2, event)
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first["offset"] == 0
    assert first["kind"] == "run.started"
    assert "event" not in first
    with path.open("a", encoding="utf-8") as f:
        f.write('{"offset": 99, "kind": "run.sta')  # torn
    back = JsonlSink.read(path)
    assert [o for o, _ in back] == [i * 2 for i in range(len(sample_events()))]
    assert [e for _, e in back] == sample_events()
    sink.close()
    sink(100, CacheHit(call_id="c", key="k", **L))
    assert sink.failed == 1
    assert sink.written == len(sample_events())


def test_composed_redaction_reaches_every_persisting_sink_redacted(tmp_path: Path) -> None:
    journal = SQLiteEventJournal(tmp_path / "j.db")
    jsonl = tmp_path / "e.jsonl"
    sink = EventSink()
    sink.add_listener(RedactingSink(FanOutSink(JournalSink(journal), JsonlSink(jsonl)), secrets=[SECRET]))
    sink.emit(ToolStarted(call_id="c", tool_name="x", arguments={"q": SECRET}, **L))
    sink.emit(RunFailed(error_type="E", error=f"bad {SECRET}", **L))
    assert SECRET not in jsonl.read_text(encoding="utf-8")
    stored = journal.read_from(0)
    assert len(stored) == 2
    assert all(SECRET not in json.dumps(o.to_dict()) for o in stored)
    db_bytes = (tmp_path / "j.db").read_bytes() + (tmp_path / "j.db-wal").read_bytes()
    assert SECRET.encode() not in db_bytes
    journal.close()


# ------------------------------------------------------------------------------------------ a real run
@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.anyio
async def test_journal_reconstructs_a_real_run_with_a_sub_agent(tmp_path: Path) -> None:
    usage = Usage(input_tokens=10, output_tokens=5)
    journal = SQLiteEventJournal(tmp_path / "run.db")
    ctx: RunContext[Any] = RunContext()
    recorder = EventRecorder(ctx.events)
    status = RunStatusStore()
    ctx.events.add_listener(JournalSink(journal))
    ctx.events.add_listener(status)
    child = SubAgent("helper", AgentHarness(model=ScriptedModel([ScriptedModel.text("child says hi", usage=usage)])))
    parent: AgentHarness[Any] = AgentHarness(
        model=ScriptedModel(
            [ScriptedModel.tool_call("add", {"a": 2, "b": 3}, usage=usage), ScriptedModel.text("5", usage=usage)]
        ),
        tools=[add],
    )
    await child.invoke_in_parent(ctx, "warm up")
    run = await parent.invoke_in_context(ctx, "2+3?")
    assert run.final_text == "5"

    stored = journal.read_from(0)
    assert [o.event for o in stored] == recorder.events  # same events, same order, same values
    assert [o.offset for o in stored] == list(range(len(recorder.events)))
    kinds = [o.kind for o in stored]
    assert kinds[0] == "subagent.started"
    assert "tool.completed" in kinds
    assert kinds[-1] == "run.completed"
    depths = {o.run_id: o.depth for o in stored}
    assert sorted(depths.values()) == [0, 1]
    child_id = next(r for r, d in depths.items() if d == 1)
    assert {o.parent_run_id for o in stored if o.run_id == child_id} == {ctx.run_id}
    assert next(o.kind for o in journal.read_from(0, run_id=child_id)) == "run.started"

    child_status, root_status = status.get(child_id), status.get(ctx.run_id)
    assert child_status is not None
    assert child_status.status == "completed"
    assert child_status.depth == 1
    assert root_status is not None
    assert (root_status.model_calls, root_status.tool_calls) == (2, 1)
    rebuilt = RunStatusStore().replay(stored)
    assert rebuilt.get(ctx.run_id) == root_status
    journal.close()


def test_decimal_cost_survives_the_full_pipeline(tmp_path: Path) -> None:
    journal = SQLiteEventJournal(tmp_path / "c.db")
    sink = EventSink()
    sink.add_listener(RedactingSink(JournalSink(journal)))
    from tinyagents_nb.harness.events import CostRecorded

    sink.emit(CostRecorded(call_id="c", model="m", usd=Decimal("0.0000015"), **L))
    (stored,) = journal.read_from(0)
    assert getattr(stored.event, "usd", None) == Decimal("0.0000015")
    journal.close()


def test_journal_sink_can_skip_token_deltas() -> None:
    from tinyagents_nb.harness import ModelDelta, RunStarted, TextDelta
    from tinyagents_nb.harness.observability import InMemoryEventJournal, JournalSink as Sink

    journal = InMemoryEventJournal()
    sink = Sink(journal, exclude_kinds={"model.delta"})
    sink(0, RunStarted(run_id="r", root_run_id="r"))
    sink(1, ModelDelta(run_id="r", root_run_id="r", call_id="c", delta=TextDelta(text="x")))
    assert [o.kind for o in journal.read_from(0)] == ["run.started"]
    assert sink.written == 1
