"""A harness run in its own process, for the kill-and-resume tests (``python durable_child.py DIR MODE``).

MODE ``run`` starts a run that hangs inside the tool named by ``$HANG_IN`` (after its side effect),
so the test can SIGKILL it there; MODE ``resume`` resumes the interrupted run and prints its outcome
as JSON. The model is a pure function of the transcript, so either process may serve any turn.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    RunLimits,
    RunPolicy,
    ToolCall,
    ToolMessage,
    Usage,
    tool,
)
from tinyagents_nb.harness.durable import DurableJournal, RunStore
from tinyagents_nb.harness.testkit import FunctionModel

folder = Path(sys.argv[1])
mode = sys.argv[2]
hang_in = os.environ.get("HANG_IN", "") if mode == "run" else ""


def _effect(name: str) -> None:
    with open(folder / f"{name}.log", "a") as f:
        f.write("x\n")
        f.flush()
        os.fsync(f.fileno())
    if hang_in == name:
        (folder / "in_tool").write_text(name)
        time.sleep(60)


@tool
def charge(amount: int) -> str:
    """Charge the card (not safe to repeat)."""
    _effect("charge")
    return f"charged {amount}"


@tool(idempotent=True)
def lookup(key: str) -> str:
    """Read a value (safe to repeat)."""
    _effect("lookup")
    return f"{key}=42"


def answer(request: ModelRequest) -> ModelResponse:
    done = {m.name for m in request.messages if isinstance(m, ToolMessage)}
    usage = Usage(input_tokens=100, output_tokens=10)
    if "charge" not in done:
        call = ToolCall(id="c1", name="charge", arguments={"amount": 5})
    elif "lookup" not in done:
        call = ToolCall(id="c2", name="lookup", arguments={"key": "k"})
    else:
        return ModelResponse(message=AssistantMessage(text="all done"), usage=usage, model="function")
    return ModelResponse(message=AssistantMessage(tool_calls=[call]), usage=usage, model="function")


limit = int(os.environ.get("MAX_TOKENS", "0")) or None
store = RunStore(folder / "runs.sqlite")
harness: AgentHarness[None] = AgentHarness(
    model=FunctionModel(answer),
    tools=[charge, lookup],
    middleware=[DurableJournal(store)],
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
