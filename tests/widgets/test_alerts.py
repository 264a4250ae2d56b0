"""Guardrail trips and limits reached: named, with why, in the dashboard's header and transcript and its log."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    BudgetExceeded,
    GuardrailTripped,
    RunConfig,
    RunLimits,
    RunPolicy,
    RunTimeout,
    Usage,
)
from tinyagents_nb.harness.middleware import GuardrailsMiddleware, OutputGuardrail, ToolGuardrail
from tinyagents_nb.harness.testkit import FakeTool, ScriptedModel, SlowModel
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog, row_text

pytestmark = pytest.mark.anyio


def notes(dash: RunDashboard) -> list[str]:
    return [row.value for row in dash.transcript.widget.children if 'class="ta-note"' in getattr(row, "value", "")]


async def test_a_guardrail_that_stops_the_run_is_named_in_the_header(comms: CommLog) -> None:
    guard = OutputGuardrail("no_secrets", lambda ctx, text: "mentions a password" if "password" in text else None)
    harness = AgentHarness(
        model=ScriptedModel(["the password is hunter2"]), middleware=[GuardrailsMiddleware(output=[guard])]
    )
    dash = RunDashboard(harness.invoke_streaming("tell me"))
    await dash.wait_flushed()
    assert isinstance(dash.state.error, GuardrailTripped)
    header = dash.header.widget.value
    assert "⛔ guardrail &#x27;no_secrets&#x27; tripped on the output (stopped the run)" in header
    assert "mentions a password" in header  # in the error box (why), once
    assert any("tripped on the output (stopped the run): mentions a password" in note for note in notes(dash))
    _, _, (alert,) = dash.log_snapshot()
    assert (alert.kind, alert.why) == ("guardrail", "mentions a password")


async def test_a_rejected_tool_result_is_an_alert_while_the_run_goes_on(comms: CommLog) -> None:
    guard = ToolGuardrail(
        "no_pii", check_result=lambda ctx, call, result: "contains an email address", on_trip="reject"
    )
    harness = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("lookup", {"q": "x"}), "ok then"]),
        tools=[FakeTool("lookup", ["bob@example.com"])],
        middleware=[GuardrailsMiddleware(tools=[guard])],
    )
    dash = RunDashboard(harness.invoke_streaming("find"))
    await dash.wait_flushed()
    assert dash.state.terminal == "completed"
    header = dash.header.widget.value
    assert (
        "⛔ guardrail &#x27;no_pii&#x27; tripped on the tool output of `lookup` (withheld the result): "
        "contains an email address" in header
    )


async def test_a_budget_refusal_names_the_limit_and_says_why(comms: CommLog) -> None:
    usage = Usage(input_tokens=80, output_tokens=10)
    model = ScriptedModel([ScriptedModel.tool_call("lookup", {"q": "x"}, usage=usage), "never sent"])
    harness = AgentHarness(
        model=model,
        tools=[FakeTool("lookup", ["found"])],
        policy=RunPolicy(limits=RunLimits(max_total_tokens=100)),
    )
    dash = RunDashboard(harness.invoke_streaming("go"))
    await dash.wait_flushed()
    assert isinstance(dash.state.error, BudgetExceeded)
    header = dash.header.widget.value
    assert "⛔ limit reached: token budget of 100 (total_tokens)" in header
    assert "this run and its sub-agents used 90 of 100 tokens" in header  # the error box says why
    _, _, (alert,) = dash.log_snapshot()
    assert alert.kind == "limit"
    assert alert.why.startswith("this run and its sub-agents used 90 of 100 tokens")  # the error explains it
    assert alert.text().startswith(
        "⛔ limit reached: token budget of 100 (total_tokens): this run and its sub-agents used 90"
    )
    assert any("⛔ limit reached: token budget of 100 (total_tokens)" in note for note in notes(dash))


async def test_a_run_out_of_time_names_the_time_limit_and_why(comms: CommLog) -> None:
    harness = AgentHarness(model=SlowModel(ScriptedModel(["late"]), delay_s=2.0))
    dash = RunDashboard(harness.invoke_streaming("go", config=RunConfig(timeout_s=0.2)))
    await dash.wait_flushed()
    assert isinstance(dash.state.error, RunTimeout)
    _, _, (alert,) = dash.log_snapshot()
    assert alert.what == "limit reached: time limit of 0.2 s (wall_clock)"
    assert alert.why  # RunTimeout's message explains the limit.reached event
    assert "⛔ limit reached: time limit of 0.2 s (wall_clock)" in dash.header.widget.value


async def test_a_streamed_answer_a_guardrail_blocks_is_withdrawn_from_the_dashboard(comms: CommLog) -> None:
    guard = OutputGuardrail("no_secrets", lambda ctx, text: "mentions a password" if "password" in text else None)
    harness = AgentHarness(
        model=ScriptedModel(["the password is hunter2"], chunk_size=4),
        middleware=[GuardrailsMiddleware(output=[guard])],
    )
    dash = RunDashboard(harness.invoke_streaming("tell me"))
    await dash.wait_flushed()
    assert isinstance(dash.state.error, GuardrailTripped)
    rows = dash.transcript.widget.children
    shown = " ".join(row_text(row) for row in rows)
    assert "hunter2" not in shown  # streamed, then retracted: hidden, not struck through
    assert "answer withdrawn" in shown
    assert "hunter2" not in dash.transcript.text()
    assert "hunter2" not in dash.summary_text()
