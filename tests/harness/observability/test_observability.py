"""AgentObservation, the event codec and the run status store."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

import pytest

from tests.harness.obs_samples import USAGE, event_classes, sample_events
from tinyagents_nb.harness import (
    AgentEvent,
    ConfigurationError,
    ModelCompleted,
    ModelDelta,
    ModelStarted,
    RunCancelledEvent,
    RunCompleted,
    RunFailed,
    RunId,
    RunStarted,
    ThinkingDelta,
    ToolCallDelta,
    ToolCompleted,
    ToolStarted,
    event_to_dict,
)
from tinyagents_nb.harness.events import CostRecorded
from tinyagents_nb.harness.observability import (
    AgentObservation,
    RunStatusStore,
    UnrecognizedEvent,
    as_observations,
    event_from_dict,
)


def via_json(data: object) -> object:
    return json.loads(json.dumps(data))


# ------------------------------------------------------------------------------------------ codec
def test_samples_cover_every_event_class() -> None:
    assert {type(e) for e in sample_events()} == event_classes()


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: f"{type(e).__name__}-{e.ts}")
def test_every_event_round_trips_through_json(event: AgentEvent) -> None:
    back = event_from_dict(via_json(event_to_dict(event)))  # type: ignore[arg-type]
    assert type(back) is type(event)
    assert back == event


def test_nested_values_are_restored_as_their_types() -> None:
    events = {(type(e).__name__, e.ts): e for e in sample_events()}
    cost = event_from_dict(via_json(event_to_dict(events[("CostRecorded", 1017.25)])))  # type: ignore[arg-type]
    assert isinstance(cost, CostRecorded)
    assert cost.usd == Decimal("0.000123450")
    assert isinstance(cost.usd, Decimal)
    done = event_from_dict(via_json(event_to_dict(events[("ModelCompleted", 1008.25)])))  # type: ignore[arg-type]
    assert isinstance(done, ModelCompleted)
    assert done.usage == USAGE
    thinking = event_from_dict(via_json(event_to_dict(events[("ModelDelta", 1006.25)])))  # type: ignore[arg-type]
    assert isinstance(thinking, ModelDelta)
    assert isinstance(thinking.delta, ThinkingDelta)
    call = event_from_dict(via_json(event_to_dict(events[("ModelDelta", 1007.25)])))  # type: ignore[arg-type]
    assert isinstance(call, ModelDelta)
    assert call.delta == ToolCallDelta(index=1, id="tc", name="add", arguments='{"a":')


def test_unknown_kind_decodes_as_unrecognized_and_re_encodes_in_its_original_shape() -> None:
    data = {"kind": "plugin.thing", "run_id": "r", "root_run_id": "r", "depth": 0, "ts": 5.0, "size": 3}
    event = event_from_dict(data)
    assert isinstance(event, UnrecognizedEvent)
    assert (event.kind, event.run_id, event.data, event.ts) == ("plugin.thing", "r", {"size": 3}, 5.0)
    obs = AgentObservation.from_event(0, event)
    assert obs.to_dict()["event"] == {**data, "parent_run_id": None}
    again = AgentObservation.from_dict(via_json(obs.to_dict()))  # type: ignore[arg-type]
    assert again == obs


def test_event_classes_defined_later_are_found() -> None:
    @dataclass(frozen=True, kw_only=True, slots=True)
    class PluginEvent(AgentEvent):
        kind: Literal["plugin.late"] = "plugin.late"
        payload: int = 0

    event = PluginEvent(run_id="r", root_run_id="r", payload=7)
    assert event_from_dict(event_to_dict(event)) == event


def test_drifted_payload_is_an_error_unless_lenient() -> None:
    data = {"kind": "model.started", "run_id": "r", "root_run_id": "r", "model": "m"}  # call_id missing
    with pytest.raises(ConfigurationError, match="ModelStarted"):
        event_from_dict(data)
    event = event_from_dict(data, lenient=True)
    assert isinstance(event, UnrecognizedEvent)
    assert event.kind == "model.started"
    assert "ModelStarted" in event.reason
    assert event.data == {"model": "m"}


@pytest.mark.parametrize("bad", [{}, {"kind": 3}, [("kind", "run.started")], "run.started"])
def test_event_from_dict_rejects_non_event_input(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        event_from_dict(bad)  # type: ignore[arg-type]


def test_unrecognized_without_lineage_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="run_id"):
        event_from_dict({"kind": "x.y"})


def test_extra_fields_from_a_newer_writer_are_ignored() -> None:
    data = {
        "kind": "cache.hit",
        "run_id": "r",
        "root_run_id": "r",
        "ts": 1.0,
        "call_id": "c",
        "key": "k",
        "new_field": 1,
    }
    assert event_from_dict(data) == event_from_dict({k: v for k, v in data.items() if k != "new_field"})


# ------------------------------------------------------------------------------------------ observation
def test_observation_from_event_copies_lineage_and_ids() -> None:
    event = RunStarted(run_id=RunId("run-a"), parent_run_id=RunId("run-p"), root_run_id=RunId("run-r"), depth=2, ts=9.5)
    obs = AgentObservation.from_event(41, event)
    assert obs.event_id == "run-r-evt-41"
    assert (obs.offset, obs.run_id, obs.parent_run_id, obs.root_run_id, obs.depth, obs.kind, obs.ts) == (
        41,
        "run-a",
        "run-p",
        "run-r",
        2,
        "run.started",
        9.5,
    )
    assert type(obs.run_id) is str  # plain str, not RunId, so journals and DataFrames compare cleanly
    with pytest.raises(AttributeError):
        obs.offset = 1  # type: ignore[misc]


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: f"{type(e).__name__}-{e.ts}")
def test_observation_round_trips_through_json(event: AgentEvent) -> None:
    obs = AgentObservation.from_event(7, event)
    assert AgentObservation.from_dict(via_json(obs.to_dict())) == obs  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad", [{}, {"offset": 1}, {"offset": "1", "event": {"kind": "x", "run_id": "r"}}, {"offset": True, "event": {}}]
)
def test_observation_from_bad_dict_is_a_configuration_error(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        AgentObservation.from_dict(bad)


def test_as_observations_accepts_the_three_record_shapes() -> None:
    a = ModelStarted(run_id="r", root_run_id="r", call_id="c", model="m")
    b = ModelCompleted(run_id="r", root_run_id="r", call_id="c", model="m")
    obs = AgentObservation.from_event(10, a)
    assert [o.offset for o in as_observations([a, b])] == [0, 1]
    assert [o.offset for o in as_observations([(5, a), (6, b)])] == [5, 6]
    assert as_observations([obs]) == [obs]
    with pytest.raises(ConfigurationError):
        as_observations(["run.started"])  # type: ignore[list-item]


# ------------------------------------------------------------------------------------------ status store
def lin(run: str, parent: str | None = None, depth: int = 0, ts: float = 0.0) -> dict[str, object]:
    return {"run_id": run, "parent_run_id": parent, "root_run_id": "root", "depth": depth, "ts": ts}


def test_status_store_follows_a_run_through_its_phases() -> None:
    store = RunStatusStore()
    store(0, RunStarted(thread_id="t", model="m", **lin("root", ts=1.0)))  # type: ignore[arg-type]
    status = store.get("root")
    assert status is not None
    assert (status.status, status.phase, status.started_at) == ("running", "idle", 1.0)
    assert status.metadata["model"] == "m"
    store(1, ModelStarted(call_id="c1", model="m", **lin("root")))  # type: ignore[arg-type]
    status = store.get("root")
    assert status is not None
    assert (status.phase, status.active_model_call) == ("model", "c1")
    store(2, ModelCompleted(call_id="c1", model="m", **lin("root")))  # type: ignore[arg-type]
    store(3, ToolStarted(call_id="t1", tool_name="x", **lin("root")))  # type: ignore[arg-type]
    status = store.get("root")
    assert status is not None
    assert (status.phase, status.model_calls, status.active_model_call) == ("tools", 1, None)
    store(4, ToolCompleted(call_id="t1", tool_name="x", **lin("root")))  # type: ignore[arg-type]
    store(5, RunCompleted(model_calls=1, tool_calls=1, **lin("root", ts=3.0)))  # type: ignore[arg-type]
    status = store.get("root")
    assert status is not None
    assert (status.status, status.phase, status.ended_at, status.tool_calls, status.error) == (
        "completed",
        "done",
        3.0,
        1,
        None,
    )
    assert status.metadata["last_offset"] == 5
    assert status.metadata["last_kind"] == "run.completed"
    assert store.list_active() == []


def test_status_store_records_failure_and_cancellation_text() -> None:
    store = RunStatusStore()
    store.observe(RunStarted(**lin("a")))  # type: ignore[arg-type]
    store.observe(RunFailed(error_type="ProviderError", error="503 from upstream", **lin("a")))  # type: ignore[arg-type]
    store.observe(RunStarted(**lin("b")))  # type: ignore[arg-type]
    store.observe(RunCancelledEvent(reason="stop clicked", **lin("b")))  # type: ignore[arg-type]
    a, b = store.get("a"), store.get("b")
    assert a is not None
    assert a.status == "failed"
    assert a.error == "ProviderError: 503 from upstream"
    assert b is not None
    assert b.status == "cancelled"
    assert b.error == "cancelled: stop clicked"


def test_status_store_lists_by_root_thread_and_activity() -> None:
    store = RunStatusStore()
    store.observe(RunStarted(thread_id="t1", **lin("root")))  # type: ignore[arg-type]
    store.observe(RunStarted(thread_id="t1", **lin("kid", parent="root", depth=1)))  # type: ignore[arg-type]
    store.observe(RunStarted(run_id="other", root_run_id="other", thread_id="t2"))
    store.observe(RunCompleted(**lin("kid", parent="root", depth=1)))  # type: ignore[arg-type]
    assert [s.run_id for s in store.list_by_root("root")] == ["root", "kid"]
    assert [s.run_id for s in store.list_by_thread("t2")] == ["other"]
    assert {s.run_id for s in store.list_active()} == {"root", "other"}
    kid = store.get("kid")
    assert kid is not None
    assert (kid.parent_run_id, kid.depth) == ("root", 1)
    assert "kid" in store
    assert len(store) == 3
    assert store.get("nope") is None


def test_status_store_creates_a_run_seen_mid_stream() -> None:
    store = RunStatusStore()
    store(9, ToolStarted(call_id="t", tool_name="x", **lin("late", ts=4.0)))  # type: ignore[arg-type]
    status = store.get("late")
    assert status is not None
    assert (status.status, status.phase, status.started_at) == ("running", "tools", 4.0)


def test_status_store_returns_copies() -> None:
    store = RunStatusStore()
    store.observe(RunStarted(**lin("a")))  # type: ignore[arg-type]
    copy = store.get("a")
    assert copy is not None
    copy.status = "failed"
    copy.metadata["x"] = 1
    fresh = store.get("a")
    assert fresh is not None
    assert fresh.status == "running"
    assert "x" not in fresh.metadata


def test_status_store_evicts_oldest_terminal_runs_only() -> None:
    store = RunStatusStore(max_runs=3)
    store.observe(RunStarted(**lin("active")))  # type: ignore[arg-type]
    for name in ("t1", "t2", "t3", "t4"):
        store.observe(RunStarted(**lin(name)))  # type: ignore[arg-type]
        store.observe(RunCompleted(**lin(name)))  # type: ignore[arg-type]
    assert [s.run_id for s in store.list_all()] == ["active", "t3", "t4"]
    many = RunStatusStore(max_runs=2)
    for name in ("a", "b", "c"):
        many.observe(RunStarted(**lin(name)))  # type: ignore[arg-type]
    assert len(many) == 3  # active runs are never evicted


def test_status_store_rebuilds_from_a_record() -> None:
    record = [
        RunStarted(**lin("r")),  # type: ignore[arg-type]
        ModelStarted(call_id="c", model="m", **lin("r")),  # type: ignore[arg-type]
    ]
    store = RunStatusStore().replay(as_observations(record))
    status = store.get("r")
    assert status is not None
    assert status.phase == "model"
    assert status.metadata["last_offset"] == 1


def test_status_store_validates_its_cap() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigurationError):
            RunStatusStore(max_runs=bad)  # type: ignore[arg-type]


def test_status_store_dataframe() -> None:
    pytest.importorskip("pandas")
    store = RunStatusStore()
    store.observe(RunStarted(model="m", **lin("a")))  # type: ignore[arg-type]
    frame = store.to_dataframe()
    assert list(frame["run_id"]) == ["a"]
    assert list(frame["model"]) == ["m"]
    assert "status" in frame.columns
