"""A system prompt written for the official RLM implementation works unchanged, and so does the code it teaches.

The prompt below is written here in the official prompt's conventions (its names and signatures,
``repl`` fences, print-only output, the ``answer`` dict, children whose ``context`` is their
prompt); the scripted replies are code a model following it writes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tinyagents_nb.harness import ConfigurationError, ModelRequest, ModelResponse, SystemMessage
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.rlm import RLM, Environment

from ._scripts import sub_model
from .test_rlm_recursion import task_of, turn_of

pytestmark = pytest.mark.anyio

OFFICIAL_STYLE = """\
You answer a query over a `context` variable held in a Python REPL; write code in ```repl blocks.
Available: `llm_query(prompt, model=None) -> str`, `llm_query_batched(prompts, model=None) -> list[str]`,
`rlm_query(prompt, model=None) -> str` (a child RLM whose `context` is the prompt),
`rlm_query_batched(prompts, model=None)`, `SHOW_VARS() -> str`, and a dict `answer` initialised to
{"content": "", "ready": False}. Only print(...) output is shown to you. When done, set
answer["content"] and answer["ready"] = True inside a ```repl block.
"""

LOGS = "\n".join(["INFO boot", "ERROR disk", "INFO ok", "ERROR net", "ERROR fan", "INFO bye"])


def repl(code: str) -> ModelResponse:
    return ScriptedModel.text(f"I will look at the context first.\n```repl\n{code}\n```\n")


def official_model() -> FunctionModel:
    def reply(request: ModelRequest) -> ModelResponse:
        task, turn = task_of(request), turn_of(request)
        if "Recount" in task:  # a child: its task is in its `context`, as official children read it
            return repl('n = context.count("ERROR ")\nanswer["content"] = str(n)\nanswer["ready"] = True')
        script = [
            "print(SHOW_VARS())\nprint(type(context).__name__, len(context))",
            "lines = context.splitlines()\n"
            "counts = llm_query_batched([f'count:{l}' for l in lines], model='gpt-5-mini')\n"
            "one = llm_query('count:' + context, model=None)\nprint(counts, one)",
            "check = rlm_query('Recount these: ' + ' '.join(l for l in lines if 'ERROR' in l), "
            "model='gpt-5')\nprint(check)",
            'answer["content"] = f"{sum(int(c) for c in counts)} errors (checked: {check})"\nanswer["ready"] = True',
        ]
        return repl(script[turn])

    return FunctionModel(reply, model_name="root")


@pytest.fixture
def rlm(environment: Environment) -> Iterator[RLM]:
    made = RLM(model=official_model(), sub_model=sub_model(), environment=environment, system_prompt=OFFICIAL_STYLE)
    yield made
    if made.children is not None:
        made.children.close()


async def test_an_official_style_prompt_and_its_code_run_unchanged(rlm: RLM) -> None:
    run = await rlm.invoke("How many ERROR lines?", context={"context": LOGS})
    assert run.final_text == "3 errors (checked: 3)"
    model = rlm.model
    assert isinstance(model, FunctionModel)
    root = [r for r in model.requests if "Recount" not in task_of(r)]
    system = root[0].messages[0]
    assert isinstance(system, SystemMessage)
    assert system.text == OFFICIAL_STYLE  # as given: not formatted, nothing of ours added
    shown = root[1].messages[-1].text
    # SHOW_VARS() returns the text (print shows it once, no "None" after it)
    assert shown == f"context: str, len {len(LOGS)}\nanswer: dict, len 2\nstr {len(LOGS)}"
    assert root[2].messages[-1].text == "['0', '1', '0', '1', '1', '0'] 3"  # model= is accepted (and ignored)
    child = next(r for r in model.requests if "Recount" in task_of(r))
    assert child.messages[0].text == OFFICIAL_STYLE  # children get the same prompt
    assert "- `context`: str, 45 characters" in child.messages[1].text  # and their prompt as `context`


async def test_show_vars_as_a_blocks_last_line_shows_the_list_not_a_quoted_string(environment: Environment) -> None:
    model = ScriptedModel([repl("rows = [1, 2]\nSHOW_VARS()"), repl("answer.update(content='ok', ready=True)")])
    await RLM(model=model, environment=environment).invoke("Vars?", context={})
    shown = model.requests[1].messages[-1].text
    assert shown == "answer: dict, len 2\nrows: list, len 2"  # not quoted, no kernel names


def test_an_empty_system_prompt_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="system_prompt is empty"):
        RLM(model=ScriptedModel(["x"]), environment="local", system_prompt="  ")
