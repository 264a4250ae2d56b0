from __future__ import annotations

import warnings
from decimal import Decimal
from typing import Any

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    BudgetExceeded,
    ConfigurationError,
    LimitExceeded,
    ModelPricing,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    SubAgent,
    Usage,
)
from tinyagents_nb.harness.runtime import CostUnknownWarning
from tinyagents_nb.harness.testkit import EventRecorder, FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio

U = Usage(input_tokens=1_000, output_tokens=100)
PRICE = ModelPricing(input_per_mtok=1_000, output_per_mtok=1_000)  # $1 per 1,000 tokens: easy arithmetic


class PricedModel(ScriptedModel):
    """A scripted model served by a provider whose prices come from the run's CostTracker (not free)."""

    @property
    def provider(self) -> str:
        return "acme"


def looping(n: int = 6, *, usage: Usage = U, model: type[ScriptedModel] = PricedModel) -> ScriptedModel:
    return model([ScriptedModel.tool_call("t", {}, usage=usage) for _ in range(n)] + ["done"])


def harness(model: ScriptedModel, **limits: Any) -> AgentHarness[None]:
    return AgentHarness(model=model, tools=[FakeTool("t", ["ok"])], policy=RunPolicy(limits=RunLimits(**limits)))


def priced_context() -> RunContext[None]:
    ctx = RunContext(config=RunConfig(run_id="root"))
    ctx.costs.register_price("acme:scripted", PRICE)
    return ctx


async def test_a_dollar_budget_refuses_the_request_before_it_is_sent() -> None:
    model = looping()
    ctx = priced_context()
    rec = EventRecorder(ctx.events)
    run, _ = await harness(model, max_cost_usd=2.201).invoke_with_status(ctx, "go")
    # each call costs $1.10; after two ($2.20), a third would pass $2.201 by its prompt alone
    assert model.calls == 2
    error = run.error
    assert isinstance(error, BudgetExceeded)
    assert isinstance(error, LimitExceeded)
    assert error.limit == "cost_usd"
    assert error.maximum == 2.201
    assert error.cost.total_usd == Decimal("2.2")
    assert error.usage.total_tokens == 2_200
    assert error.messages is run.messages
    assert len(run.messages) == 5
    assert run.status == "failed"
    assert run.usage.total_tokens == 2_200
    assert [(e.limit, e.maximum) for e in rec.of_kind("limit.reached")] == [("cost_usd", 2.201)]  # type: ignore[attr-defined]
    assert rec.kinds()[-1] == "run.failed"


async def test_a_token_budget_counts_the_estimated_prompt_and_output_cap() -> None:
    model = looping()
    ctx = priced_context()
    h = harness(model, max_total_tokens=2_201)
    run, _ = await h.invoke_with_status(ctx, "go")
    assert model.calls == 2  # 2,200 used; a third request's prompt would pass 2,201
    assert isinstance(run.error, BudgetExceeded)
    assert run.error.limit == "total_tokens"

    model = looping()
    capped = AgentHarness(
        model=model,
        tools=[FakeTool("t", ["ok"])],
        policy=RunPolicy(limits=RunLimits(max_total_tokens=3_000), max_output_tokens=2_000),
    )
    run, _ = await capped.invoke_with_status(priced_context(), "go")
    assert model.calls == 1  # the output cap counts: 1,100 used + 2,000 possible output > 3,000
    assert isinstance(run.error, BudgetExceeded)


async def test_max_input_tokens_per_request_refuses_a_large_prompt() -> None:
    model = looping(1)
    run, _ = await harness(model, max_input_tokens_per_request=50).invoke_with_status(priced_context(), "x " * 200)
    assert model.calls == 0
    assert isinstance(run.error, BudgetExceeded)
    assert run.error.limit == "input_tokens_per_request"
    model = looping(1)
    run, _ = await harness(model, max_input_tokens_per_request=5_000).invoke_with_status(priced_context(), "hi")
    assert run.ok
    assert model.calls == 2


async def test_budgets_bind_the_whole_tree_across_sub_agents() -> None:
    # the child harness sets no budget; it inherits the root's, and its spend counts towards it
    child_model = looping(5)
    child = SubAgent("helper", AgentHarness(model=child_model, tools=[FakeTool("t", ["ok"])]))
    root_model = PricedModel([ScriptedModel.tool_call("helper", {"input": "work"}, usage=U), "root done"])
    root = AgentHarness(
        model=root_model, tools=[child.as_tool()], policy=RunPolicy(limits=RunLimits(max_cost_usd=3.301))
    )
    ctx = priced_context()
    rec = EventRecorder(ctx.events)
    run, _ = await root.invoke_with_status(ctx, "go")
    # root $1.10 + child $1.10 + $1.10 = $3.30; the child's third request is refused inside the child,
    # reported to the root model as a limit signal; the root's next request is refused too
    assert child_model.calls == 2
    assert root_model.calls == 1
    assert isinstance(run.error, BudgetExceeded)
    assert run.error.anchor_run_id == "root"
    reached = rec.of_kind("limit.reached")
    assert [(e.limit, e.run_id == "root") for e in reached] == [("cost_usd", False), ("cost_usd", True)]  # type: ignore[attr-defined]
    assert run.cost is not None
    assert run.cost.total_usd == Decimal("3.3")


async def test_a_child_may_tighten_but_never_loosen_the_tree_budget() -> None:
    child_model = looping(5)
    child = SubAgent(
        "helper",
        AgentHarness(
            model=child_model,
            tools=[FakeTool("t", ["ok"])],
            policy=RunPolicy(limits=RunLimits(max_cost_usd=100)),  # looser: the root's still binds
        ),
    )
    root_model = PricedModel([ScriptedModel.tool_call("helper", {"input": "w"}, usage=U), "root done"])
    root = AgentHarness(
        model=root_model, tools=[child.as_tool()], policy=RunPolicy(limits=RunLimits(max_cost_usd=2.201))
    )
    run, _ = await root.invoke_with_status(priced_context(), "go")
    assert child_model.calls == 1  # $1.10 root + $1.10 child; another would pass the root's $2.201
    assert isinstance(run.error, BudgetExceeded)


@pytest.mark.parametrize("policy", ["refuse", "allow", "warn"])
async def test_unknown_prices_under_a_dollar_budget_follow_the_policy(policy: Any) -> None:
    model = looping(2)
    ctx = RunContext(config=RunConfig(run_id="root"))  # no price registered for acme:scripted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run, _ = await harness(model, max_cost_usd=1, unknown_price=policy).invoke_with_status(ctx, "go")
    budget_warnings = [w for w in caught if issubclass(w.category, CostUnknownWarning) and "budget" in str(w.message)]
    if policy == "refuse":
        assert model.calls == 0
        assert isinstance(run.error, BudgetExceeded)
        assert "price of model 'scripted' is unknown" in str(run.error)
    else:
        assert run.ok
        assert model.calls == 3
        assert len(budget_warnings) == (1 if policy == "warn" else 0)


async def test_free_and_unbudgeted_runs_are_untouched() -> None:
    model = looping(3, model=ScriptedModel)  # the testkit provider is known to be free
    run, _ = await harness(model, max_cost_usd=0.01).invoke_with_status(RunContext(), "go")
    assert run.ok
    assert model.calls == 4
    model = looping(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostUnknownWarning)  # the ledger's own warning: recorded as unknown
        run, _ = await harness(model).invoke_with_status(RunContext(), "go")  # no budget: no price needed
    assert run.ok
    assert model.calls == 4


def test_budget_limits_are_validated() -> None:
    with pytest.raises(ConfigurationError):
        RunLimits(max_cost_usd=-1)
    with pytest.raises(ConfigurationError):
        RunLimits(max_cost_usd="lots")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        RunLimits(max_total_tokens=0)
    with pytest.raises(ConfigurationError):
        RunLimits(unknown_price="ignore")  # type: ignore[arg-type]
    assert RunLimits(max_cost_usd=0.1).max_cost_usd == Decimal("0.1")
    assert not RunLimits().has_budget
    assert RunLimits(max_input_tokens_per_request=10).has_budget
