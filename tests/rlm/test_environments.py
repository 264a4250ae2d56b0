"""What each environment isolates, and how Stop, timeouts, restarts and bad values behave in it."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from typing import Any

import pytest

from tinyagents_nb.harness import AgentEvent, AgentHarness, LimitExceeded, RunCancelled, RunContext, event_to_dict
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel
from tinyagents_nb.rlm import (
    RLM,
    BridgeServer,
    ContextValueError,
    KernelEnvironment,
    LocalEnvironment,
    RLMCode,
    RLMLimits,
    SubQueries,
)

from ._scripts import py, sub_model

pytestmark = pytest.mark.anyio


class Point:  # importable here, not in the child kernel (whose cwd and path do not hold the tests)
    def __init__(self, x: int) -> None:
        self.x = x


async def stop_after_code_starts(rlm: RLM, *, delay_s: float = 0.5) -> float:
    """Run one hanging block, press Stop ``delay_s`` after it starts; returns Stop-to-end seconds."""
    ctx = RunContext()
    stopped_at: list[float] = []

    def on_event(offset: int, event: AgentEvent) -> None:
        if isinstance(event, RLMCode):

            def stop() -> None:
                stopped_at.append(time.monotonic())
                ctx.cancellation.cancel("Stop")

            threading.Timer(delay_s, stop).start()

    ctx.events.add_listener(on_event)
    with pytest.raises(RunCancelled) as info:
        await rlm.invoke_in_context(ctx, "Hang.", context={})
    assert info.value.messages  # the transcript so far
    return time.monotonic() - stopped_at[0]


# ------------------------------------------------------------------------------------------ child kernel
async def test_stop_during_time_sleep_60_in_the_kernel_ends_within_2_s(kernel_env: KernelEnvironment) -> None:
    model = ScriptedModel([py("import time\ntime.sleep(60)"), py("FINAL('unreachable')")])
    elapsed = await stop_after_code_starts(RLM(model=model, environment=kernel_env))
    assert elapsed < 2.0, elapsed
    # the kernel survived the interrupt and serves the next run
    after = ScriptedModel([py("FINAL('alive')")])
    assert (await RLM(model=after, environment=kernel_env).invoke("Ping.", context={})).final_text == "alive"


async def test_stop_cancels_pending_sub_queries(kernel_env: KernelEnvironment) -> None:
    async def slow(request: Any) -> Any:
        await asyncio.sleep(60)

    from tinyagents_nb.harness.testkit import FunctionModel

    model = ScriptedModel([py("llm_batch(['a', 'b', 'c'])"), py("FINAL('unreachable')")])
    rlm = RLM(model=model, sub_model=FunctionModel(slow), environment=kernel_env)
    elapsed = await stop_after_code_starts(rlm)
    assert elapsed < 2.0, elapsed


async def test_a_block_over_its_timeout_is_interrupted_and_ends_the_run(kernel_env: KernelEnvironment) -> None:
    model = ScriptedModel([py("import time\ntime.sleep(30)")])
    rlm = RLM(model=model, environment=kernel_env, limits=RLMLimits(block_timeout_s=0.5))
    started = time.monotonic()
    with pytest.raises(LimitExceeded) as info:
        await rlm.invoke("Hang.", context={})
    assert info.value.limit == "rlm_block_timeout"
    assert time.monotonic() - started < 10


async def test_an_unpicklable_value_is_a_one_line_error_naming_it(kernel_env: KernelEnvironment) -> None:
    model = ScriptedModel([py("FINAL(1)")])
    with pytest.raises(ContextValueError) as info:
        await RLM(model=model, environment=kernel_env).invoke("Go.", context={"ok": 1, "lock": threading.Lock()})
    assert info.value.name == "lock"
    assert "'lock'" in str(info.value)
    assert "\n" not in str(info.value)
    assert model.requests == []  # refused before the run


async def test_a_value_the_child_cannot_load_is_a_typed_error_naming_it(kernel_env: KernelEnvironment) -> None:
    model = ScriptedModel([py("FINAL(1)")])
    with pytest.raises(ContextValueError) as info:
        await RLM(model=model, environment=kernel_env).invoke("Go.", context={"p": Point(1)})
    assert info.value.name == "p"
    assert "could not be loaded" in str(info.value)
    assert model.requests == []


async def test_the_kernel_is_reused_across_runs_with_a_fresh_namespace(kernel_env: KernelEnvironment) -> None:
    first = ScriptedModel([py("import os\nleft_over = 1\nFINAL(os.getpid())")])
    second = ScriptedModel([py("import os\nFINAL((os.getpid(), 'left_over' in globals(), data))")])
    pid = (await RLM(model=first, environment=kernel_env).invoke("pid", context={})).final_text
    again = (await RLM(model=second, environment=kernel_env).invoke("pid", context={"data": [1, 2]})).final_text
    assert again == f"({pid}, False, [1, 2])"
    import os

    assert pid != str(os.getpid())  # really another process


async def test_a_dead_kernel_is_restarted_with_the_values_and_secrets_stay_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
    env = KernelEnvironment()
    try:
        model = ScriptedModel(
            [
                py("import os\nos._exit(1)"),
                py("import os\nprint(len(data), 'OPENAI_API_KEY' in os.environ)"),
                py("FINAL('ok')"),
            ]
        )
        run = await RLM(model=model, environment=env).invoke("Crash.", context={"data": "abc"})
        assert run.final_text == "ok"
        assert "died" in model.requests[1].messages[-1].text
        seen = model.requests[2].messages[-1].text
        assert "restarted" in seen
        assert "3 False" in seen
        assert env.restarts == 1
    finally:
        env.close()


async def test_the_bridge_refuses_a_wrong_token() -> None:
    queries = SubQueries(RunContext(), AgentHarness(model=sub_model()), RLMLimits())
    bridge = BridgeServer(queries)
    await bridge.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
        writer.write(json.dumps({"token": "0" * 64}).encode() + b"\n")
        writer.write(json.dumps({"op": "llm", "prompts": ["count:ERROR"]}).encode() + b"\n")
        await writer.drain()
        assert await reader.readline() == b""  # closed without an answer
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
        writer.write(json.dumps({"token": bridge.token}).encode() + b"\n")
        writer.write(json.dumps({"op": "llm", "prompts": ["count:ERROR"]}).encode() + b"\n")
        await writer.drain()
        assert json.loads(await reader.readline()) == {"ok": True, "results": ["1"]}
        writer.close()
    finally:
        await bridge.close()
    assert queries.count == 1


# ------------------------------------------------------------------------------------------ in-process
async def test_local_values_are_passed_by_reference() -> None:
    data: dict[str, int] = {"n": 1}
    model = ScriptedModel([py("data['n'] += 1\nFINAL(data['n'])")])
    run = await RLM(model=model, environment="local").invoke("Bump.", context={"data": data})
    assert run.final_text == "2"
    assert data == {"n": 2}


async def test_local_stop_during_time_sleep_ends_the_run_within_2_s_and_abandons_the_thread() -> None:
    env = LocalEnvironment(interrupt_grace_s=0.5)
    model = ScriptedModel([py("import time\ntime.sleep(3)"), py("FINAL('unreachable')")])
    elapsed = await stop_after_code_starts(RLM(model=model, environment=env))
    assert elapsed < 2.0, elapsed
    assert env.abandoned_threads == 1  # a C call cannot be interrupted: the thread finishes on its own


async def test_local_stop_during_a_busy_loop_interrupts_the_thread() -> None:
    env = LocalEnvironment()
    model = ScriptedModel([py("while True:\n    pass"), py("FINAL('unreachable')")])
    elapsed = await stop_after_code_starts(RLM(model=model, environment=env))
    assert elapsed < 1.0, elapsed
    assert env.abandoned_threads == 0  # the async exception reached it


async def test_the_child_kernel_runs_the_expected_ipykernel_major(kernel_env: KernelEnvironment) -> None:
    model = ScriptedModel([py("import ipykernel\nFINAL(ipykernel.__version__.split('.')[0])")])
    major = (await RLM(model=model, environment=kernel_env).invoke("Which?", context={})).final_text
    expected = "7" if kernel_env.python == sys.executable else "6"
    assert major == expected


async def test_a_block_that_ignores_the_interrupt_is_stopped_by_killing_the_kernel(
    kernel_env: KernelEnvironment,
) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"
    model = ScriptedModel([py(code), py("FINAL('unreachable')")])
    elapsed = await stop_after_code_starts(RLM(model=model, environment=kernel_env))
    assert elapsed < 2.5, elapsed  # the 1 s grace, then a kill
    after = ScriptedModel([py("FINAL(len(data))")])  # the next run starts a fresh kernel
    run = await RLM(model=after, environment=kernel_env).invoke("Ping.", context={"data": [1, 2, 3]})
    assert run.final_text == "3"


async def test_an_output_flood_is_bounded_in_memory_and_in_the_prompt(kernel_env: KernelEnvironment) -> None:
    code = "for i in range(40_000):\n    print('x' * 60, i)"  # 2.7 MB in batched stream messages
    model = ScriptedModel([py(code), py("FINAL('done')")])
    run = await RLM(model=model, environment=kernel_env).invoke("Flood.", context={})
    assert run.final_text == "done"
    seen = model.requests[1].messages[-1].text
    assert len(seen) <= 4_000
    assert "more characters cut" in seen
    wide = ScriptedModel([py(code), py("FINAL('done')")])
    limits = RLMLimits(max_output_chars=10_000_000)  # let the whole capture through, to measure it
    await RLM(model=wide, environment=kernel_env, limits=limits).invoke("Flood.", context={})
    captured = wide.requests[1].messages[-1].text
    assert "output flood" in captured
    assert len(captured) < 1_100_000
    assert captured.rstrip().endswith("39999")  # the latest output is kept


async def test_the_bridge_token_never_reaches_events_or_the_model(kernel_env: KernelEnvironment) -> None:
    tokens: list[str] = []

    async def approve(ctx: RunContext[Any], code: str) -> bool:
        tokens.append(kernel_env._bridge.token)
        return True

    model = ScriptedModel([py("print(llm('count:ERROR'))"), py("FINAL('ok')")])
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    rlm = RLM(model=model, sub_model=sub_model(), environment=kernel_env, approve_code=approve)
    assert (await rlm.invoke_in_context(ctx, "Go.", context={})).final_text == "ok"
    token = tokens[0]
    assert len(token) == 64
    assert all(token not in json.dumps(event_to_dict(e)) for e in rec.events)
    assert all(token not in m.text for r in model.requests for m in r.messages)
