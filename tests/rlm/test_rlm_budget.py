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
