from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading

import pytest
from hypothesis import given, strategies as st

from tinyagents_nb.harness import ConfigurationError, InvalidIdError, RunId, Usage, UsageTracker
from tinyagents_nb.harness.runtime import CallId, UsageRecord

FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
)
COLUMNS = [
    "run_id",
    "parent_run_id",
    "root_run_id",
    "depth",
    "model",
    "provider",
    "call_id",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "total_tokens",
    "ts",
]


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    """Valid usages: the parts never exceed their totals."""
    cached = draw(st.integers(0, 10**9))
    write = draw(st.integers(0, 10**9))
    write_1h = draw(st.integers(0, write))
    extra_input = draw(st.integers(0, 10**9))
    reasoning = draw(st.integers(0, 10**9))
    extra_output = draw(st.integers(0, 10**9))
    return Usage(
        input_tokens=cached + write + extra_input,
        cached_input_tokens=cached,
        cache_write_tokens=write,
        cache_write_1h_tokens=write_1h,
        output_tokens=reasoning + extra_output,
        reasoning_tokens=reasoning,
    )


# ---------------------------------------------------------------- Usage value


def test_defaults_are_zero_and_empty() -> None:
    usage = Usage()
    assert usage.to_dict() == dict.fromkeys(FIELDS, 0)
    assert usage.total_tokens == 0
    assert usage.is_empty


def test_total_counts_input_and_output_once() -> None:
    # OpenAI convention: cached is inside input and reasoning inside output, so neither is re-added.
    usage = Usage(input_tokens=100, cached_input_tokens=60, output_tokens=40, reasoning_tokens=30)
    assert usage.total_tokens == 140
    assert not usage.is_empty


@pytest.mark.parametrize("field", FIELDS)
def test_negative_counts_are_rejected(field: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{field} must not be negative"):
        Usage(**{field: -1})


@pytest.mark.parametrize("value", [1.5, "3", None])
def test_non_int_counts_are_rejected(value: object) -> None:
    with pytest.raises(ConfigurationError, match="must be an int"):
        Usage(input_tokens=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_tokens": 10, "cached_input_tokens": 11}, "exceeds input_tokens"),
        ({"input_tokens": 10, "cached_input_tokens": 6, "cache_write_tokens": 5}, "exceeds input_tokens"),
        ({"output_tokens": 3, "reasoning_tokens": 4}, "reasoning_tokens .4. exceeds output_tokens"),
        (
            {"input_tokens": 10, "cache_write_tokens": 2, "cache_write_1h_tokens": 3},
            "cache_write_1h_tokens .3. exceeds cache_write_tokens",
        ),
    ],
)
def test_parts_cannot_exceed_their_totals(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        Usage(**kwargs)
    assert info.value.hint is not None
    assert "OpenAI convention" in info.value.hint


def test_usage_is_frozen_and_keyword_only() -> None:
    usage = Usage(input_tokens=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.input_tokens = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Usage(1)  # type: ignore[call-arg]


def test_add_and_sum() -> None:
    a = Usage(input_tokens=10, cached_input_tokens=4, output_tokens=5, reasoning_tokens=2)
    b = Usage(input_tokens=1, cache_write_tokens=1, output_tokens=1)
    assert a + b == Usage(
        input_tokens=11, cached_input_tokens=4, cache_write_tokens=1, output_tokens=6, reasoning_tokens=2
    )
    assert sum([a, b]) == a + b
    assert sum([], Usage()) == Usage()
    assert 0 + a is a


@pytest.mark.parametrize("other", [1, 1.0, "x", None, True])
def test_add_rejects_other_types(other: object) -> None:
    with pytest.raises(TypeError):
        _ = Usage() + other  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = other + Usage()  # type: ignore[operator]


@given(usages(), usages(), usages())
def test_addition_is_associative(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c)


@given(usages(), usages())
def test_addition_is_commutative_and_keeps_totals(a: Usage, b: Usage) -> None:
    assert a + b == b + a
    assert (a + b).total_tokens == a.total_tokens + b.total_tokens
    # The unchecked fast path in __add__ must only ever build valid values.
    total = a + b
    assert Usage(**total.to_dict()) == total


@given(usages())
def test_zero_is_the_identity(a: Usage) -> None:
    assert a + Usage() == a
    assert Usage() + a == a
    assert sum([a]) == a
    assert Usage(**a.to_dict()) == a


# ---------------------------------------------------------------- tracker


def _tree(tracker: UsageTracker) -> None:
    """root -> (child1 -> grandchild), child2, with distinct magnitudes so sums are unambiguous."""
    tracker.record(
        run_id="root", parent_run_id=None, root_run_id="root", depth=0, usage=Usage(input_tokens=1000), model="a"
    )
    tracker.record(
        run_id="child1",
        parent_run_id="root",
        root_run_id="root",
        depth=1,
        usage=Usage(input_tokens=100, output_tokens=10),
        model="b",
    )
    tracker.record(
        run_id="child2", parent_run_id="root", root_run_id="root", depth=1, usage=Usage(input_tokens=20), model="a"
    )
    tracker.record(
        run_id="grandchild",
        parent_run_id="child1",
        root_run_id="root",
        depth=2,
        usage=Usage(input_tokens=3, output_tokens=1, reasoning_tokens=1),
    )
    tracker.record(
        run_id="root", parent_run_id=None, root_run_id="root", depth=0, usage=Usage(output_tokens=7), model="a"
    )


def test_totals_over_a_three_level_tree() -> None:
    tracker = UsageTracker()
    _tree(tracker)
    assert tracker.total() == Usage(input_tokens=1123, output_tokens=18, reasoning_tokens=1)
    assert tracker.for_run("root") == Usage(input_tokens=1000, output_tokens=7)
    assert tracker.for_run("child1") == Usage(input_tokens=100, output_tokens=10)
    assert tracker.for_subtree("root") == tracker.total()
    assert tracker.for_subtree("child1") == Usage(input_tokens=103, output_tokens=11, reasoning_tokens=1)
    assert tracker.for_subtree("child2") == Usage(input_tokens=20)
    assert tracker.for_subtree("grandchild") == tracker.for_run("grandchild")
    assert tracker.by_model() == {
        "a": Usage(input_tokens=1020, output_tokens=7),
        "b": Usage(input_tokens=100, output_tokens=10),
        "unknown": Usage(input_tokens=3, output_tokens=1, reasoning_tokens=1),
    }
    assert tracker.runs() == ("root", "child1", "child2", "grandchild")
    assert len(tracker) == 5


def test_grandchild_recording_before_its_parent_is_counted() -> None:
    tracker = UsageTracker()
    # The grandchild records first; its parent has not recorded or registered yet.
    tracker.record(run_id="g", parent_run_id="c", root_run_id="r", depth=2, usage=Usage(input_tokens=5), model="m")
    assert tracker.for_subtree("c") == Usage(input_tokens=5)
    assert tracker.for_subtree("r") == Usage()  # c is not yet linked to r
    tracker.register_run("r", None)
    tracker.register_run("c", "r")  # c never records usage of its own
    assert tracker.for_run("c") == Usage()
    assert tracker.for_subtree("r") == Usage(input_tokens=5)
    assert tracker.runs() == ("g", "r", "c")


def test_unknown_runs_have_zero_usage() -> None:
    tracker = UsageTracker()
    assert tracker.for_run("nobody") == Usage()
    assert tracker.for_subtree("nobody") == Usage()
    assert tracker.total() == Usage()
    assert tracker.records == ()


def test_lineage_contradictions_are_rejected() -> None:
    tracker = UsageTracker()
    tracker.register_run("a", None)
    tracker.register_run("b", "a")
    tracker.register_run("b", "a")  # restating is fine
    with pytest.raises(ConfigurationError, match="registered with parent a"):
        tracker.register_run("b", "other")
    with pytest.raises(ConfigurationError, match="registered with parent None"):
        tracker.record(run_id="a", parent_run_id="x", root_run_id="x", depth=1, usage=Usage())
    with pytest.raises(ConfigurationError, match="descend from itself"):
        tracker.register_run("self", "self")
    tracker.register_run("x", "y")
    with pytest.raises(ConfigurationError, match="descend from itself"):
        tracker.register_run("y", "x")  # would close the cycle x -> y -> x
    assert len(tracker) == 0  # the rejected record left nothing behind


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"depth": -1}, ConfigurationError),
        ({"depth": True}, ConfigurationError),
        ({"run_id": "has space"}, InvalidIdError),
        ({"root_run_id": ""}, InvalidIdError),
        ({"call_id": "bad\nid"}, InvalidIdError),
        ({"usage": {"input_tokens": 1}}, ConfigurationError),
    ],
)
def test_record_rejects_bad_input(kwargs: dict[str, object], error: type[Exception]) -> None:
    tracker = UsageTracker()
    args: dict[str, object] = {
        "run_id": "r",
        "parent_run_id": None,
        "root_run_id": "r",
        "depth": 0,
        "usage": Usage(input_tokens=1),
    }
    with pytest.raises(error):
        tracker.record(**{**args, **kwargs})  # type: ignore[arg-type]
    assert len(tracker) == 0


def test_record_returns_a_typed_frozen_record() -> None:
    tracker = UsageTracker()
    record = tracker.record(
        run_id="r",
        parent_run_id=None,
        root_run_id="r",
        depth=0,
        usage=Usage(input_tokens=2),
        model="gpt-4o",
        provider="openai",
        call_id="call-1",
        ts=123.5,
    )
    assert isinstance(record, UsageRecord)
    assert isinstance(record.run_id, RunId)
    assert isinstance(record.call_id, CallId)
    assert (record.model, record.provider, record.ts) == ("gpt-4o", "openai", 123.5)
    assert tracker.records == (record,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.depth = 3  # type: ignore[misc]


def test_records_is_a_snapshot_and_an_empty_tracker_is_truthy() -> None:
    tracker = UsageTracker()
    assert tracker  # a shared handle must survive `tracker or UsageTracker()`
    snapshot = tracker.records
    tracker.record(run_id="r", parent_run_id=None, root_run_id="r", depth=0, usage=Usage(output_tokens=1))
    assert snapshot == ()
    assert len(tracker.records) == 1
    assert "total_tokens=1" in repr(tracker)


def test_concurrent_recording_loses_nothing() -> None:
    tracker = UsageTracker()
    tracker.register_run("root", None)
    threads_n, calls = 8, 400
    barrier = threading.Barrier(threads_n)

    def work(index: int) -> None:
        run = f"child{index}"
        barrier.wait()
        for call in range(calls):
            tracker.record(
                run_id=run if call % 2 else f"{run}-leaf",
                parent_run_id="root" if call % 2 else run,
                root_run_id="root",
                depth=1 if call % 2 else 2,
                usage=Usage(input_tokens=3, cached_input_tokens=1, output_tokens=2),
                model=f"m{index % 2}",
            )

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    n = threads_n * calls
    assert len(tracker) == n
    assert tracker.total() == Usage(input_tokens=3 * n, cached_input_tokens=n, output_tokens=2 * n)
    assert tracker.for_subtree("root") == tracker.total()
    assert tracker.for_subtree("child3") == Usage(
        input_tokens=3 * calls, cached_input_tokens=calls, output_tokens=2 * calls
    )
    assert tracker.for_run("child3") == Usage(
        input_tokens=3 * calls // 2, cached_input_tokens=calls // 2, output_tokens=calls
    )
    assert sum(tracker.by_model().values(), Usage()) == tracker.total()


# ---------------------------------------------------------------- DataFrame


def test_dataframe_has_one_row_per_record_with_typed_columns() -> None:
    tracker = UsageTracker()
    _tree(tracker)
    frame = tracker.to_dataframe()
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 5
    assert {name: str(dtype) for name, dtype in frame.dtypes.items() if str(dtype) != "object"} == {
        "depth": "int64",
        "input_tokens": "int64",
        "cached_input_tokens": "int64",
        "output_tokens": "int64",
        "reasoning_tokens": "int64",
        "cache_write_tokens": "int64",
        "cache_write_1h_tokens": "int64",
        "total_tokens": "int64",
        "ts": "float64",
    }
    grandchild = frame[frame.run_id == "grandchild"].iloc[0]
    assert grandchild.parent_run_id == "child1"
    assert type(grandchild.parent_run_id) is str  # plain str, not RunId
    assert grandchild.model is None
    assert (grandchild.input_tokens, grandchild.reasoning_tokens, grandchild.total_tokens) == (3, 1, 4)
    assert frame.input_tokens.sum() == tracker.total().input_tokens
    assert frame.groupby("root_run_id").total_tokens.sum()["root"] == tracker.total().total_tokens


def test_empty_dataframe_keeps_its_columns_and_dtypes() -> None:
    frame = UsageTracker().to_dataframe()
    assert frame.empty
    assert list(frame.columns) == COLUMNS
    assert str(frame.dtypes["input_tokens"]) == "int64"
    assert str(frame.dtypes["ts"]) == "float64"


def test_importing_the_modules_loads_neither_pandas_nor_genai_prices() -> None:
    code = (
        "import sys; from tinyagents_nb.harness import CostTracker, UsageTracker;"
        "print(sorted(m for m in ('pandas', 'genai_prices') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
