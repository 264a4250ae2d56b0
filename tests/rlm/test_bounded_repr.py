"""A block's last-expression value becomes text without its whole ``repr`` being built (in-process)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given, settings, strategies as st

from tinyagents_nb.harness import AgentHarness, RunContext
from tinyagents_nb.rlm import LocalEnvironment, RLMLimits, SubQueries
from tinyagents_nb.rlm._repr import bounded_repr

from ._scripts import sub_model

_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.binary(max_size=20)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=5)
        | st.frozensets(st.integers() | st.text(max_size=5), max_size=5)
        | st.sets(st.integers(), max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=60, deadline=None)
@given(_VALUES)
def test_below_the_budget_it_is_repr(value: object) -> None:
    assert bounded_repr(value, 100_000) == (repr(value), True)


@settings(max_examples=60, deadline=None)
@given(_VALUES, st.integers(min_value=0, max_value=60))
def test_over_the_budget_it_is_a_cut_prefix_of_repr(value: object, limit: int) -> None:
    text, complete = bounded_repr(value, limit)
    full = repr(value)
    if complete:
        assert text == full
    else:
        assert text.endswith("…")
        assert len(text) <= limit + 1
        assert full.startswith(text[:-1])


def test_odd_shapes_match_repr() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    nested: dict[str, object] = {"a": 1}
    nested["self"] = nested
    for value in ((1,), (), set(), frozenset(), frozenset({1}), bytearray(b"x\x00"), loop, nested, {1: [(2,)]}):
        assert bounded_repr(value, 1_000) == (repr(value), True), value


async def _peak(values: dict[str, object], code: str) -> tuple[str, int]:
    env = LocalEnvironment()
    queries = SubQueries(RunContext(), AgentHarness(model=sub_model()), RLMLimits())
    await env.start_run(env.prepare_values(values), queries)
    try:
        tracemalloc.start()
        try:
            result = await env.execute(code, timeout_s=60, should_stop=lambda: False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        await env.end_run()
    return result.output, peak


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("make", "starts"),
    [
        pytest.param(lambda: "v" * 100_000_000, "'vvv", id="100 MB string"),
        pytest.param(lambda: b"\x00" * 50_000_000, "b'\\x00\\x00", id="50 MB bytes (repr: 4 characters a byte)"),
        pytest.param(lambda: ["abcdefghij"] * 1_000_000, "['abcdefghij', 'abc", id="a million items (repr: 15 MB)"),
        pytest.param(lambda: dict.fromkeys(range(200_000), "x" * 100), "{0: 'xxx", id="200,000 keys (repr: 22 MB)"),
    ],
)
async def test_a_huge_last_expression_is_never_turned_into_text_whole(make: Callable[[], object], starts: str) -> None:
    # The value exists before the block; only the block's own allocations are traced. The old code
    # built repr(value) whole (22 MB to 200 MB for these) and then cut it.
    output, peak = await _peak({"big": make()}, "big")
    assert output.startswith(starts)
    assert output.endswith("…\n[this value's text was cut at 1,000,000 characters]\n")
    assert 1_000_000 < len(output) < 1_000_100
    assert peak < 12_000_000, f"peak {peak:,} bytes"
