"""What a code block prints is bounded while it streams, in both environments."""

from __future__ import annotations

import tracemalloc

import pytest

from tinyagents_nb.harness import AgentHarness, RunContext
from tinyagents_nb.rlm import KernelEnvironment, LocalEnvironment, RLMLimits, SubQueries

from ._scripts import sub_model

pytestmark = pytest.mark.anyio

_BOUND = 1_100_000  # the kept head (1,000,000 characters), the tail and the note


async def _run(env: LocalEnvironment | KernelEnvironment, code: str, *, timeout_s: float = 60.0) -> tuple[str, int]:
    """The block's output and the peak of Python allocations in this process while it ran."""
    queries = SubQueries(RunContext(), AgentHarness(model=sub_model()), RLMLimits())
    await env.start_run(env.prepare_values({}), queries)
    try:
        tracemalloc.start()
        try:
            result = await env.execute(code, timeout_s=timeout_s, should_stop=lambda: False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        await env.end_run()
    return result.output, peak


async def test_local_a_50_mb_print_keeps_the_head_and_tail_and_no_copy() -> None:
    output, peak = await _run(LocalEnvironment(), "print('x' * 50_000_000, 'THE-END')")
    assert len(output) < _BOUND
    assert output.rstrip().endswith("THE-END")
    assert "48,996,009 characters in the middle were not kept" in output
    assert peak < 60_000_000, f"peak {peak:,} bytes for a 50 MB string"  # the string itself, and no copy


async def test_local_output_past_the_bound_is_not_kept() -> None:
    output, _ = await _run(LocalEnvironment(), "for i in range(300):\n    print('y' * 10_000)\nprint('last line')")
    assert len(output) < _BOUND
    assert output.rstrip().endswith("last line")


async def test_local_an_endless_print_loop_stays_bounded_until_its_timeout() -> None:
    output, peak = await _run(LocalEnvironment(), "while True:\n    print('z' * 1000)", timeout_s=1.5)
    assert len(output) < _BOUND
    assert peak < 20_000_000, f"peak {peak:,} bytes"


async def test_kernel_a_50_mb_print_and_an_endless_loop_stay_bounded_in_this_process() -> None:
    env = KernelEnvironment()
    try:
        output, peak = await _run(env, "print('x' * 50_000_000, 'THE-END')")
        assert len(output) < _BOUND
        assert output.rstrip().endswith("THE-END")
        assert peak < 30_000_000, f"peak {peak:,} bytes in the notebook process"
        output, peak = await _run(env, "while True:\n    print('z' * 1000)", timeout_s=2.0)
        assert len(output) < _BOUND
        assert peak < 30_000_000, f"peak {peak:,} bytes in the notebook process"
        output, peak = await _run(env, "'v' * 20_000_000")  # a last expression's value
        assert len(output) < _BOUND
        assert "more characters of this value were not kept" in output
        assert peak < 30_000_000, f"peak {peak:,} bytes in the notebook process"
        output, _ = await _run(env, "print('small again')")
        assert output == "small again\n"  # the cap is per block
    finally:
        env.close()
