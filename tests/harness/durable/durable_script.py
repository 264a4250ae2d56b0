"""The tools and model of the kill-and-resume tests, shared by the child process and the notebook test.

``$DURABLE_FOLDER`` receives each tool's side-effect log; ``HANG_IN`` names a tool that, after its side
effect, signals ``in_tool`` and sleeps, so a test can SIGKILL the process there. The model is a pure
function of the transcript, so any process may serve any turn.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tinyagents_nb.harness import AssistantMessage, ModelRequest, ModelResponse, ToolCall, ToolMessage, Usage, tool

HANG_IN = {"name": ""}


def _effect(name: str) -> None:
    folder = Path(os.environ.get("DURABLE_FOLDER", "."))
    with open(folder / f"{name}.log", "a") as f:
        f.write("x\n")
        f.flush()
        os.fsync(f.fileno())
    if HANG_IN["name"] == name:
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


HELPER_PROMPT = "You are the helper: pay, look up, then report."


def _hang_in_model(where: str) -> None:
    if HANG_IN["name"] == where:
        folder = Path(os.environ.get("DURABLE_FOLDER", "."))
        (folder / "in_tool").write_text("model")
        time.sleep(60)


def tree_answer(request: ModelRequest) -> ModelResponse:
    """The parent delegates to the ``helper`` sub-agent once; the helper pays, looks up, then reports.

    With ``HANG_IN=model`` the helper's model hangs on its last turn (a stream cut off mid-way), with
    ``HANG_IN=parent`` the parent's does, after the helper finished.
    """
    usage = Usage(input_tokens=100, output_tokens=10)
    helper = any(getattr(m, "text", "") == HELPER_PROMPT for m in request.messages)
    if not helper:
        done = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not done:
            call = ToolCall(id="p1", name="helper", arguments={"input": "pay 5 and look up k"})
            return ModelResponse(message=AssistantMessage(tool_calls=[call]), usage=usage, model="function")
        _hang_in_model("parent")
        text = f"parent got: {done[0].text}"
        return ModelResponse(message=AssistantMessage(text=text), usage=usage, model="function")
    if "lookup" in {m.name for m in request.messages if isinstance(m, ToolMessage)}:
        _hang_in_model("model")
    return answer(request)
