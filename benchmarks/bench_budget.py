"""Budgets that hold: what reserving each request's estimate costs.

(a) The model -> tool -> model run of ``bench_overhead`` with and without a dollar budget
(``RunLimits(max_cost_usd=...)``, a priced fake model): every request is estimated, priced,
checked against spend + reservations in flight and reserved (``budget.reserved``), then reconciled
(``budget.reconciled``). Interleaved rounds; medians with the interquartile range, µs per run.
(b) A 1,000-prompt ``llm_batch`` (RLM, in-process REPL, concurrency 16, an instant sub-model) with
and without a dollar budget large enough for all of it, then under a cap that stops it part-way:
wall time, sub-queries sent, and the recorded spend against the cap.

Run alone: ``python -m benchmarks.bench_budget [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from decimal import Decimal

from benchmarks._common import header, interleaved, line, spread
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ModelPricing,
    ModelRequest,
    ModelResponse,
    RunContext,
    RunLimits,
    RunPolicy,
    ToolCall,
    ToolMessage,
    Usage,
    tool,
)
from tinyagents_nb.rlm import RLM, LocalEnvironment, RLMLimits

PRICE = ModelPricing(input_per_mtok=1, output_per_mtok=2)
USAGE = Usage(input_tokens=40, output_tokens=8)


class Instant:
    """Answers at once with usage, as a provider does; calls ``add_one`` once when ``calls_tools``."""

    model_name = "instant"
    provider = "bench"
    profile = None

    def __init__(self, *, calls_tools: bool) -> None:
        self.calls_tools = calls_tools
        self.calls = 0
        self._done = ModelResponse(message=AssistantMessage(text="done"), usage=USAGE, model="instant")
        call = ToolCall(id="c1", name="add_one", arguments={"x": 1})
        self._call = ModelResponse(message=AssistantMessage(tool_calls=[call]), usage=USAGE, model="instant")

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls_tools and not isinstance(request.messages[-1], ToolMessage):
            return self._call
        return self._done

    async def stream(self, request: ModelRequest):  # type: ignore[no-untyped-def]
        raise NotImplementedError


@tool
async def add_one(x: int) -> int:
    """Add one."""
    return x + 1


def priced() -> RunContext[None]:
    ctx = RunContext()
    ctx.costs.register_price("bench:instant", PRICE)
    return ctx


async def overhead(rounds: int, warmup: int) -> None:
    line("(a) model -> tool -> model, µs per run, with and without a dollar budget")
    plain: AgentHarness[None] = AgentHarness(model=Instant(calls_tools=True), tools=[add_one])
    budgeted: AgentHarness[None] = AgentHarness(
        model=Instant(calls_tools=True), tools=[add_one], policy=RunPolicy(limits=RunLimits(max_cost_usd=1_000))
    )

    async def run_plain() -> None:
        assert (await plain.invoke_in_context(priced(), "go")).final_text == "done"

    async def run_budgeted() -> None:
        assert (await budgeted.invoke_in_context(priced(), "go")).final_text == "done"

    samples = await interleaved(
        [("no budget", run_plain), ("max_cost_usd", run_budgeted)], rounds=rounds, warmup=warmup
    )
    medians = {}
    for name, values in samples.items():
        s = spread([v * 1e6 for v in values])
        medians[name] = s.median
        line(f"  {name:<14} {s.median:7.0f} µs ({s.p25:.0f}-{s.p75:.0f}), n={s.n}")
    line(f"  reservation overhead: {medians['max_cost_usd'] - medians['no budget']:+.0f} µs per run (2 requests)")


def batch_code(prompts: int) -> str:
    return f"answers = llm_batch([f'item {{i}}' for i in range({prompts})])\nprint(len(answers))"


async def llm_batch(prompts: int) -> None:
    line(f"(b) llm_batch of {prompts:,} prompts under a dollar budget (RLM, in-process, concurrency 16)")
    for label, cap in (("no budget", None), ("budget for all", 1_000.0), ("cap stops it part-way", None)):
        sub = Instant(calls_tools=False)
        ctx = priced()
        one = PRICE.cost(USAGE).total_usd
        if label == "cap stops it part-way":
            cap = float(one * prompts / 4)
        root = _Script([f"```python\n{batch_code(prompts)}\n```", "```python\nFINAL('done')\n```"])
        rlm = RLM(
            model=root,
            sub_model=sub,
            environment=LocalEnvironment(),
            limits=RLMLimits(max_sub_queries=prompts, max_concurrency=16),
            policy=RunPolicy(limits=RunLimits(max_cost_usd=cap, unknown_price="allow")),
        )
        started = time.perf_counter()
        await rlm.invoke_in_context(ctx, "label every item")
        elapsed = time.perf_counter() - started
        spent = ctx.costs.total().known_usd
        cap_text = "none" if cap is None else f"${Decimal(str(cap)):.6f}"
        line(
            f"  {label:<22} {elapsed * 1e3:7.0f} ms, {elapsed / max(sub.calls, 1) * 1e6:5.0f} µs per sub-query, "
            f"{sub.calls:,} sent, spent ${spent:.6f} (cap {cap_text})"
        )
        rlm.close()


class _Script:
    """The root model: replies in order (free: provider ``test``)."""

    model_name = "script"
    provider = "test"
    profile = None

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.calls = 0

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        text = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return ModelResponse(message=AssistantMessage(text=text), usage=USAGE, model="script")

    async def stream(self, request: ModelRequest):  # type: ignore[no-untyped-def]
        raise NotImplementedError


async def amain(quick: bool) -> None:
    header("11. Budgets: reservation overhead and llm_batch under a cap")
    await overhead(rounds=20 if quick else 400, warmup=3 if quick else 40)
    await llm_batch(100 if quick else 1_000)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    asyncio.run(amain(parser.parse_args(argv).quick))


if __name__ == "__main__":
    main()
