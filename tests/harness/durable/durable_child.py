"""A harness run in its own process, for the kill-and-resume tests (``python durable_child.py DIR MODE``).

MODE ``run`` starts a run that hangs inside the tool named by ``$HANG_IN`` (after its side effect),
so the test can SIGKILL it there; MODE ``resume`` resumes the interrupted run and prints its outcome
as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["DURABLE_FOLDER"] = sys.argv[1]

from durable_script import HANG_IN, HELPER_PROMPT, answer, charge, lookup, tree_answer

from tinyagents_nb.harness import AgentHarness, AssistantMessage, RunLimits, RunPolicy, SubAgent
from tinyagents_nb.harness.durable import DurableJournal, RunStore
from tinyagents_nb.harness.testkit import FunctionModel

folder = Path(sys.argv[1])
mode = sys.argv[2]
HANG_IN["name"] = os.environ.get("HANG_IN", "") if mode == "run" else os.environ.get("HANG_RESUME", "")

limit = int(os.environ.get("MAX_TOKENS", "0")) or None
store = RunStore(folder / "runs.sqlite")
tree = os.environ.get("TREE") == "1"  # the parent delegates the tools to a `helper` sub-agent
tools: list[Any] = [charge, lookup]
if tree:
    helper = AgentHarness(model=FunctionModel(tree_answer), tools=tools)
    tools = [SubAgent("helper", helper, system_prompt=HELPER_PROMPT).as_tool()]
harness: AgentHarness[None] = AgentHarness(
    model=FunctionModel(tree_answer if tree else answer),
    tools=tools,
    middleware=[DurableJournal(store, model="function")],
    policy=RunPolicy(limits=RunLimits(max_total_tokens=limit)),
)
if mode == "run":
    harness.run_sync("pay and look up")
else:
    interrupted = [r for r in store.runs() if r.status == "interrupted"]
    try:
        run = harness.resume_sync(interrupted[0].run_id, store=store)
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        sys.exit(0)
    print(
        json.dumps(
            {
                "run_id": run.run_id,
                "final_text": run.final_text,
                "total_tokens": run.usage.total_tokens,
                "messages": [
                    [type(m).__name__, getattr(m, "text", ""), getattr(m, "tool_call_id", None)] for m in run.messages
                ],
                "calls": [c.id for m in run.messages if isinstance(m, AssistantMessage) for c in m.tool_calls],
            }
        )
    )
