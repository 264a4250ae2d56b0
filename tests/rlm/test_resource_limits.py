"""OS limits on the child kernel: memory and CPU time, a typed error for the model, a restarted kernel."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tinyagents_nb.harness import AgentEvent, ConfigurationError, RunContext
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import RLM, KernelEnvironment, RLMLimits, RLMOutput

from ._scripts import py

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.kernel,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prlimit is Linux-only"),
]
LIMITS = RLMLimits(memory_mb=800, cpu_seconds=2, block_timeout_s=90)


@pytest.fixture(scope="module")
def limited() -> Iterator[KernelEnvironment]:
    env = KernelEnvironment(python=sys.executable)
    try:
        yield env
    finally:
        env.close()


async def run_blocks(env: KernelEnvironment, *blocks: str) -> tuple[ScriptedModel, list[RLMOutput]]:
    outputs: list[RLMOutput] = []

    def on_event(offset: int, event: AgentEvent) -> None:
        if isinstance(event, RLMOutput):
            outputs.append(event)

    ctx = RunContext()
    ctx.events.add_listener(on_event)
    model = ScriptedModel([*(py(b) for b in blocks), py("FINAL('done')")])
    run = await RLM(model=model, environment=env, limits=LIMITS).invoke_in_context(ctx, "Go.", context={"data": "abc"})
    assert run.final_text == "done"
    return model, outputs[: len(blocks)]


async def test_allocating_past_the_memory_limit_is_a_typed_error_and_the_next_block_runs_in_a_new_kernel(
    limited: KernelEnvironment,
) -> None:
    model, outputs = await run_blocks(
        limited,
        "import os\nfirst_pid = os.getpid()\nprint(first_pid)",
        "chunks = [bytearray(100_000_000) for _ in range(20)]",  # 2 GB against 800 MB
        "import os\nprint(len(data), 'first_pid' in globals(), os.getpid())",
        "import os, signal\nos.kill(os.getpid(), signal.SIGABRT)",  # a kernel that dies, not raises, under the limit
        "print(len(data))",
    )
    first_pid = outputs[0].output.strip()
    assert [o.error_type for o in outputs] == [None, "MemoryLimitExceeded", None, "MemoryLimitExceeded", None]
    told = model.requests[2].messages[-1].text
    assert "MemoryLimitExceeded" in told
    assert "800 MB" in told
    assert "restarted" in told
    assert "every other variable is lost" in told
    length, kept, pid = outputs[2].output.split()
    assert (length, kept) == ("3", "False")
    assert pid != first_pid
    assert "died (SIGABRT)" in outputs[3].output
    assert outputs[4].output.strip() == "3"


async def test_a_busy_loop_past_the_cpu_limit_is_a_typed_error_and_the_next_block_runs(
    limited: KernelEnvironment,
) -> None:
    model, outputs = await run_blocks(
        limited,
        "import time\nt0 = time.process_time()\nwhile time.process_time() - t0 < 1.0: pass\nprint('1 s of CPU is fine')",
        "n = 0\nwhile True: n += 1",
        "print(len(data), 'n' in globals())",
    )
    assert [o.error_type for o in outputs] == [None, "CPULimitExceeded", None]
    assert "1 s of CPU is fine" in outputs[0].output  # the limit is per block, not per kernel
    told = model.requests[2].messages[-1].text
    assert "CPULimitExceeded" in told
    assert "2 s of CPU time" in told
    assert "restarted" in told
    assert outputs[2].output.strip() == "3 False"


def test_limits_are_checked_and_refused_for_the_in_process_repl() -> None:
    for bad in (0, -5, 1.5, True, "1"):
        with pytest.raises(ConfigurationError, match="memory_mb"):
            RLMLimits(memory_mb=bad)  # type: ignore[arg-type]
    rlm = RLM(model=ScriptedModel([]), environment="local", limits=RLMLimits(cpu_seconds=5))
    with pytest.raises(ConfigurationError, match="child kernel"):
        rlm.prepare("Go.", {})


async def test_a_kernel_under_a_memory_limit_is_replaced_for_a_run_without_one(limited: KernelEnvironment) -> None:
    probe = "import os, resource\nprint(os.getpid(), resource.getrlimit(resource.RLIMIT_DATA)[1])"
    _, before = await run_blocks(limited, probe)
    pid, hard = before[0].output.split()
    assert int(hard) == 800 << 20
    outputs: list[RLMOutput] = []
    ctx = RunContext()
    ctx.events.add_listener(lambda offset, event: outputs.append(event) if isinstance(event, RLMOutput) else None)
    model = ScriptedModel([py(probe), py("FINAL('done')")])
    await RLM(model=model, environment=limited).invoke_in_context(ctx, "Go.", context={})
    new_pid, new_hard = outputs[0].output.split()
    assert new_pid != pid  # a hard limit cannot be raised: a new kernel
    assert int(new_hard) == -1  # RLIM_INFINITY
