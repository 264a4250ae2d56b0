"""The model and tools of the real-kernel kill trials, imported inside the kernel (``setup()``).

The run calls ``charge`` (not idempotent), ``lookup`` (idempotent) and ``send`` (not idempotent, needs
an approval), then answers. Each side effect is appended to ``$DURABLE_FOLDER/<tool>.log`` and fsynced
before anything else happens, so the test counts exactly what took effect. ``phase`` names the moment
the run is in (a model stream, a tool, an approval wait), so a trial can SIGKILL the kernel there. The
model streams slowly and is a pure function of the transcript, so a restarted kernel serves any turn.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

from tinyagents_nb.harness import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
    Usage,
    tool,
)
from tinyagents_nb.harness.models import ModelStreamItem
from tinyagents_nb.harness.testkit import FunctionModel
from tinyagents_nb.magics import get_session

FOLDER = Path(os.environ.get("DURABLE_FOLDER", "."))
PAUSE_S = 0.4


def _phase(text: str) -> None:
    (FOLDER / "phase.tmp").write_text(text)
    os.replace(FOLDER / "phase.tmp", FOLDER / "phase")


def _effect(name: str) -> None:
    with open(FOLDER / f"{name}.log", "a") as f:
        f.write("x\n")
        f.flush()
        os.fsync(f.fileno())
    _phase(f"tool {name}")
    time.sleep(PAUSE_S)


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


def _ask(ctx: Any, arguments: Mapping[str, Any]) -> bool:
    _phase("approval send")
    return True


@tool(requires_approval=_ask)
def send(to: str) -> str:
    """Send the receipt (not safe to repeat; a person approves it)."""
    _effect("send")
    return f"sent to {to}"


def answer(request: ModelRequest) -> ModelResponse:
    done = {m.name for m in request.messages if isinstance(m, ToolMessage)}
    usage = Usage(input_tokens=100, output_tokens=10)
    for call in (
        ToolCall(id="c1", name="charge", arguments={"amount": 5}),
        ToolCall(id="c2", name="lookup", arguments={"key": "k"}),
        ToolCall(id="c3", name="send", arguments={"to": "ann"}),
    ):
        if call.name not in done:
            return ModelResponse(message=AssistantMessage(tool_calls=[call]), usage=usage, model="trial")
    return ModelResponse(message=AssistantMessage(text="all done, nothing left to do"), usage=usage, model="trial")


class SlowStream(FunctionModel):
    """Streams its answer a few characters at a time, so a kill can land mid-stream."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        _phase(f"stream {len(self.requests) + 1}")
        async for item in super().stream(request):
            await asyncio.sleep(0.03)
            yield item


def setup() -> None:
    session = get_session()
    session.register_model("trial", SlowStream(answer, model_name="trial", chunk_size=4))
    for t in (charge, lookup, send):
        session.register_tool(t)
