"""The summarization middleware: folds old turns into a summary when a request outgrows its budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .._errors import ConfigurationError, describe_error
from .._events import ContextPressure
from .._middleware import Middleware
from .._model import ModelRequest
from .._tokens import TokenEstimator

if TYPE_CHECKING:
    from .._context import RunContext
from ._summarization import (
    _UNRECOVERABLE,
    CompressionProvenance,
    ConcatSummarizer,
    RollingSummary,
    SummarizationPolicy,
    Summarizer,
    SummaryRecord,
    _default_estimator,
    _drop_units,
)

__all__ = ["SummarizationMiddleware"]


# ------------------------------------------------------------------------------------------ middleware
class SummarizationMiddleware(Middleware):
    """Compacts each request in ``before_model`` when ``policy.should_summarize``.

    Args:
        policy: When to summarize and what to keep.
        summarizer: Writes the summary (``ConcatSummarizer()`` by default).
        estimator: Token estimator (an ``o200k_base`` estimate by default).
        on_failure: When the summarizer fails: ``"fallback_trim"`` drops the oldest turns down to the
            trigger budget, ``"pass_through"`` sends the request unchanged, ``"abort"`` re-raises.
    """

    def __init__(
        self,
        policy: SummarizationPolicy,
        summarizer: Summarizer | None = None,
        *,
        estimator: TokenEstimator | None = None,
        on_failure: Literal["fallback_trim", "pass_through", "abort"] = "fallback_trim",
    ) -> None:
        if on_failure not in ("fallback_trim", "pass_through", "abort"):
            raise ConfigurationError(f"on_failure must be fallback_trim, pass_through or abort, got {on_failure!r}")
        self.policy = policy
        self.summarizer: Summarizer = summarizer if summarizer is not None else ConcatSummarizer()
        self._rolling = RollingSummary(self.summarizer)
        self.estimator = estimator if estimator is not None else _default_estimator()
        self.on_failure = on_failure
        self.provenance = CompressionProvenance()

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        messages, est, policy = request.messages, self.estimator, self.policy
        before = est.estimate(messages)
        if not policy.is_over(before):
            return request
        plan = policy.plan(messages)
        if not plan:
            return request
        try:
            message = await self._rolling.summary(ctx, plan.summarize)
        except _UNRECOVERABLE:
            raise
        except Exception as exc:
            if self.on_failure == "abort":
                raise
            detail = f"summarizer failed: {describe_error(exc)}"
            if self.on_failure == "pass_through":
                ctx.emit(ContextPressure, action="summarize", tokens_before=before, tokens_after=before,
                         limit_tokens=policy.trigger_budget, detail=detail)  # fmt: skip
                return request
            trimmed, removed = _drop_units(messages, before - policy.trigger_budget + 1, est, policy.keep_last)
            after = est.estimate(trimmed)
            ctx.emit(ContextPressure, action="trim", tokens_before=before, tokens_after=after,
                     limit_tokens=policy.trigger_budget, removed_messages=removed, detail=detail)  # fmt: skip
            return request.with_messages(trimmed)
        compacted = plan.apply(message)
        after = est.estimate(compacted)
        if after >= before:
            return request  # a summary longer than what it replaces is not worth sending
        record = SummaryRecord.create(plan, message.text, summarizer=self._rolling.name, tokens_before=before,
                                      tokens_after=after, run_id=str(ctx.run_id))  # fmt: skip
        self.provenance.append(record)
        ctx.emit(
            ContextPressure, action="summarize", tokens_before=before, tokens_after=after,
            limit_tokens=policy.trigger_budget, removed_messages=len(plan.summarize),
            detail=f"summarized {len(plan.summarize)} messages with {record.summarizer} ({record.id})",
        )  # fmt: skip
        return request.with_messages(compacted)
