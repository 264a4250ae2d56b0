"""An RLM run in its own process, for the RLM kill-and-resume tests (``python durable_rlm_child.py DIR MODE``).

MODE ``run`` starts an RLM run (in-process REPL) whose second code block hangs after its side effect,
so the test can SIGKILL the process there; MODE ``resume`` resumes the interrupted run and prints
its outcome as JSON. The root model is a pure function of the transcript, so either process serves it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tinyagents_nb.harness import AssistantMessage, ModelRequest, ModelResponse, Usage, UserMessage
from tinyagents_nb.harness.durable import RunStore
from tinyagents_nb.harness.testkit import FunctionModel
from tinyagents_nb.rlm import RLM, LocalEnvironment, rlm_journal

folder = Path(sys.argv[1])
mode = sys.argv[2]
USAGE = Usage(input_tokens=100, output_tokens=10)


def effect(name: str) -> None:
    with open(folder / f"{name}.log", "a") as f:
        f.write("x\n")


def hang() -> None:
    if mode == "run":
        (folder / "in_tool").write_text("repl")
        time.sleep(60)


FIRST = "```python\nx = 40 + 1\nreply = llm('hi')\neffect('one')\nprint(x, reply)\n```"
SECOND = "```python\ny = x * 2\neffect('two')\nhang()\n```"
AFTER = "```python\nx = 40 + 1\nanswer = {'content': str(x + 1), 'ready': True}\n```"


def root(request: ModelRequest) -> ModelResponse:
    texts = [m.text for m in request.messages if isinstance(m, UserMessage)]
    turns = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
    if any("namespace is not saved" in t for t in texts):
        text = AFTER
    else:
        text = FIRST if turns == 0 else SECOND
    return ModelResponse(message=AssistantMessage(text=text), usage=USAGE, model="function")


def sub(request: ModelRequest) -> ModelResponse:
    return ModelResponse(message=AssistantMessage(text="hello"), usage=Usage(input_tokens=5, output_tokens=2))


store = RunStore(folder / "runs.sqlite")
rlm = RLM(
    model=FunctionModel(root),
    sub_model=FunctionModel(sub, model_name="sub"),
    environment=LocalEnvironment(),
    middleware=[rlm_journal(store, model="function")],
)
context = {"effect": effect, "hang": hang}
if mode == "run":
    rlm.run_sync("compute the answer", context=context)
else:
    import asyncio

    (interrupted,) = [r for r in store.runs() if r.status == "interrupted"]
    run = asyncio.run(rlm.resume(interrupted.run_id, store=store, context=context))
    notes = [m.text for m in run.messages if isinstance(m, UserMessage) and "namespace is not saved" in m.text]
    print(
        json.dumps(
            {
                "final_text": run.final_text,
                "total_tokens": run.usage.total_tokens,
                "notes": notes,
                "messages": [type(m).__name__ for m in run.messages],
                "run_tokens": [r.usage.total_tokens for r in store.runs()],
            }
        )
    )
