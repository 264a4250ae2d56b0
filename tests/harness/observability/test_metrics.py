"""Latency metrics and event tables from a hand-built record with known durations."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.obs_samples import sample_events
from tinyagents_nb.harness import (
    AgentEvent,
    ModelCompleted,
    ModelDelta,
    ModelStarted,
    RunCompleted,
    RunStarted,
    TextDelta,
    ToolCompleted,
    ToolFailed,
    ToolStarted,
)
from tinyagents_nb.harness.observability import AgentLatencyMetrics, AgentObservation, event_detail, events_to_dataframe


def root(ts: float) -> Any:
    return {"run_id": "root", "root_run_id": "root", "ts": ts}


def kid(ts: float) -> Any:
    return {"run_id": "kid", "parent_run_id": "root", "root_run_id": "root", "depth": 1, "ts": ts}


def record() -> list[AgentEvent]:
    return [
        RunStarted(**root(100.0)),
        ModelStarted(call_id="c1", model="m", **root(100.1)),
        ModelCompleted(call_id="c1", model="m", duration_s=0.5, **root(100.6)),  # measured: 0.5
        ToolStarted(call_id="t1", tool_name="search", **root(100.7)),
        ToolCompleted(call_id="t1", tool_name="search", **root(101.0)),  # no duration: ts diff 0.3
        ToolStarted(call_id="t2", tool_name="fetch", **root(101.0)),
        ToolFailed(call_id="t2", tool_name="fetch", error_type="E", error="x", duration_s=0.2, **root(101.3)),
        RunStarted(**kid(101.4)),
        ModelStarted(call_id="c1", model="small", **kid(101.5)),  # same call id, other run
        ModelCompleted(call_id="c1", model="small", duration_s=1.0, cached=True, **kid(102.5)),
        ModelStarted(call_id="c9", model="small", **kid(102.6)),  # never completes: ignored
        RunCompleted(duration_s=1.5, **kid(102.9)),
        ModelStarted(call_id="c2", model="primary", **root(103.0)),
        ModelStarted(call_id="c2", model="backup", **root(103.5)),  # fallback: pairs with the last start
        ModelCompleted(call_id="c2", model="backup", duration_s=0.25, **root(103.75)),
        ModelCompleted(call_id="orphan", model="m", duration_s=9.0, **root(103.8)),  # no start: ignored
        RunCompleted(**root(104.0)),  # no duration: ts diff 4.0
        RunStarted(run_id="other", root_run_id="other", ts=200.0),  # another tree in the same record
        ModelStarted(run_id="other", root_run_id="other", call_id="x", model="m", ts=200.0),
        ModelCompleted(run_id="other", root_run_id="other", call_id="x", model="m", duration_s=50.0, ts=250.0),
    ]


def test_totals_maxima_and_elapsed() -> None:
    m = AgentLatencyMetrics.from_record(record())
    assert m.run_id == "root"
    assert m.run_elapsed_s == pytest.approx(4.0)
    assert [(c.run_id, c.call_id, c.name) for c in m.model_calls] == [
        ("root", "c1", "m"),
        ("kid", "c1", "small"),
        ("root", "c2", "backup"),
    ]
    assert [c.duration_s for c in m.model_calls] == pytest.approx([0.5, 1.0, 0.25])
    assert m.model_calls[1].cached
    assert m.model_calls[1].depth == 1
    assert m.total_model_s == pytest.approx(1.75)
    assert m.max_model_s == pytest.approx(1.0)
    assert [(c.name, c.ok) for c in m.tool_calls] == [("search", True), ("fetch", False)]
    assert [c.duration_s for c in m.tool_calls] == pytest.approx([0.3, 0.2])
    assert m.total_tool_s == pytest.approx(0.5)
    assert m.max_tool_s == pytest.approx(0.3)
    assert m.to_dict()["model_calls"] == 3
    assert m.to_dict()["max_tool_s"] == pytest.approx(0.3)


def test_per_run_breakdown_for_sub_agents() -> None:
    m = AgentLatencyMetrics.from_record(record())
    assert [r.run_id for r in m.runs] == ["root", "kid"]
    by_id = {r.run_id: r for r in m.runs}
    assert (by_id["root"].model_calls, by_id["root"].tool_calls, by_id["root"].status) == (2, 2, "completed")
    assert by_id["root"].total_model_s == pytest.approx(0.75)
    assert by_id["root"].total_tool_s == pytest.approx(0.5)
    assert (by_id["kid"].parent_run_id, by_id["kid"].depth, by_id["kid"].elapsed_s) == ("root", 1, 1.5)
    assert by_id["kid"].model_calls == 1


def test_choosing_a_run_limits_to_its_subtree() -> None:
    kid_only = AgentLatencyMetrics.from_record(record(), run_id="kid")
    assert kid_only.run_elapsed_s == 1.5
    assert [c.run_id for c in kid_only.model_calls] == ["kid"]
    assert kid_only.tool_calls == ()
    assert [r.run_id for r in kid_only.runs] == ["kid"]
    other = AgentLatencyMetrics.from_record(record(), run_id="other")
    assert other.total_model_s == 50.0
    assert other.run_elapsed_s is None


def test_accepts_observations_and_pairs_and_handles_empty_records() -> None:
    events = record()
    from_obs = AgentLatencyMetrics.from_record([AgentObservation.from_event(i, e) for i, e in enumerate(events)])
    from_pairs = AgentLatencyMetrics.from_record(list(enumerate(events)))
    assert from_obs == from_pairs == AgentLatencyMetrics.from_record(events)
    empty = AgentLatencyMetrics.from_record([])
    assert (empty.run_id, empty.run_elapsed_s, empty.total_model_s, empty.max_tool_s) == (None, None, 0.0, 0.0)


def test_latency_dataframes() -> None:
    pytest.importorskip("pandas")
    m = AgentLatencyMetrics.from_record(record())
    calls = m.to_dataframe()
    assert list(calls["call_id"]) == ["c1", "t1", "t2", "c1", "c2"]  # by start time
    assert {"kind", "run_id", "duration_s", "ok"} <= set(calls.columns)
    runs = m.to_dataframe(per="run")
    assert list(runs["run_id"]) == ["root", "kid"]
    with pytest.raises(ValueError, match="per must be"):
        m.to_dataframe(per="tool")  # type: ignore[arg-type]
    assert len(AgentLatencyMetrics.from_record([]).to_dataframe()) == 0


def test_events_to_dataframe_has_one_row_per_event() -> None:
    pytest.importorskip("pandas")
    events = sample_events()
    frame = events_to_dataframe(list(enumerate(events)))
    assert len(frame) == len(events)
    assert list(frame.columns) == [
        "offset",
        "event_id",
        "kind",
        "run_id",
        "parent_run_id",
        "root_run_id",
        "depth",
        "ts",
        "detail",
    ]
    assert list(frame["kind"]) == [e.kind for e in events]
    assert frame["event_id"][3] == "root-1-evt-3"
    assert frame["depth"][0] == 1
    assert all(isinstance(d, str) and "\n" not in d and len(d) <= 120 for d in frame["detail"])


def test_event_detail_is_compact() -> None:
    delta = ModelDelta(run_id="r", root_run_id="r", call_id="c", delta=TextDelta(text="hi\nthere"))
    assert event_detail(delta) == 'text: "hi\\nthere"'
    tool = ToolStarted(run_id="r", root_run_id="r", call_id="t", tool_name="add", arguments={"a": 1})
    assert event_detail(tool) == 'call_id=t tool_name=add arguments={"a":1}'
    long = ToolStarted(run_id="r", root_run_id="r", call_id="t", tool_name="x", arguments={"s": "y" * 500})
    assert len(event_detail(long, width=40)) == 40
    assert event_detail(long, width=40).endswith("…")
