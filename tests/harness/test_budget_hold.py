"""Budgets hold under concurrency: reservations in flight count, refused requests are never sent.

Each fake model counts the requests that reached it and reports usage the way a provider does;
the assertions read the recorded spend back from the trackers and the reservation events.
"""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    BudgetExceeded,
    ModelPricing,
    ModelRequest,
    ModelResponse,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    SubAgent,
    TreeBudget,
    Usage,
)
from tinyagents_nb.harness.events import BudgetReconciled, BudgetReserved
from tinyagents_nb.harness.models import TokenEstimator
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio

PRICE = ModelPricing(input_per_mtok=1_000, output_per_mtok=1_000)  # $0.001 per token
OUT = 40  # every request caps its output at this


class Priced(FunctionModel):
    """A provider with a price (the testkit's own provider is free)."""

    @property
    def provider(self) -> str:
        return "acme"


def worker(name: str = "worker", *, extra_output: int = 0, delay: float = 0.01) -> Priced:
    """Answers after ``delay``, reporting the prompt it was sent and ``OUT + extra_output`` output tokens."""
    estimator = TokenEstimator.for_model(name)

    async def answer(request: ModelRequest) -> ModelResponse:
        await anyio.sleep(delay)  # in flight long enough for every sibling to be checked meanwhile
        usage = Usage(input_tokens=estimator.estimate(request.messages), output_tokens=OUT + extra_output)
        return ModelResponse(message=AssistantMessage(text="done"), usage=usage, model=name)

    return Priced(answer, model_name=name)


def fan_out(n: int, sub: Priced, **limits: Any) -> tuple[AgentHarness[None], ScriptedModel]:
    """A root that calls ``n`` sub-agents at once (one turn, ``n`` tool calls), each making one request."""
    child = SubAgent("helper", AgentHarness(model=sub, policy=RunPolicy(max_output_tokens=OUT)))
    root_model = ScriptedModel(
        [ScriptedModel.tool_calls([("helper", {"input": f"part {i}"}) for i in range(n)]), "root done"]
    )
    root = AgentHarness(
        model=root_model,
        tools=[child.as_tool()],
        policy=RunPolicy(limits=RunLimits(max_tool_calls=n, **limits), max_output_tokens=OUT),
    )
    return root, root_model


def context() -> tuple[RunContext[None], EventRecorder]:
    ctx = RunContext(config=RunConfig(run_id="root"))
    ctx.costs.register_price("acme:worker", PRICE)
    return ctx, EventRecorder(ctx.events)


def overshoot(rec: EventRecorder) -> tuple[int, Decimal]:
    """How far answers went past their own reservations, in tokens and dollars (the documented bound)."""
    done = [e for e in rec.events if isinstance(e, BudgetReconciled)]
    tokens = sum(max(e.tokens - e.reserved_tokens, 0) for e in done)
    usd = sum((max((e.usd or Decimal(0)) - (e.reserved_usd or Decimal(0)), Decimal(0)) for e in done), Decimal(0))
    return tokens, usd


async def test_twenty_concurrent_sub_agents_stay_within_a_token_budget() -> None:
    sub = worker()
    root, _ = fan_out(20, sub, max_total_tokens=600)
    ctx, rec = context()
    run, _ = await root.invoke_with_status(ctx, "go")
    reserved = [e for e in rec.events if isinstance(e, BudgetReserved)]
    assert 0 < sub.calls < 20  # the cap let a few through and refused the rest before sending them
    assert len([e for e in reserved if e.run_id != "root"]) == sub.calls  # one reservation per request sent
    extra, _ = overshoot(rec)
    assert ctx.usage.total().total_tokens <= 600 + extra  # the documented bound
    subs = [e for e in rec.events if isinstance(e, BudgetReconciled) and e.run_id != "root"]
    assert all(e.tokens <= e.reserved_tokens for e in subs)  # the workers stayed within their reservations
    # the root's fake reports no usage: its estimate counts the 20 calls' JSON, past its output cap
    assert ctx.usage.total().total_tokens > 600 - 2 * (OUT + 20)  # the cap was used, not refused wholesale
    assert isinstance(run.error, BudgetExceeded)
    refusals = [e for e in rec.events if e.kind == "limit.reached"]
    assert len(refusals) == 20 - sub.calls + 1  # each refused sub-agent, then the root's next request
    assert ctx.usage.holds.tokens("root") == 0  # every reservation was given back


async def test_twenty_concurrent_sub_agents_stay_within_a_dollar_budget_plus_the_overshoot() -> None:
    sub = worker(extra_output=15)  # answers run past their output cap: the only way past the budget
    root, _ = fan_out(20, sub, max_cost_usd=0.6)
    ctx, rec = context()
    run, _ = await root.invoke_with_status(ctx, "go")
    assert 0 < sub.calls < 20
    spent = ctx.costs.total().known_usd
    _, extra = overshoot(rec)
    assert extra > 0
    assert spent <= Decimal("0.6") + extra  # the documented bound
    assert spent > Decimal("0.6") - Decimal("0.2")  # and the cap was actually used, not refused wholesale
    assert isinstance(run.error, BudgetExceeded)
    assert ctx.usage.holds.usd("root") == 0


async def test_without_reservations_the_fan_out_would_have_run_away() -> None:
    # the same fan-out with a budget large enough for all: every sub-agent is sent, spend is 20 calls'
    sub = worker()
    root, _ = fan_out(20, sub, max_total_tokens=100_000)
    ctx, _ = context()
    run, _ = await root.invoke_with_status(ctx, "go")
    assert run.ok
    assert sub.calls == 20
    per_call = ctx.usage.total().total_tokens / 21
    assert per_call * 20 > 600  # so 600 above really bound the tree, not the fan-out's size


async def test_a_refusal_says_what_was_spent_and_how_to_raise_the_limit() -> None:
    sub = worker()
    harness = AgentHarness(model=sub, policy=RunPolicy(limits=RunLimits(max_cost_usd=0.02), max_output_tokens=OUT))
    ctx, _ = context()
    run, _ = await harness.invoke_with_status(ctx, "go")
    assert sub.calls == 0
    error = run.error
    assert isinstance(error, BudgetExceeded)
    assert error.limit == "cost_usd"
    assert error.maximum == 0.02
    assert (error.spent, error.reserved) == (0, 0)
    assert error.requested > 0.02
    assert error.messages is run.messages
    text = str(error)
    assert "was not sent" in text
    assert "RunLimits(max_cost_usd=" in text
    assert "root" not in text  # no run ids
    assert "ledger" not in text


def test_runs_on_two_threads_share_one_budget_through_the_shared_trackers() -> None:
    # a session's shape: runs on other event loops (threads) share the trackers and a cap over all of them
    shared, rec = context()
    budget = TreeBudget(anchor_run_id=None, max_total_tokens=900)
    subs = [worker(delay=0.02), worker(delay=0.02)]
    results: list[Any] = [None, None]

    def run(i: int) -> None:
        root, _ = fan_out(10, subs[i])
        ctx = shared.new_root()
        ctx.budgets = (budget,)
        results[i] = anyio.run(root.invoke_with_status, ctx, "go")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(r is not None for r in results)
    sent = subs[0].calls + subs[1].calls
    assert 0 < sent < 20
    extra, _ = overshoot(rec)
    assert shared.usage.total().total_tokens <= 900 + extra
    assert shared.usage.holds.tokens(None) == 0
