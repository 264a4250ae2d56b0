"""A 100-prompt ``llm_batch`` racing one small token cap: refused sub-queries are never sent."""

from __future__ import annotations

import anyio
import pytest

from tinyagents_nb.harness import (
    AssistantMessage,
    BudgetExceeded,
    ModelRequest,
    ModelResponse,
    RunContext,
    RunLimits,
    RunPolicy,
    Usage,
)
from tinyagents_nb.harness.events import BudgetReconciled
from tinyagents_nb.harness.models import TokenEstimator
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel, ScriptedModel
from tinyagents_nb.rlm import RLM, LocalEnvironment, RLMLimits

pytestmark = pytest.mark.anyio


def sub_model() -> FunctionModel:
    """Answers after a short wait, reporting the prompt it was sent (as a provider does) and one token out."""
    estimator = TokenEstimator.for_model("sub")

    async def answer(request: ModelRequest) -> ModelResponse:
        await anyio.sleep(0.002)
        usage = Usage(input_tokens=estimator.estimate(request.messages), output_tokens=1)
        return ModelResponse(message=AssistantMessage(text="ok"), usage=usage)

    return FunctionModel(answer, model_name="sub")


async def test_a_100_prompt_llm_batch_stays_within_a_token_cap() -> None:
    code = "answers = llm_batch([f'label item number {i}' for i in range(100)])"
    root = ScriptedModel(
        [ScriptedModel.text(f"```python\n{code}\n```"), ScriptedModel.text("```python\nFINAL('x')\n```")]
    )
    sub = sub_model()
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    rlm = RLM(
        model=root,
        sub_model=sub,
        environment=LocalEnvironment(),
        limits=RLMLimits(max_sub_queries=100, max_concurrency=32),
        policy=RunPolicy(limits=RunLimits(max_total_tokens=600), max_output_tokens=4),
    )
    with pytest.raises(BudgetExceeded):  # the root's next request is refused too: the cap is spent
        await rlm.invoke_in_context(ctx, "label every item")
    assert 0 < sub.calls < 100  # the cap let some through; the rest were refused before sending
    done = [e for e in rec.events if isinstance(e, BudgetReconciled)]
    overshoot = sum(max(e.tokens - e.reserved_tokens, 0) for e in done)
    assert ctx.usage.total().total_tokens <= 600 + overshoot
    assert ctx.usage.total().total_tokens > 400  # the cap was used, not refused wholesale
    assert ctx.usage.holds.tokens(ctx.run_id) == 0


async def test_rlm_query_children_spend_from_the_trees_token_cap() -> None:
    estimator = TokenEstimator.for_model("root")
    children = 0

    async def reply(request: ModelRequest) -> ModelResponse:
        nonlocal children
        task = next(m.text for m in request.messages if m.role == "user")
        code = "r = rlm_query_batched([f'CHILD {i}' for i in range(20)], list(range(20)))"
        if "CHILD" in task:
            children += 1
            await anyio.sleep(0.002)
            code = "answer.update(content=str(context), ready=True)"
        usage = Usage(input_tokens=estimator.estimate(request.messages), output_tokens=4)
        return ModelResponse(message=AssistantMessage(text=f"```python\n{code}\n```"), usage=usage)

    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    rlm = RLM(
        model=FunctionModel(reply, model_name="root"),
        environment=LocalEnvironment(),
        limits=RLMLimits(max_concurrency=8),
        policy=RunPolicy(limits=RunLimits(max_total_tokens=6_000), max_output_tokens=8),
    )
    with pytest.raises(BudgetExceeded):  # the children spent the tree's cap: the root's next request is refused
        await rlm.invoke_in_context(ctx, "ROOT: fan out")
    assert 1 < children < 20  # some children ran, the rest were refused before their first request
    done = [e for e in rec.events if isinstance(e, BudgetReconciled)]
    overshoot = sum(max(e.tokens - e.reserved_tokens, 0) for e in done)
    assert ctx.usage.total().total_tokens <= 6_000 + overshoot
    assert ctx.usage.holds.tokens(ctx.run_id) == 0
