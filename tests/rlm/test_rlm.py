"""RLM runs over both environments (in-process and a shared child kernel), driven by scripted models."""

from __future__ import annotations

import threading
import time
from typing import Any

import pandas as pd
import pytest

from tinyagents_nb.harness import (
    AgentEvent,
    LimitExceeded,
    RunCancelled,
    RunConfig,
    RunContext,
    RunTimeout,
    SubAgentStarted,
    Usage,
)
from tinyagents_nb.harness.events import UsageRecorded
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel
from tinyagents_nb.rlm import REPL_TOOL, RLM, Environment, RLMCode, RLMLimits, RLMOutput, RLMStarted

from ._scripts import ROOT_USAGE, largest_request, py, sub_model

pytestmark = pytest.mark.anyio


def needle_text() -> str:
    rows = [f"row {i:07d} status=ok" for i in range(100_000)]
    rows[61_234] = "row 0061234 status=NEEDLE-7f3a9"
    text = "\n".join(rows)
    assert len(text) > 2_000_000
    return text


async def test_a_needle_in_2mb_with_no_request_over_20000_characters(environment: Environment) -> None:
    model = ScriptedModel(
        [
            py("print(len(context)); print(context[:60])"),
            py("print(context)"),  # the model forgets itself: the output is truncated, not the window
            py(
                "i = context.find('NEEDLE'); line = context[context.rfind(chr(10), 0, i) + 1 : context.find(chr(10), i)]; print(line)"
            ),
            py("FINAL(line.split('=')[1])"),
        ]
    )
    run = await RLM(model=model, environment=environment).invoke(
        "Find the NEEDLE value.", context={"context": needle_text()}
    )
    assert run.final_text == "NEEDLE-7f3a9"
    assert len(model.requests) == 4  # the FINAL reply ends the run without another model call
    assert largest_request(model) < 20_000
    third = model.requests[2].messages[-1]
    assert third.role == "user"
    assert "more characters cut" in third.text
    assert len(third.text) <= 4_000


async def test_llm_batch_makes_depth_1_child_runs_whose_usage_rolls_up_exactly(environment: Environment) -> None:
    logs = "\n".join(f"{'ERROR' if i % 7 == 0 else 'INFO'} event {i}" for i in range(10_000))
    model = ScriptedModel(
        [
            py(
                "lines = logs.splitlines()\nchunks = [chr(10).join(lines[i::10]) for i in range(10)]\ncounts = llm_batch(['count:' + c for c in chunks])\nprint(counts)"
            ),
            py("FINAL(sum(int(c) for c in counts))"),
        ]
    )
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    rlm = RLM(model=model, sub_model=sub_model(), environment=environment, limits=RLMLimits(max_concurrency=4))
    run = await rlm.invoke_in_context(ctx, "How many ERROR lines?", context={"logs": logs})
    assert run.final_text == str(logs.count("ERROR"))
    started = [e for e in rec.events if isinstance(e, SubAgentStarted)]
    assert len(started) == 10
    assert all(e.name == "llm" and e.run_id == run.run_id for e in started)
    child_ids = {e.child_run_id for e in started}
    child_runs = [e for e in rec.events if e.kind == "run.started" and e.run_id in child_ids]
    assert len(child_runs) == 10
    assert {e.depth for e in child_runs} == {1}
    assert {e.parent_run_id for e in child_runs} == {run.run_id}
    child_usage = sum((e.usage for e in rec.events if isinstance(e, UsageRecorded) and e.depth == 1), Usage())
    assert child_usage.input_tokens > 0
    assert run.usage == ROOT_USAGE + ROOT_USAGE + child_usage
    assert ctx.usage.for_subtree(run.run_id) == run.usage


async def test_final_var_answers_with_a_repl_variable(environment: Environment) -> None:
    model = ScriptedModel([py("answer = {'errors': 3, 'warnings': 1}", "FINAL_VAR('answer')")])
    run = await RLM(model=model, environment=environment).invoke("Summarize.", context={})
    assert run.final_text == "{'errors': 3, 'warnings': 1}"


async def test_an_exception_is_output_for_the_model_and_the_run_recovers(environment: Environment) -> None:
    model = ScriptedModel([py("x = 1 / 0", "print('never')"), py("x = 1 / 1\nprint(x)"), py("FINAL(x)")])
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await RLM(model=model, environment=environment).invoke_in_context(ctx, "Divide.", context={})
    assert run.status == "completed"
    assert run.final_text == "1.0"
    seen = model.requests[1].messages[-1].text
    assert "ZeroDivisionError" in seen
    assert "did not run" in seen
    assert "never" not in seen
    outputs = [e for e in rec.events if isinstance(e, RLMOutput)]
    assert [e.error_type for e in outputs] == ["ZeroDivisionError", None, None]
    codes = [e for e in rec.events if isinstance(e, RLMCode)]
    assert [c.code for c in codes] == ["x = 1 / 0", "x = 1 / 1\nprint(x)", "FINAL(x)"]
    assert all(c.environment == environment.name for c in codes)
    (started,) = [e for e in rec.events if isinstance(e, RLMStarted)]  # names the tool its code runs through
    assert (started.tool_name, started.environment, started.run_id) == (REPL_TOOL, environment.name, run.run_id)
    kinds = [e.kind for e in rec.events]
    assert kinds.index("rlm.started") < kinds.index("model.started") < kinds.index("tool.started")


async def test_consecutive_errors_are_bounded(environment: Environment) -> None:
    model = ScriptedModel([py("raise ValueError('a')"), py("raise ValueError('b')"), py("raise ValueError('c')")])
    rlm = RLM(model=model, environment=environment, limits=RLMLimits(max_consecutive_errors=2))
    harness, messages = rlm.prepare("Fail.", {})
    run, _ = await harness.invoke_with_status(RunContext(), messages)
    assert isinstance(run.error, LimitExceeded)
    assert run.error.limit == "rlm_consecutive_errors"
    assert sum(1 for m in run.messages if m.role == "tool") == 2  # the transcript so far is kept


async def test_iterations_are_capped_by_the_harness_not_by_the_repl(environment: Environment) -> None:
    model = ScriptedModel([py("print(1)"), py("print(2)"), py("print(3)")])
    rlm = RLM(model=model, environment=environment, limits=RLMLimits(max_iterations=2))
    with pytest.raises(LimitExceeded) as info:
        await rlm.invoke("Loop.", context={})
    assert info.value.limit == "rlm_iterations"
    assert len(model.requests) == 2


async def test_sub_queries_are_capped_and_the_cap_ends_the_run(environment: Environment) -> None:
    code = "try:\n    llm_batch(['count:x'] * 5)\nexcept Exception as exc:\n    print('caught', exc)\nprint('went on')"
    model = ScriptedModel([py("print(llm('count:ERROR'))"), py(code), py("FINAL('no')")])
    rlm = RLM(model=model, sub_model=sub_model(), environment=environment, limits=RLMLimits(max_sub_queries=3))
    harness, messages = rlm.prepare("Ask too much.", {})
    run, _ = await harness.invoke_with_status(RunContext(), messages)
    assert isinstance(run.error, LimitExceeded)
    assert run.error.limit == "rlm_sub_queries"
    assert len(model.requests) == 2


async def test_a_dataframe_context(environment: Environment) -> None:
    frame = pd.DataFrame({"level": ["ERROR", "INFO", "WARN", "ERROR"] * 2_500, "ms": range(10_000)})
    model = ScriptedModel(
        [py("print(logs.dtypes)"), py("counts = logs['level'].value_counts().to_dict()", "FINAL_VAR('counts')")]
    )
    run = await RLM(model=model, environment=environment).invoke("Count levels.", context={"logs": frame})
    assert run.final_text == str({"ERROR": 5_000, "INFO": 2_500, "WARN": 2_500})
    first = model.requests[0].messages[1].text
    assert "shape (10000, 2)" in first
    assert "ERROR" not in first.split("Variables")[1]


async def test_stop_during_a_busy_loop_ends_the_run_within_2_s(environment: Environment) -> None:
    await _stopped_within(environment, "while True:\n    pass", bound_s=2.0)


async def test_a_reply_without_code_is_nudged_once_then_taken_as_the_answer(environment: Environment) -> None:
    model = ScriptedModel([ScriptedModel.text("I think it is 4."), ScriptedModel.text("It is 4.")])
    run = await RLM(model=model, environment=environment).invoke("2 + 2?", context={})
    assert run.final_text == "It is 4."
    assert "No code block found" in model.requests[1].messages[-1].text


async def test_a_prose_final_line_ends_the_run(environment: Environment) -> None:
    model = ScriptedModel([ScriptedModel.text("Checked already.\nFINAL(4)")])
    assert (await RLM(model=model, environment=environment).invoke("2 + 2?", context={})).final_text == "4"


async def test_the_approval_hook_can_skip_a_block(environment: Environment) -> None:
    asked: list[str] = []

    async def approve(ctx: RunContext[Any], code: str) -> bool:
        asked.append(code)
        return "import os" not in code

    model = ScriptedModel([py("import os; os.remove('x')"), py("FINAL('safe')")])
    run = await RLM(model=model, environment=environment, approve_code=approve).invoke("Go.", context={})
    assert run.final_text == "safe"
    assert len(asked) == 2
    assert "not approved" in model.requests[1].messages[-1].text


async def test_streaming_run_shows_code_and_output_events(environment: Environment) -> None:
    model = ScriptedModel([py("print(sum(range(10)))"), py("FINAL('45')")], chunk_size=5)
    stream = RLM(model=model, environment=environment).invoke_streaming("Sum.", context={})
    kinds: list[AgentEvent] = [event async for event in stream]
    run = await stream.result()
    assert run.final_text == "45"
    outputs = [e for e in kinds if isinstance(e, RLMOutput)]
    assert outputs[0].output == "45\n"
    assert any(e.kind == "model.delta" for e in kinds)


async def _stopped_within(environment: Environment, code: str, *, bound_s: float) -> float:
    model = ScriptedModel([py(code), py("FINAL('unreachable')")])
    ctx = RunContext()
    stopped_at: list[float] = []

    def on_event(offset: int, event: AgentEvent) -> None:
        if isinstance(event, RLMCode):

            def stop() -> None:
                stopped_at.append(time.monotonic())
                ctx.cancellation.cancel("Stop")

            threading.Timer(0.5, stop).start()

    ctx.events.add_listener(on_event)
    with pytest.raises(RunCancelled):
        await RLM(model=model, environment=environment).invoke_in_context(ctx, "Hang.", context={})
    elapsed = time.monotonic() - stopped_at[0]
    assert elapsed < bound_s, elapsed
    return elapsed


async def test_a_prose_final_line_ends_a_streaming_run_the_same_way(environment: Environment) -> None:
    model = ScriptedModel([ScriptedModel.text("Checked already.\nFINAL(4)")], chunk_size=3)
    stream = RLM(model=model, environment=environment).invoke_streaming("2 + 2?", context={})
    assert (await stream.result()).final_text == "4"


async def test_the_runs_deadline_interrupts_a_running_block(environment: Environment) -> None:
    model = ScriptedModel([py("while True:\n    pass"), py("FINAL('unreachable')")])
    started = time.monotonic()
    with pytest.raises(RunTimeout):
        await RLM(model=model, environment=environment).invoke("Hang.", context={}, config=RunConfig(timeout_s=1.0))
    assert time.monotonic() - started < 10
    after = ScriptedModel([py("FINAL('free again')")])  # the block was stopped, not left running
    assert (await RLM(model=after, environment=environment).invoke("Ping.", context={})).final_text == "free again"
