"""Metered model calls: every request the harness sends for a run is checked, reserved, recorded, reconciled.

``CallMeter`` is the run loop's: it reserves before each attempt (priced by the model that will
serve it, so a fallback or a capability route is checked at its own rate), records the answer's
usage (or an estimate, labelled, when the provider reported none) and reconciles the reservation,
and when an attempt ends early (error, Stop, timeout) records what the provider most likely billed.
``invoke_metered`` does the same for the calls the harness makes on a run's behalf outside the
loop (summarizers of the pressure chain, thread compaction), and counts them toward the run's
``max_model_calls``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._budget_check import Reservation, reserve
from ._errors import Cancelled
from ._messages import AssistantMessage, Message
from ._tokens import TokenEstimator
from ._usage import Usage

if TYPE_CHECKING:
    from ._context import RunContext
    from ._cost import CostRecord
    from ._model import ChatModel, ModelRequest, ModelResponse

__all__ = ["CallMeter", "estimated_usage", "invoke_metered"]

# testkit fakes and the notebook's offline demo model: what they report (or not) is all there is
_SCRIPTED = frozenset({"test", "offline"})


def estimated_usage(prompt_tokens: int, message: AssistantMessage | None, estimator: TokenEstimator) -> Usage:
    """The harness's estimate of a call's usage: the prompt estimate plus the output that arrived."""
    output = 0
    if message is not None:
        count = estimator.counter.count
        parts = [message.text, message.reasoning or ""]
        parts.extend(f"{c.name}{c.raw_arguments or c.arguments}" for c in message.tool_calls)
        text = "".join(parts)
        output = count(text) if text else 0
    return Usage(input_tokens=prompt_tokens, output_tokens=output, estimated=True)


class CallMeter:
    """One run's accounting of its model calls (see the module docstring); one call at a time."""

    __slots__ = ("_estimator", "_request", "_tokens", "ctx", "held", "sent")

    def __init__(self, ctx: RunContext[Any], estimator: Callable[[], TokenEstimator], tokens: Any) -> None:
        self.ctx = ctx
        self._estimator = estimator  # looked up when first needed (loading a tokenizer takes a while)
        self._tokens = tokens  # request -> prompt estimate (the fitter's, reused from fit)
        self._request: ModelRequest | None = None
        self.held: Reservation | None = None
        self.sent = False

    @property
    def estimator(self) -> TokenEstimator:
        return self._estimator()

    def prompt_tokens(self, request: ModelRequest) -> int:
        return self.held.prompt_tokens if self.held is not None else int(self._tokens(request))

    def reserve(
        self, model: ChatModel, request: ModelRequest, call_id: str | None, messages: Sequence[Message]
    ) -> None:
        """Reserve ``request`` at ``model``'s price unless a hold is already open; refusals raise."""
        self._request, self.sent = request, False
        if self.held is None and self.ctx.budgets:
            tokens = self._tokens(request)
            self.held = reserve(self.ctx, model, tokens, request.max_output_tokens, messages, call_id=call_id)

    def completed(self, response: ModelResponse, model: ChatModel, call_id: str | None) -> ModelResponse:
        """Record an answer's usage (an estimate when none was reported) and reconcile its hold."""
        usage = response.usage
        if usage.is_empty and self._request is not None and model.provider not in _SCRIPTED:
            usage = estimated_usage(self.prompt_tokens(self._request), response.message, self.estimator)
        if usage.is_empty:  # nothing to record (a scripted fake that reports no usage)
            self._settle(None, "completed")
            return response
        served = response.model or model.model_name
        record = self.ctx.record_usage(usage, model=served, provider=response.provider, call_id=call_id)
        self._settle(record, "completed")
        return response

    def ended_early(
        self, exc: BaseException, partial: ModelResponse | None, model: ChatModel, call_id: str | None
    ) -> None:
        """An attempt failed, was stopped or timed out: record what was likely billed, release the hold.

        A request that was sent and then stopped, or that streamed some output before failing, was
        billed by the provider: its prompt estimate plus the output that arrived is recorded,
        labelled as an estimate. A request refused or failed before any output costs nothing.
        """
        record = None
        if self.sent and self._request is not None and model.provider not in _SCRIPTED:
            streamed = partial is not None and (partial.message.text or partial.message.tool_calls)
            stopped = isinstance(exc, Cancelled | TimeoutError) or not isinstance(exc, Exception)
            if streamed or stopped:
                message = partial.message if partial is not None else None
                usage = estimated_usage(self.prompt_tokens(self._request), message, self.estimator)
                with contextlib.suppress(Exception):  # never masks the error (a CostUnknownWarning as error)
                    record = self.ctx.record_usage(
                        usage, model=model.model_name, provider=model.provider, call_id=call_id
                    )
        outcome = "cancelled" if isinstance(exc, Cancelled) or not isinstance(exc, Exception) else "failed"
        self._settle(record, outcome)
        self.sent = False

    def release(self) -> None:
        """Give back a hold that will not be used (the answer's middleware failed before recording)."""
        self._settle(None, "failed")

    def _settle(self, record: CostRecord | None, outcome: Any) -> None:
        held, self.held = self.held, None
        if held is not None:
            held.settle(self.ctx, record, outcome)


async def invoke_metered(
    ctx: RunContext[Any] | None, model: ChatModel, request: ModelRequest, *, messages: Sequence[Message] = ()
) -> ModelResponse:
    """``model.invoke(request)`` on ``ctx``'s behalf: counted, checked, reserved, recorded, reconciled.

    Without a context the call is made as is (nothing to account it to). ``messages`` is what
    a refusal reports as the transcript so far (defaults to the request's).
    """
    if ctx is None:
        return await model.invoke(request)
    count = ctx.count_model_call
    if count is not None:
        count()  # the run's max_model_calls (raises LimitExceeded)
    estimator = TokenEstimator.for_model(model.model_name)
    meter = CallMeter(ctx, lambda: estimator, lambda r: estimator.estimate(r.messages))
    meter.reserve(model, request, None, messages or request.messages)
    meter.sent = True
    try:
        response = await model.invoke(request)
    except BaseException as exc:
        meter.ended_early(exc, None, model, None)
        raise
    if response.provider is None:
        response = dataclasses.replace(response, provider=model.provider)
    return meter.completed(response, model, None)
