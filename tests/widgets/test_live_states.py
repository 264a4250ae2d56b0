"""What the live dashboard says between events (issue 24, item 8): no "waiting for the model's first
words…" once a call came back with only tool calls or while an approval card waits, the header
counts a model call while its text streams, and a finished run's Cost pane never says "yet"."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import AgentHarness, tool
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel, StreamingMock
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog, until

pytestmark = pytest.mark.anyio

WAITING = "waiting for the model"


@tool
def lookup(topic: str) -> str:
    """Look a figure up."""
    return f"{topic}: 0.5 GW"


@tool(requires_approval=True)
def wipe(table: str) -> str:
    """Delete every row."""
    return "wiped"


def _transcript(dash: RunDashboard) -> str:
    return " ".join(str(getattr(w, "value", "")) for w in dash.transcript.widget.children)


async def test_no_waiting_placeholder_after_a_tool_only_call_while_the_next_call_thinks(comms: CommLog) -> None:
    model = SlowModel(
        ScriptedModel([ScriptedModel.tool_call("lookup", {"topic": "tidal"}), "About 0.5 GW."]), delay_s=0.6
    )
    dash = RunDashboard(AgentHarness(model=model, tools=[lookup]).invoke_streaming("How much?"))
    dash.flush()
    assert WAITING in _transcript(dash)  # before anything came back: the placeholder is right
    dash.start()
    await until(lambda: dash.tools.count == 1 and all(r.status == "ok" for r in dash.tools.rows.values()))
    dash.flush()  # the second call is still thinking (0.6 s), no text has arrived: the tool call is the news
    assert dash.state.terminal is None
    assert WAITING not in _transcript(dash)
    assert "2 model calls · 1 tool call" in dash.header.widget.value  # the second counts from its start
    await dash.wait_flushed()


async def test_no_waiting_placeholder_under_an_approval_card(comms: CommLog) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("wipe", {"table": "logs"}), "Done."])
    dash = RunDashboard(AgentHarness(model=model, tools=[wipe]).invoke_streaming("Clean up."))
    dash.start()
    await until(lambda: dash.approvals.pending == 1)
    dash.flush()
    assert "● awaiting approval" in dash.header.widget.value
    assert WAITING not in _transcript(dash)
    (card,) = dash.approvals.cards.values()
    card.approve.click()
    await dash.wait_flushed()


async def test_the_header_counts_the_call_whose_text_is_streaming(comms: CommLog) -> None:
    stream = AgentHarness(model=StreamingMock("word " * 400, chunk_delay_s=0.01)).invoke_streaming("talk")
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: dash.transcript.text().count("word") >= 10)
    dash.flush()
    header = dash.header.widget.value
    assert dash.state.terminal is None
    assert "1 model call · 0 tool calls" in header, header  # was "0 model calls" until the call ended
    dash.controls.stop.click()
    await dash.wait_flushed()


async def test_a_finished_runs_cost_pane_never_says_yet(comms: CommLog) -> None:
    dash = RunDashboard(AgentHarness(model=ScriptedModel(["hi"])).invoke_streaming("x"))
    assert "no billed model call yet" in dash.costs.widget.value  # live and nothing billed: "yet" is right
    await dash.wait_flushed()
    assert dash.state.terminal == "completed"
    assert "yet" not in dash.costs.widget.value
    assert "nothing was billed" in dash.costs.widget.value
