"""Every model call is checked and priced by the model that serves it; free calls are free; estimates are labelled."""

from __future__ import annotations

import warnings
from decimal import Decimal
from typing import Any

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    BudgetExceeded,
    FallbackPolicy,
    LimitExceeded,
    Middleware,
    ModelPricing,
    ModelProfile,
    ModelRequest,
    ProviderError,
    RetryPolicy,
    RunCancelled,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.events import BudgetReconciled
from tinyagents_nb.harness.memory import ModelSummarizer, SummarizationMiddleware, SummarizationPolicy
from tinyagents_nb.harness.runtime import CostUnknownWarning
from tinyagents_nb.harness.stores import InMemoryResponseCache
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel, StreamingMock

pytestmark = pytest.mark.anyio

U = Usage(input_tokens=100, output_tokens=10)
CHEAP = ModelPricing(input_per_mtok=10, output_per_mtok=10)  # $0.00001 per token
PRICEY = ModelPricing(input_per_mtok=10_000, output_per_mtok=10_000)  # $0.01 per token
TEXT_ONLY = ModelProfile(name="cheap", provider="acme", context_window=8_000, supports_vision=False)
SEEING = ModelProfile(name="pricey", provider="acme", context_window=8_000, supports_vision=True)


class Acme(ScriptedModel):
    """A scripted model from a priced provider."""

    @property
    def provider(self) -> str:
        return "acme"


class Quiet(StreamingMock):
    """A priced stream that never reports usage (llama-cpp-python's server sends none)."""

    @property
    def provider(self) -> str:
        return "acme"


class RequireVision(Middleware):
    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        return request.with_required_capabilities(vision=True)


def priced() -> tuple[RunContext[None], EventRecorder]:
    ctx = RunContext(config=RunConfig(run_id="root"))
    for name, price in (("cheap", CHEAP), ("pricey", PRICEY), ("summarizer", CHEAP), ("quiet", CHEAP)):
        ctx.costs.register_price(f"acme:{name}", price)
    return ctx, EventRecorder(ctx.events)


CAP = 0.05  # the cheap model's requests fit many times; one pricey request (~$0.6 by its output cap) does not
POLICY: dict[str, Any] = {"max_output_tokens": 50, "retry": RetryPolicy(max_attempts=1)}


async def test_a_fallback_to_a_pricier_model_is_checked_at_its_own_price() -> None:
    cheap = Acme([ProviderError("down", status=503, retryable=True)], model_name="cheap")
    pricey = Acme(["expensive answer"], model_name="pricey")
    limits = RunLimits(max_cost_usd=CAP)
    harness = AgentHarness(model=cheap, policy=RunPolicy(fallback=FallbackPolicy([pricey]), limits=limits, **POLICY))
    ctx, rec = priced()
    run, _ = await harness.invoke_with_status(ctx, "hi")
    assert cheap.calls == 1
    assert pricey.calls == 0  # refused before it was sent
    assert isinstance(run.error, BudgetExceeded)
    assert "not sent" in str(run.error)
    (released,) = [e for e in rec.events if isinstance(e, BudgetReconciled)]
    assert (released.model, released.outcome, released.tokens) == ("cheap", "failed", 0)


async def test_an_unpriced_fallback_is_not_sent_under_refuse() -> None:
    cheap = Acme([ProviderError("down", status=503, retryable=True)], model_name="cheap")
    unknown = Acme(["who knows"], model_name="mystery")
    limits = RunLimits(max_cost_usd=10, unknown_price="refuse")
    harness = AgentHarness(model=cheap, policy=RunPolicy(fallback=FallbackPolicy([unknown]), limits=limits, **POLICY))
    run, _ = await harness.invoke_with_status(priced()[0], "hi")
    assert unknown.calls == 0
    assert isinstance(run.error, BudgetExceeded)
    assert "price of model 'mystery' is unknown" in str(run.error)


async def test_a_capability_route_and_a_configurable_model_are_priced_as_themselves() -> None:
    cheap = Acme(["never"], model_name="cheap", profile=TEXT_ONLY)
    pricey = Acme(["I see"], model_name="pricey", profile=SEEING)
    limits = RunLimits(max_cost_usd=CAP)
    routed = AgentHarness(
        model=cheap,
        middleware=[RequireVision()],
        policy=RunPolicy(fallback=FallbackPolicy([pricey]), limits=limits, **POLICY),
    )
    run, _ = await routed.invoke_with_status(priced()[0], "look")
    assert (cheap.calls, pricey.calls) == (0, 0)
    assert isinstance(run.error, BudgetExceeded)

    chosen = AgentHarness(model=cheap, policy=RunPolicy(fallback=FallbackPolicy([pricey]), limits=limits, **POLICY))
    ctx = priced()[0].with_config(configurable={"model": "acme:pricey"})
    run, _ = await chosen.invoke_with_status(ctx, "hi")
    assert (cheap.calls, pricey.calls) == (0, 0)
    assert isinstance(run.error, BudgetExceeded)


def long_history() -> list[Any]:
    turns: list[Any] = []
    for i in range(8):
        turns += [UserMessage(text=f"question {i} " * 20), AssistantMessage(text=f"answer {i} " * 20)]
    return [*turns, UserMessage(text="and now?")]


def summarizing(summarizer: Acme, main: Acme, **limits: Any) -> AgentHarness[None]:
    return AgentHarness(
        model=main,
        middleware=[
            SummarizationMiddleware(
                SummarizationPolicy(trigger_tokens=200, keep_last=2),
                ModelSummarizer(summarizer, max_output_tokens=50),
                on_failure="abort",
            )
        ],
        policy=RunPolicy(limits=RunLimits(**limits), max_output_tokens=50),
    )


async def test_summarizer_calls_count_toward_max_model_calls_and_the_budget() -> None:
    summarizer = Acme([ScriptedModel.text("a summary", usage=U)], model_name="summarizer")
    main = Acme([ScriptedModel.text("answer", usage=U)], model_name="cheap")
    ctx, rec = priced()
    run, _ = await summarizing(summarizer, main, max_model_calls=2, max_total_tokens=10_000).invoke_with_status(
        ctx, long_history()
    )
    assert run.ok
    assert (summarizer.calls, main.calls) == (1, 1)
    assert run.usage.total_tokens == 2 * U.total_tokens  # the summary's tokens are the run's
    assert [e.model for e in rec.events if isinstance(e, BudgetReconciled)] == ["summarizer", "cheap"]

    summarizer = Acme([ScriptedModel.text("a summary", usage=U)], model_name="summarizer")
    run, _ = await summarizing(summarizer, Acme(["x"], model_name="cheap"), max_model_calls=1).invoke_with_status(
        priced()[0], long_history()
    )
    assert summarizer.calls == 0  # the loop's call used the one allowed; the summary would be a second
    assert isinstance(run.error, LimitExceeded)
    assert run.error.limit == "model_calls"

    summarizer = Acme([ScriptedModel.text("a summary", usage=U)], model_name="summarizer")
    run, _ = await summarizing(summarizer, Acme(["x"], model_name="cheap"), max_total_tokens=150).invoke_with_status(
        priced()[0], long_history()
    )
    assert summarizer.calls == 0  # its transcript alone is over the 150-token budget
    assert isinstance(run.error, BudgetExceeded)


async def test_a_response_cache_hit_is_free_under_an_exhausted_budget() -> None:
    cache = InMemoryResponseCache()
    model = Acme([ScriptedModel.text("cached answer", usage=U)], model_name="cheap")
    open_harness = AgentHarness(model=model, policy=RunPolicy(response_cache=cache, **POLICY))
    assert (await open_harness.invoke_with_status(priced()[0], "same question"))[0].ok
    tight = AgentHarness(
        model=model, policy=RunPolicy(response_cache=cache, limits=RunLimits(max_cost_usd=0), **POLICY)
    )
    ctx, rec = priced()
    run, _ = await tight.invoke_with_status(ctx, "same question")
    assert run.ok
    assert run.final_text == "cached answer"
    assert model.calls == 1  # the hit was not sent (nor refused)
    assert rec.of_kind("budget.reserved") == []
    run, _ = await tight.invoke_with_status(priced()[0], "another question")
    assert isinstance(run.error, BudgetExceeded)  # a miss is checked as usual
    assert model.calls == 1


async def test_a_stream_without_usage_is_recorded_as_an_estimate_and_counted() -> None:
    model = Quiet("a streamed answer of eight words or so", model_name="quiet")
    harness = AgentHarness(model=model, policy=RunPolicy(limits=RunLimits(max_total_tokens=10_000), **POLICY))
    ctx, rec = priced()
    run, _ = await harness.invoke_with_status(ctx, "hello there", streaming=True)
    assert run.ok
    assert run.usage.estimated
    assert run.usage.input_tokens > 0
    assert run.usage.output_tokens >= 8
    assert run.cost.total_usd is not None
    assert run.cost.total_usd > 0  # priced, not $0
    (done,) = [e for e in rec.events if isinstance(e, BudgetReconciled)]
    assert done.estimated
    assert done.tokens == run.usage.total_tokens

    unpriced = Quiet("an answer", model_name="nobody-knows")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostUnknownWarning)
        run, _ = await AgentHarness(model=unpriced).invoke_with_status(priced()[0], "hi", streaming=True)
    assert run.usage.estimated
    assert run.cost.total_usd is None  # cost unknown, never $0


async def test_a_stopped_stream_records_its_estimated_usage() -> None:
    model = Quiet(["word "] * 200, chunk_delay_s=0.01, model_name="quiet")
    harness = AgentHarness(model=model, policy=RunPolicy(limits=RunLimits(max_cost_usd=1), **POLICY))
    ctx, rec = priced()
    stream = harness.invoke_streaming("talk", context=ctx)
    async with anyio.create_task_group() as tg:

        async def stop_soon() -> None:
            await anyio.sleep(0.2)
            stream.cancel("stop")

        tg.start_soon(stop_soon)
        with pytest.raises(RunCancelled) as stopped:
            await stream
    usage = stopped.value.usage
    assert usage is not None
    assert usage.estimated
    assert usage.output_tokens > 3  # what streamed before Stop
    cost = ctx.costs.for_subtree(stopped.value.run_id).total_usd
    assert cost is not None
    assert cost > Decimal(0)
    (done,) = [e for e in rec.events if isinstance(e, BudgetReconciled)]
    assert (done.outcome, done.estimated) == ("cancelled", True)
    assert ctx.usage.holds.usd("root") == 0
