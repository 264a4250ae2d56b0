"""Arize Phoenix reads our spans back (opt-in: ``TINYAGENTS_PHOENIX_URL=http://127.0.0.1:6006``).

Phoenix is too heavy for the suite (about 280 packages; its server took 57 s to start on the shared
2-core machine), so this runs only against a Phoenix someone started (``phoenix serve``); the
default suite proves the wire format with the protobuf receiver in ``test_otel_export.py``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid
from typing import Any

import pytest

from tinyagents_nb.harness import AgentHarness, RunConfig, RunContext, SubAgent
from tinyagents_nb.harness.observability import OTelSink
from tinyagents_nb.harness.testkit import ScriptedModel

PHOENIX = os.environ.get("TINYAGENTS_PHOENIX_URL", "")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not PHOENIX.startswith("http://127.0.0.1"), reason="set TINYAGENTS_PHOENIX_URL to a local Phoenix"
    ),
]


def phoenix_spans(thread: str, want: int) -> list[dict[str, Any]]:
    """The spans of the trace whose root carries ``session.id == thread`` (once ``want`` arrived)."""
    deadline = time.monotonic() + 20
    while True:
        with urllib.request.urlopen(f"{PHOENIX}/v1/projects/default/spans?limit=1000") as reply:
            every = json.load(reply)["data"]
        roots = [s for s in every if (s.get("attributes") or {}).get("session.id") == thread and not s["parent_id"]]
        trace = roots[0]["context"]["trace_id"] if roots else None
        spans = [s for s in every if s["context"]["trace_id"] == trace]
        if len(spans) >= want or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


async def test_phoenix_shows_the_agent_tree_with_its_kinds() -> None:
    thread = f"phoenix-{uuid.uuid4().hex[:8]}"
    sink = OTelSink.otlp(PHOENIX, metrics=False)
    ctx: RunContext[None] = RunContext(config=RunConfig(thread_id=thread))
    ctx.events.add_listener(sink)
    helper = SubAgent("helper", AgentHarness(model=ScriptedModel(["42"], model_name="small")))
    lead: AgentHarness[None] = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("helper", {"input": "x"}), "done"], model_name="big"),
        tools=[helper.as_tool()],
        name="lead",
    )
    await lead.invoke_in_context(ctx, "go")
    assert sink.force_flush()
    sink.shutdown()
    spans = phoenix_spans(thread, 5)
    by_name = {s["name"]: s for s in spans}
    assert {(s["name"], s["span_kind"]) for s in spans} >= {
        ("invoke_agent lead", "AGENT"),
        ("execute_tool helper", "TOOL"),
        ("invoke_agent helper", "AGENT"),
        ("chat small", "LLM"),
    }
    assert by_name["invoke_agent helper"]["parent_id"] == by_name["execute_tool helper"]["context"]["span_id"]
