"""The record keeps what the panes showed, collapsed: agents, tool calls, cost, steering; one set of counts."""

from __future__ import annotations

import re

import anyio
import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import AgentHarness, ModelPricing, SubAgent, Usage, tool
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_ok
from .test_record_markdown import math_dollars

pytestmark = pytest.mark.anyio


def _tides(session: NotebookSession) -> None:
    @tool
    def lookup(topic: str) -> str:
        """Look a figure up."""
        return f"{topic}: 0.5 GW (2023) | costs $1.2bn"

    sub_model = ScriptedModel(
        [
            ScriptedModel.tool_call("lookup", {"topic": "tidal"}, usage=Usage(input_tokens=100, output_tokens=10)),
            ScriptedModel.text("About 0.5 GW.", usage=Usage(input_tokens=120, output_tokens=8)),
        ]
    )
    researcher = SubAgent("researcher", AgentHarness(model=sub_model, tools=[lookup]), description="Researches.")
    session.register_tool(researcher.as_tool())
    session.register_model(
        "orchestrator",
        ScriptedModel(
            [
                ScriptedModel.tool_call(
                    "researcher", {"input": "tidal capacity?"}, usage=Usage(input_tokens=200, output_tokens=20)
                ),
                ScriptedModel.text("Tidal power: about 0.5 GW.", usage=Usage(input_tokens=300, output_tokens=12)),
            ]
        ),
    )


def test_a_finished_run_keeps_its_tree_tool_calls_and_the_dashboards_counts(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    _tides(session)
    session.context.costs.register_price("scripted", ModelPricing(input_per_mtok=1, output_per_mtok=2))
    run_ok(shell, "%%agent --model orchestrator --name tides\nHow much tidal power is there?")
    handle = last_run(shell)
    record = handle._repr_mimebundle_()
    markdown, plain = record["text/markdown"], record["text/plain"]
    header = handle.dashboard.summary_text()
    counts = re.search(r"(\d+) model calls · (\d+) tool calls", header)
    assert counts is not None
    assert counts.groups() == ("4", "2")
    assert f"[completed · {counts.group(0)}" in plain  # the record says what the dashboard said
    assert "<details><summary>details: 2 agents, 2 tool calls" in markdown
    assert "whole run tree, sub-agents included" in markdown
    block = markdown[markdown.index("<details>") : markdown.index("</details>")]
    assert "| tides | completed | 770 |" in block
    assert "└ researcher | completed | 238 |" in block
    assert '{"topic": "tidal"}' in block  # the sub-agent's call, with its arguments
    assert "0.5 GW (2023) | costs $1.2bn" in block  # and its result, in a fenced block
    assert "by researcher" in block
    assert "<code>display\\(tides\\.dashboard\\)</code>" in block
    assert math_dollars(markdown.replace("Tidal power: about 0.5 GW.", "")) == []
    assert block.count("```") % 2 == 0
    assert "tool calls (2):" in plain
    assert "researcher: completed" in plain


async def test_a_message_that_came_too_late_is_in_the_record(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("one", SlowModel(ScriptedModel(["The only answer."]), delay_s=0.5))
    run_ok(shell, "%%agent --model one --background --name late\nAnswer once.")
    handle = last_run(shell)
    controls = handle.dashboard.controls
    with anyio.fail_after(10):
        while not handle.dashboard.state.live_calls:  # noqa: ASYNC110 - plain state: its one model call started
            await anyio.sleep(0.01)
    controls.steer_text.value = "Only report the total, in $ please."
    controls.send.click()
    assert controls.sent == ["Only report the total, in $ please."]
    await handle.wait()
    record = handle._repr_mimebundle_()
    assert "not delivered (the run had no further step): Only report the total" in record["text/plain"]
    markdown = record["text/markdown"]
    assert (
        "*not delivered (the run had no further step):* Only report the total, in <code>\\$</code> please." in markdown
    )
    assert "- not delivered (the run had no further step): Only report" in markdown  # the steering list
    assert math_dollars(markdown.replace("The only answer.", "")) == []
