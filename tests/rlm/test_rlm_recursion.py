"""RLM, second generation: the ``answer`` dict, ``SHOW_VARS``, ``rlm_query`` children and partial answers."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Literal

import pydantic
import pytest

from tinyagents_nb.harness import (
    AgentEvent,
    AssistantMessage,
    BudgetExceeded,
    LimitExceeded,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    RunCancelled,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    RunTimeout,
    StructuredOutputError,
    SubAgentStarted,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.events import UsageRecorded
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel, ScriptedModel
from tinyagents_nb.rlm import RLM, Environment, KernelEnvironment, RLMError, RLMLimits, RLMPartialAnswer, RLMSession

from ._scripts import ROOT_USAGE, py, sub_model

pytestmark = pytest.mark.anyio

U = Usage(input_tokens=100, output_tokens=10)


def fenced(code: str) -> ModelResponse:
    return ScriptedModel.text(f"Working.\n```python\n{code}\n```\n", usage=U)


def task_of(request: ModelRequest) -> str:
    return next(m.text for m in request.messages if isinstance(m, UserMessage))


def turn_of(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if isinstance(m, AssistantMessage))


async def test_the_answer_dict_ends_the_run_after_its_block(environment: Environment) -> None:
    model = ScriptedModel(
        [
            py("answer['content'] = 'a first guess'\nprint(len(answer))"),
            py("answer['content'] = str(6 * 7)\nanswer['ready'] = True", "print('never runs')"),
        ]
    )
    run = await RLM(model=model, environment=environment).invoke("6 times 7?", context={})
    assert run.final_text == "42"
    assert len(model.requests) == 2  # the ready answer ends the run without another model call
    system = model.requests[0].messages[0].text
    assert 'answer["ready"] = True' in system
    assert "FINAL" not in system  # one protocol taught; FINAL/FINAL_VAR still work (test_rlm.py)


async def test_a_reassigned_answer_dict_as_the_official_prompts_write_it(environment: Environment) -> None:
    model = ScriptedModel([py("total = 3 + 4", 'answer = {"content": f"total={total}", "ready": True}')])
    run = await RLM(model=model, environment=environment).invoke("Add.", context={})
    assert run.final_text == "total=7"


async def test_show_vars_lists_the_models_variables_not_the_helpers(environment: Environment) -> None:
    model = ScriptedModel([py("rows = [1, 2, 3]\nimport json\nSHOW_VARS()"), py("FINAL('ok')")])
    run = await RLM(model=model, environment=environment).invoke("Vars?", context={"logs": "abcdef"})
    assert run.final_text == "ok"
    shown = model.requests[1].messages[-1].text
    assert "rows: list, len 3" in shown
    assert "logs: str, len 6" in shown
    assert "answer: dict, len 2" in shown
    for hidden in ("llm_batch", "rlm_query", "json", "SHOW_VARS"):
        assert hidden not in shown


def recursive_model(refusals: list[str]) -> FunctionModel:
    """Root splits 1,000 numbers over 8 children; each child splits its part over 2 leaves; leaves count."""

    def reply(request: ModelRequest) -> ModelResponse:
        task, turn = task_of(request), turn_of(request)
        if "ROOT" in task:
            if turn == 0:
                return fenced(
                    "parts = [context[i::8] for i in range(8)]\n"
                    "res = rlm_query_batched(['CHILD: count multiples of 3'] * 8, parts)\nprint(res)"
                )
            return fenced("answer['content'] = str(sum(int(r) for r in res))\nanswer['ready'] = True")
        if "CHILD" in task:
            if turn == 0:
                return fenced(
                    "half = len(context) // 2\n"
                    "sub = rlm_query_batched(['LEAF: count', 'LEAF: count'], [context[:half], context[half:]])\nprint(sub)"
                )
            return fenced("answer = {'content': str(sum(int(x) for x in sub)), 'ready': True}")
        assert "LEAF" in task, task
        if turn == 0:
            return fenced(
                "try:\n    rlm_query('DEEPER', context)\nexcept RLMCallError as e:\n    print('refused:', e)\n"
                "n = sum(1 for x in context if x % 3 == 0)\nprint(n)"
            )
        refusals.append(request.messages[-1].text)
        return fenced("answer['content'] = str(n)\nanswer['ready'] = True")

    return FunctionModel(reply, model_name="root")


async def test_depth_2_recursion_over_8_contexts_rolls_up_exactly_and_refuses_depth_3() -> None:
    refusals: list[str] = []
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    rlm = RLM(
        model=recursive_model(refusals),
        environment="local",
        limits=RLMLimits(max_depth=2, max_concurrency=4),
    )
    run = await rlm.invoke_in_context(ctx, "ROOT: how many multiples of 3?", context={"context": list(range(1000))})
    assert run.final_text == str(sum(1 for x in range(1000) if x % 3 == 0))
    # the tree: 8 children at depth 1, each with 2 leaves at depth 2; nothing at depth 3
    started = [e for e in rec.events if isinstance(e, SubAgentStarted)]
    assert len(started) == 24
    assert {e.name for e in started} == {"rlm_query"}
    runs = [e for e in rec.events if e.kind == "run.started"]
    assert sorted(e.depth for e in runs) == [0] + [1] * 8 + [2] * 16
    assert sum(1 for e in started if e.run_id == run.run_id) == 8
    in_flight, most = 0, 0  # the root's children, at most max_concurrency at once
    for e in rec.events:
        if e.kind in ("subagent.started", "subagent.completed") and e.run_id == run.run_id:
            in_flight += 1 if e.kind == "subagent.started" else -1
            most = max(most, in_flight)
    assert most == 4
    # depth 3 was refused inside every leaf's REPL, by the harness's cap
    assert len(refusals) == 16
    assert all("refused: RLMDepthError" in text for text in refusals)
    assert all("max_depth is 2" in text for text in refusals)
    # exact roll-up: 2 priced calls per run, 25 runs (the answer turns call no model)
    recorded = sum((e.usage for e in rec.events if isinstance(e, UsageRecorded)), Usage())
    assert recorded == Usage(input_tokens=25 * 2 * 100, output_tokens=25 * 2 * 10)
    assert run.usage == recorded
    assert ctx.usage.for_subtree(run.run_id) == recorded
    assert rlm.children is not None
    assert 0 < rlm.children.size <= 4 + 4 * 2  # REPLs are pooled, bounded by concurrency
    rlm.close()
    assert rlm.children.size == 0


async def test_keep_children_false_stops_the_childrens_repls_when_the_root_run_ends() -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        if "ROOT" in task_of(request):
            return fenced("r = rlm_query_batched(['CHILD'] * 3, [1, 2, 3])\nanswer.update(content=r, ready=True)")
        return fenced("answer.update(content=context * 10, ready=True)")

    rlm = RLM(model=FunctionModel(reply), environment="local", keep_children=False)
    run = await rlm.invoke("ROOT")
    assert run.final_text == '["10", "20", "30"]'
    assert rlm.children is not None
    assert rlm.children.size == 0


async def test_max_depth_0_refuses_rlm_query_and_does_not_teach_it() -> None:
    model = ScriptedModel(
        [
            py("try:\n    rlm_query('x')\nexcept RLMCallError as e:\n    print(e)"),
            py("answer.update(content='done', ready=True)"),
        ]
    )
    run = await RLM(model=model, environment="local", limits=RLMLimits(max_depth=0)).invoke("Go.", context={})
    assert run.final_text == "done"
    assert "rlm_query" not in model.requests[0].messages[0].text
    assert "RLMDepthError: rlm_query refused" in model.requests[1].messages[-1].text


async def test_children_count_as_sub_queries_and_the_cap_ends_the_run() -> None:
    model = ScriptedModel([py("rlm_query_batched(['a', 'b', 'c'], [1, 2, 3])"), py("FINAL('unreachable')")])
    with pytest.raises(LimitExceeded) as caught:
        await RLM(model=model, environment="local", limits=RLMLimits(max_sub_queries=2)).invoke("Go.", context={})
    assert caught.value.limit == "rlm_sub_queries"


async def test_stop_cancels_the_children_with_the_parent() -> None:
    ctx = RunContext()
    child_running = threading.Event()

    def reply(request: ModelRequest) -> ModelResponse:
        if "ROOT" in task_of(request):
            return fenced("rlm_query('CHILD: spin', 1)")
        return fenced("import time\nwhile True:\n    time.sleep(0.01)")

    def on_event(offset: int, event: AgentEvent) -> None:
        if event.kind == "rlm.code" and event.depth == 1 and not child_running.is_set():
            child_running.set()
            threading.Timer(0.3, lambda: ctx.cancellation.cancel("Stop")).start()

    ctx.events.add_listener(on_event)
    rec = EventRecorder(ctx.events)
    with pytest.raises(RunCancelled):
        await RLM(model=FunctionModel(reply), environment="local").invoke_in_context(ctx, "ROOT", context={})
    ended = {e.run_id: e.kind for e in rec.events if e.kind in ("run.completed", "run.failed", "run.cancelled")}
    child = next(e.child_run_id for e in rec.events if isinstance(e, SubAgentStarted))
    assert child in ended
    assert ended[child] != "run.completed"


async def test_a_child_in_its_own_kernel_gets_its_context_over_the_bridge(
    kernels: Callable[[str], KernelEnvironment],
) -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        task, turn = task_of(request), turn_of(request)
        if "ROOT" in task:
            if turn == 0:
                return fenced("import os\nr = rlm_query('CHILD: sum', {'xs': [1, 2, 3], 'pid': os.getpid()})\nprint(r)")
            return fenced("FINAL_VAR('r')")
        return fenced(
            "import os\nanswer.update(content=f\"{sum(context['xs'])} {context['pid'] != os.getpid()}\", ready=True)"
        )

    rlm = RLM(model=FunctionModel(reply), environment=kernels(sys.executable))
    try:
        run = await rlm.invoke("ROOT", context={})
        assert run.final_text == "6 True"  # the child ran in another process than the root's REPL
        assert rlm.children is not None
        assert rlm.children.size == 1
    finally:
        if rlm.children is not None:
            rlm.children.close()


# ---------------------------------------------------------------------------------------- partial answers
def _partials(rec: EventRecorder) -> list[RLMPartialAnswer]:
    return [e for e in rec.events if isinstance(e, RLMPartialAnswer)]


async def test_the_iteration_limit_ends_with_the_last_answer_content(environment: Environment) -> None:
    model = ScriptedModel([py("answer['content'] = 'about 40'"), py("print('still counting')"), py("FINAL(1)")])
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    rlm = RLM(model=model, environment=environment, limits=RLMLimits(max_iterations=2))
    with pytest.raises(LimitExceeded) as caught:
        await rlm.invoke_in_context(ctx, "Count.", context={})
    assert caught.value.limit == "rlm_iterations"
    assert caught.value.partial_answer == "about 40"  # type: ignore[attr-defined]
    (event,) = _partials(rec)
    assert (event.answer, event.source, event.error_type) == ("about 40", "answer", "LimitExceeded")


async def test_without_an_answer_the_last_output_is_extracted_and_marked() -> None:
    model = ScriptedModel([py("print('found 17 so far')"), py("x = 1"), py("FINAL(1)")])
    with pytest.raises(LimitExceeded) as caught:
        await RLM(model=model, environment="local", limits=RLMLimits(max_iterations=2)).invoke("Count.", context={})
    partial: str = caught.value.partial_answer  # type: ignore[attr-defined]
    assert partial.startswith("[partial: extracted from the last REPL output")
    assert partial.endswith("found 17 so far")
    assert caught.value.partial_source == "extracted"  # type: ignore[attr-defined]


async def test_a_token_budget_hit_mid_run_keeps_the_partial_answer() -> None:
    model = ScriptedModel([py("answer['content'] = 'half done'"), py("print(1)"), py("print(2)"), py("FINAL(1)")])
    policy = RunPolicy(limits=RunLimits(max_total_tokens=int(ROOT_USAGE.total_tokens * 2.5)))
    with pytest.raises(BudgetExceeded) as caught:
        await RLM(model=model, environment="local", policy=policy).invoke("Work.", context={})
    assert 1 <= len(model.requests) <= 3
    assert caught.value.partial_answer == "half done"  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------- sessions
@pytest.mark.parametrize("kind", ["local", pytest.param("kernel", marks=pytest.mark.kernel)])
async def test_a_three_run_session_uses_a_variable_the_first_run_made(kind: Literal["local", "kernel"]) -> None:
    logs = "INFO a\nERROR disk full\nINFO b\nERROR net down"
    model = ScriptedModel(
        [
            py(
                "hits = [l for l in logs.splitlines() if 'ERROR' in l]\nanswer.update(content=str(len(hits)), ready=True)"
            ),
            py("SHOW_VARS()"),
            py("answer.update(content='noted', ready=True)"),
            py("answer['content'] = hits[-1]\nanswer['ready'] = True"),
        ]
    )
    session = RLMSession(kind)
    rlm = RLM(model=model, environment="local")
    try:
        first = await rlm.invoke("How many errors?", context={"logs": logs}, session=session)
        second = await rlm.invoke("What do you have?", session=session)
        third = await rlm.invoke("The last error?", session=session)
    finally:
        session.close()
    assert (first.final_text, second.final_text, third.final_text) == ("2", "noted", "ERROR net down")
    assert session.runs == 3
    shown = model.requests[2].messages[-1].text  # run 2 saw run 1's variables (and was not ended by its answer)
    assert "hits: list, len 2" in shown
    assert "logs: str" in shown
    last = model.requests[-1].messages
    assert last[-1].text.startswith("Next task:\nThe last error?")
    assert next(m.text for m in last if isinstance(m, UserMessage)).startswith("Task:\nHow many errors?")
    assert sum(1 for m in last if m.role == "system") == 1


async def test_a_session_runs_one_task_at_a_time() -> None:
    session = RLMSession("local")
    rlm = RLM(model=ScriptedModel([py("FINAL(1)")]), environment="local")
    rlm.prepare("first", session=session)
    with pytest.raises(RLMError, match="running a task"):
        rlm.prepare("second", session=session)


# ---------------------------------------------------------------------------------------- typed answers
class Tally(pydantic.BaseModel):
    errors: int
    worst: str


async def test_a_typed_answer_is_validated_and_repaired_after_one_reask(environment: Environment) -> None:
    model = ScriptedModel(
        [
            py("answer.update(content={'errors': 'many'}, ready=True)"),  # wrong: not an int, worst missing
            py("answer['content'] = {'errors': 2, 'worst': 'disk full'}\nanswer['ready'] = True"),
        ]
    )
    run = await RLM(model=model, environment=environment, output_type=Tally).invoke("Tally.", context={})
    assert run.structured is not None
    assert run.structured.value == Tally(errors=2, worst="disk full")
    assert '"worst"' in model.requests[0].messages[0].text  # the schema is in the system prompt
    reask = model.requests[1].messages[-1].text
    assert "does not match Tally" in reask
    assert "errors" in reask
    assert "worst" in reask


async def test_a_typed_answer_that_fails_twice_ends_with_structured_output_error() -> None:
    model = ScriptedModel([py("FINAL({'errors': 'x'})"), py("FINAL('still wrong')"), py("FINAL(1)")])
    with pytest.raises(StructuredOutputError, match="after a re-ask"):
        await RLM(model=model, environment="local", output_type=Tally).invoke("Tally.", context={})
    assert len(model.requests) == 2


async def test_the_runs_deadline_keeps_the_partial_answer_set_before_it() -> None:
    model = ScriptedModel([py("answer['content'] = 'first half: 12'"), py("while True:\n    pass"), py("FINAL(1)")])
    with pytest.raises(RunTimeout) as caught:
        await RLM(model=model, environment="local").invoke("Work.", context={}, config=RunConfig(timeout_s=1.0))
    assert caught.value.partial_answer == "first half: 12"  # type: ignore[attr-defined]


async def test_a_long_session_is_compacted_near_the_window_and_keeps_its_repl() -> None:
    wide = "print('row ' * 700)"  # 2,800 characters of output per task
    script = []
    for i in range(5):
        script += [py(f"v{i} = {i}", wide), py("answer.update(content='ok', ready=True)")]
    model = ScriptedModel(
        [*script, py("answer.update(content=str(v0 + v4), ready=True)")],
        profile=ModelProfile(name="scripted", provider="test", context_window=4_000),
    )
    session = RLMSession("local")
    rlm = RLM(model=model, environment="local")
    for i in range(5):
        await rlm.invoke(f"Task {i}.", session=session)
    last = await rlm.invoke("Add v0 and v4.", session=session)
    assert last.final_text == "4"  # the REPL kept what the first task made
    full = sum(len(m.text) for m in session.messages)
    sent = max(sum(len(m.text) for m in r.messages) for r in model.requests)
    assert full > 14_000
    assert sent < 4_000 * 4  # the transcript was compacted to fit the window; the REPL was not


async def test_a_child_that_hits_a_limit_is_an_rlm_call_error_with_its_partial_answer() -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        task, turn = task_of(request), turn_of(request)
        if "ROOT" in task:
            if turn == 0:
                return fenced("try:\n    rlm_query('CHILD', [1, 2])\nexcept RLMCallError as e:\n    print(e)")
            return fenced("answer.update(content='gave up', ready=True)")
        return fenced("answer['content'] = 'halfway'")  # never ready: the child runs out of iterations

    model = FunctionModel(reply)
    run = await RLM(model=model, environment="local", limits=RLMLimits(max_iterations=2)).invoke("ROOT")
    assert run.final_text == "gave up"  # the parent went on
    (seen,) = [r.messages[-1].text for r in model.requests if "ROOT" in task_of(r) and turn_of(r) == 1]
    assert "RuntimeError: child run 0 failed: LimitExceeded" in seen
    assert "its partial answer: 'halfway'" in seen


async def test_code_written_for_the_official_implementation_runs_unchanged(environment: Environment) -> None:
    model = ScriptedModel(
        [
            py(
                "one = llm_query('count:' + 'ERROR ' * 3)\nmany = llm_query_batched(['count:ERROR', 'count:'])\n"
                'answer["content"] = f"{one} {many}"\nanswer["ready"] = True'
            )
        ]
    )
    run = await RLM(model=model, sub_model=sub_model(), environment=environment).invoke("Count.", context={})
    assert run.final_text == "3 ['1', '0']"
