"""The budget bars beside the cost: spend against each cap, kept after the run ends."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tinyagents_nb.harness import AgentHarness, ModelPricing, RunLimits, RunPolicy, Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog

pytestmark = pytest.mark.anyio


def _harness(limits: RunLimits) -> AgentHarness[None]:
    answer = ScriptedModel.text("hello", usage=Usage(input_tokens=300, output_tokens=100))
    return AgentHarness(model=ScriptedModel([answer]), policy=RunPolicy(limits=limits))


async def test_a_token_budget_shows_as_a_bar_and_stays_after_the_run(comms: CommLog) -> None:
    stream = _harness(RunLimits(max_total_tokens=1_000)).invoke_streaming("hi")
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    assert stream.context.budgets == ()  # the run has unbound its budgets...
    [row] = dash.budget.widget.children  # ...but the dashboard kept them
    bar, label = row.children
    assert bar.value == pytest.approx(0.4)
    assert "run tree budget: 400 of 1,000 tokens (40%)" in label.value
    assert dash.budget.widget.layout.display is None


async def test_a_dollar_budget_counts_the_priced_spend(comms: CommLog) -> None:
    stream = _harness(RunLimits(max_cost_usd=0.01)).invoke_streaming("hi")
    stream.context.costs.register_price(
        "scripted", ModelPricing(input_per_mtok=Decimal("10"), output_per_mtok=Decimal("20"))
    )
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    [row] = dash.budget.widget.children
    bar, label = row.children
    assert bar.value == pytest.approx(0.5)  # 300 x $10/M + 100 x $20/M = $0.005 of $0.01
    assert bar.bar_style == "success"
    assert "$0.005000 of $0.010000 (50%)" in label.value


async def test_no_budget_takes_no_room(comms: CommLog) -> None:
    stream = _harness(RunLimits()).invoke_streaming("hi")
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    assert dash.budget.widget.children == ()
    assert dash.budget.widget.layout.display == "none"
