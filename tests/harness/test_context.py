"""Every row of the seed's inheritance rules, plus construction-time validation."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tinyagents_nb.harness import (
    AgentEvent,
    CancellationToken,
    ConfigurationError,
    EventSink,
    InvalidIdError,
    ModelStarted,
    RunConfig,
    RunContext,
    RunId,
    SubAgentDepthError,
    ThreadId,
    Usage,
)


@dataclass
class AppData:
    user: str


def root(**config: object) -> RunContext[AppData]:
    cfg = RunConfig(
        run_id="root",
        thread_id="t1",
        tags=("a", "b"),
        metadata={"team": "x", "nested": {"k": [1, 2]}},
        configurable={"temperature": 0.2},
        timeout_s=30,
        max_model_calls=5,
        max_tool_calls=7,
        max_turn_output_tokens=100,
        max_depth=3,
        **config,  # type: ignore[arg-type]
    )
    return RunContext(config=cfg, data=AppData(user="ana"))


# ------------------------------------------------------------------------------------------ RunConfig
def test_run_config_defaults() -> None:
    cfg = RunConfig()
    assert isinstance(cfg.run_id, RunId)
    assert cfg.root_run_id == cfg.run_id
    assert cfg.parent_run_id is None
    assert cfg.thread_id is None
    assert cfg.tags == ()
    assert cfg.metadata == {}
    assert cfg.depth == 0
    assert cfg.max_depth == 8
    assert RunConfig().run_id != RunConfig().run_id


def test_ids_are_typed_after_construction() -> None:
    cfg = RunConfig(run_id="r1", thread_id="t1")
    assert isinstance(cfg.run_id, RunId)
    assert isinstance(cfg.thread_id, ThreadId)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"run_id": ""}, "invalid RunId"),
        ({"thread_id": "a b"}, "invalid ThreadId"),
        ({"metadata": {"x": object()}}, "not JSON-serializable"),
        ({"configurable": {"x": float("nan")}}, "not valid JSON"),
        ({"max_model_calls": -1}, "max_model_calls must be >= 0"),
        ({"max_tool_calls": True}, "must be an int"),
        ({"max_turn_output_tokens": 0}, "max_turn_output_tokens must be >= 1"),
        ({"timeout_s": 0}, "timeout_s must be > 0"),
        ({"timeout_s": -5.0}, "timeout_s must be > 0"),
        ({"timeout_s": "10"}, "number of seconds"),
        ({"depth": 9, "max_depth": 8}, "beyond max_depth"),
        ({"max_depth": -1}, "max_depth must be >= 0"),
        ({"tags": "solo"}, "not a single string"),
        ({"tags": ("ok", "")}, "non-empty strings"),
        ({"run_id": "r", "root_run_id": "other"}, "must name its parent_run_id"),
    ],
)
def test_bad_config_fails_at_construction(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        RunConfig(**kwargs)  # type: ignore[arg-type]


def test_invalid_id_error_is_typed() -> None:
    with pytest.raises(InvalidIdError):
        RunConfig(parent_run_id="bad id")


def test_config_is_frozen_including_json_escape_hatches() -> None:
    cfg = root().config
    with pytest.raises(AttributeError):
        cfg.run_id = RunId("x")  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.metadata["team"] = "y"  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg.metadata["nested"]["k"] = 3


def test_callers_dict_is_copied_not_shared() -> None:
    meta: dict[str, object] = {"a": [1]}
    cfg = RunConfig(metadata=meta)
    meta["b"] = 2
    meta["a"].append(2)  # type: ignore[attr-defined]
    assert dict(cfg.metadata) == {"a": (1,)}


def test_json_round_trip_of_config_and_escape_hatches() -> None:
    cfg = root().child(run_id="c1", tags=["c"], metadata={"step": 1}).config
    text = cfg.to_json()
    data = json.loads(text)
    assert data["metadata"] == {"team": "x", "nested": {"k": [1, 2]}, "step": 1}
    assert data["configurable"] == {"temperature": 0.2}
    back = RunConfig.from_json(text)
    assert back == cfg
    assert back.to_dict() == cfg.to_dict()


def test_from_dict_rejects_unknown_fields() -> None:
    with pytest.raises(ConfigurationError, match="unknown RunConfig field"):
        RunConfig.from_dict({"run_id": "r", "colour": "red"})


# ------------------------------------------------------------------------------------------ inheritance
def test_child_identity_rules() -> None:
    parent = root()
    child = parent.child(run_id="c1")
    assert child.run_id == "c1"
    assert child.parent_run_id == "root"
    assert child.root_run_id == "root"
    assert child.thread_id == "t1"
    assert child.depth == 1


def test_child_can_override_thread() -> None:
    child = root().child(thread_id="t2")
    assert child.thread_id == "t2"


def test_grandchild_keeps_root_and_names_its_parent() -> None:
    parent = root()
    child = parent.child(run_id="c1")
    grandchild = child.child(run_id="g1")
    assert grandchild.root_run_id == "root"
    assert grandchild.parent_run_id == "c1"
    assert grandchild.depth == 2


def test_child_generates_a_fresh_run_id() -> None:
    parent = root()
    a, b = parent.child(), parent.child()
    assert a.run_id != b.run_id != parent.run_id


def test_child_shares_every_live_handle() -> None:
    parent = root()
    child = parent.child()
    assert child.events is parent.events
    assert child.cancellation is parent.cancellation
    assert child.stores is parent.stores
    assert child.usage is parent.usage
    assert child.costs is parent.costs
    assert child.cache is parent.cache


def test_tags_are_parent_then_local_without_duplicates() -> None:
    child = root().child(tags=["b", "c", "c"])
    assert child.tags == ("a", "b", "c")


def test_metadata_and_configurable_merge_local_wins() -> None:
    parent = root()
    child = parent.child(metadata={"team": "y", "extra": True}, configurable={"seed": 1})
    assert dict(child.metadata) == {"team": "y", "nested": parent.metadata["nested"], "extra": True}
    assert dict(child.config.configurable) == {"temperature": 0.2, "seed": 1}


def test_limit_policies_are_inherited() -> None:
    child = root().child().config
    assert child.timeout_s == 30
    assert child.max_model_calls == 5
    assert child.max_tool_calls == 7
    assert child.max_turn_output_tokens == 100
    assert child.max_depth == 3


def test_parent_is_never_mutated() -> None:
    parent = root()
    before = parent.config.to_dict()
    parent.child(run_id="c", thread_id="other", tags=["new"], metadata={"team": "changed"}, configurable={"x": 1})
    assert parent.config.to_dict() == before


def test_siblings_do_not_see_each_others_local_tags_or_metadata() -> None:
    parent = root()
    left = parent.child(tags=["left"], metadata={"side": "L"})
    right = parent.child(tags=["right"], metadata={"other": 1})
    assert "left" not in right.tags
    assert "side" not in right.metadata
    assert "right" not in left.tags
    assert "other" not in left.metadata


def test_depth_past_max_depth_raises() -> None:
    ctx = root()  # max_depth=3
    for _ in range(3):
        ctx = ctx.child()
    assert ctx.depth == 3
    with pytest.raises(SubAgentDepthError, match="maximum depth of 3") as info:
        ctx.child()
    assert info.value.max_depth == 3


def test_data_is_inherited_or_replaced() -> None:
    parent = root()
    assert parent.child().data is parent.data
    other = parent.child(data=42)
    assert other.data == 42
    assert parent.data == AppData(user="ana")


def test_child_registers_lineage_for_subtree_usage() -> None:
    parent = root()
    child = parent.child(run_id="c1")
    grandchild = child.child(run_id="g1")
    parent.usage.record(
        run_id=grandchild.run_id,
        parent_run_id=grandchild.parent_run_id,
        root_run_id=grandchild.root_run_id,
        depth=grandchild.depth,
        usage=Usage(input_tokens=10, output_tokens=2),
    )
    assert parent.usage.for_subtree(RunId("root")).total_tokens == 12
    assert parent.usage.for_subtree(RunId("c1")).total_tokens == 12
    assert parent.usage.for_run(RunId("root")).total_tokens == 0


# ------------------------------------------------------------------------------------------ context
def test_fresh_context_builds_fresh_handles() -> None:
    a, b = RunContext(), RunContext()
    assert a.data is None
    assert a.events is not b.events
    assert a.cancellation is not b.cancellation
    assert not a.cancellation.is_cancelled
    assert a.context_window is None


def test_with_cancellation_installs_a_shared_token() -> None:
    parent = root()
    token = CancellationToken()
    scoped = parent.with_cancellation(token)
    assert scoped.cancellation is token
    assert parent.cancellation is not token
    assert scoped.events is parent.events
    child = scoped.child()
    token.cancel("stop")
    assert child.cancellation.is_cancelled
    assert not parent.cancellation.is_cancelled


def test_cancel_reaches_every_descendant() -> None:
    parent = root()
    leaves = [parent.child().child() for _ in range(3)]
    parent.cancellation.cancel()
    assert all(leaf.cancellation.is_cancelled for leaf in leaves)


def test_emit_stamps_lineage_on_the_shared_sink() -> None:
    parent = root()
    seen: list[AgentEvent] = []
    parent.events.add_listener(lambda off, e: seen.append(e))
    child = parent.child(run_id="c1")
    child.emit(ModelStarted, call_id="m1", model="gpt-4o")
    parent.emit(ModelStarted, call_id="m0", model="gpt-4o")
    assert [(e.run_id, e.parent_run_id, e.root_run_id, e.depth) for e in seen] == [
        ("c1", "root", "root", 1),
        ("root", None, "root", 0),
    ]


def test_with_config_leaves_original_untouched() -> None:
    parent = root()
    other = parent.with_config(max_model_calls=1)
    assert other.config.max_model_calls == 1
    assert parent.config.max_model_calls == 5
    assert other.events is parent.events


def test_repr_shows_identity_but_never_data() -> None:
    ctx = RunContext(config=RunConfig(run_id="r"), data={"api_key": "sk-secret"})
    assert "sk-secret" not in repr(ctx)
    assert "run_id='r'" in repr(ctx)


def test_rejects_a_non_config() -> None:
    with pytest.raises(ConfigurationError, match="must be a RunConfig"):
        RunContext(config={"run_id": "x"})  # type: ignore[call-overload]


def test_explicit_handles_are_used() -> None:
    sink = EventSink()
    ctx = RunContext(events=sink)
    assert ctx.events is sink


def test_record_usage_rolls_up_and_emits_usage_and_cost_events() -> None:
    parent = root()
    child = parent.child(run_id="c1")
    kinds: list[tuple[str, str]] = []
    parent.events.add_listener(lambda off, e: kinds.append((e.kind, e.run_id)))
    record = child.record_usage(Usage(input_tokens=1_000, output_tokens=100), model="gpt-4o", provider="openai")
    assert record.cost is not None
    assert kinds == [("usage.recorded", "c1"), ("cost.recorded", "c1")]
    assert parent.usage.for_subtree(RunId("root")).total_tokens == 1_100
    assert parent.costs.for_subtree(RunId("root")).total_usd == record.cost.total_usd
    assert parent.costs.for_run(RunId("root")).priced_calls == 0
