"""``demo_model``: a stand-in model for tutorials and demos, registered in one call.

A notebook that must run anywhere (CI, a laptop without keys, a talk with no network) needs a model
that streams like a real one, reports plausible usage and has a price and a context window, so the
dashboard's cost table and gauge show what they would with a provider. Building that from the
testkit takes forty lines of setup; this is those lines, so a tutorial's first screen is about
agents, not fakes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal

import anyio

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    ModelPricing,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderError,
    TextDelta,
    Usage,
)
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish, StreamUsage, TokenEstimator

from ._session import NotebookSession, get_session

__all__ = ["DemoModel", "demo_model"]

_CHUNK = re.compile(r"\S+\s*")


class DemoModel:
    """A ``ChatModel`` that answers from a script, in order, measuring usage like a provider.

    Args:
        answers: One answer per model call.
        name: Its ``model_name``.
        context_window: The window its profile reports.
        chunk_delay_s: Seconds between streamed words.
    """

    def __init__(self, answers: Sequence[str], *, name: str, context_window: int, chunk_delay_s: float) -> None:
        self._answers = [str(answer) for answer in answers]
        self._name = name
        self._delay = chunk_delay_s
        self._estimator = TokenEstimator.for_model(name)
        self._profile = ModelProfile(name=name, provider="demo", context_window=context_window, max_output_tokens=4_096)
        self.used = 0
        """How many answers were given."""

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        return "demo"

    @property
    def profile(self) -> ModelProfile:
        return self._profile

    def _next(self, request: ModelRequest) -> tuple[str, Usage]:
        if self.used >= len(self._answers):
            raise ProviderError(
                f"demo model {self._name!r} has no answers left ({self.used} used)",
                provider="demo",
                model=self._name,
                hint="re-run the cell that called demo_model() to start its script over",
            )
        text = self._answers[self.used]
        self.used += 1
        usage = Usage(
            input_tokens=self._estimator.estimate(request.messages), output_tokens=self._estimator.counter.count(text)
        )
        return text, usage

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        text, usage = self._next(request)
        return ModelResponse(message=AssistantMessage(text=text), usage=usage, finish_reason="stop", model=self._name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        text, usage = self._next(request)
        for word in _CHUNK.findall(text):
            if self._delay:
                await anyio.sleep(self._delay)
            yield TextDelta(text=word)
        yield StreamUsage(usage=usage)
        yield StreamFinish(finish_reason="stop", model=self._name)

    def __repr__(self) -> str:
        return f"DemoModel(name={self._name!r}, used={self.used}/{len(self._answers)})"


def demo_model(
    answers: Sequence[str],
    *,
    name: str = "demo",
    context_window: int = 128_000,
    input_per_mtok: str = "0.15",
    output_per_mtok: str = "0.60",
    chunk_delay_s: float = 0.01,
    session: NotebookSession | None = None,
) -> str:
    """Register a model that streams ``answers`` in order, offline, and return its name.

    Usage is measured as a provider would report it (the request's and the answer's tokens,
    estimated with the same counter the context gauge uses), priced at ``input_per_mtok`` and
    ``output_per_mtok`` dollars per million tokens (gpt-4o-mini's by default). Re-running the cell
    starts the script over; a call after the last answer fails with a ``ProviderError``.

    Args:
        answers: What the model says, one answer per model call.
        name: The name to use with ``%%agent --model`` and ``%agent model``.
        context_window: The window the gauge shows (tokens).
        input_per_mtok: USD per million input tokens, as a decimal string.
        output_per_mtok: USD per million output tokens, as a decimal string.
        chunk_delay_s: Seconds between streamed words, so the dashboard visibly streams.
        session: The session to register in (default: this kernel's).

    Raises:
        ConfigurationError: ``answers`` is a single string or empty, or a setting is invalid.
    """
    if isinstance(answers, str) or not answers:
        raise ConfigurationError(
            "demo_model needs a list of answers", hint='e.g. demo_model(["First answer.", "Second answer."])'
        )
    if context_window < 1:
        raise ConfigurationError(f"context_window must be a positive int, got {context_window!r}")
    if not chunk_delay_s >= 0:
        raise ConfigurationError(f"chunk_delay_s must be >= 0, got {chunk_delay_s!r}")
    try:
        pricing = ModelPricing(input_per_mtok=Decimal(input_per_mtok), output_per_mtok=Decimal(output_per_mtok))
    except ArithmeticError:  # decimal.InvalidOperation: not a number
        raise ConfigurationError(
            f"prices must be decimal strings such as '0.15', got {input_per_mtok!r} and {output_per_mtok!r}"
        ) from None
    model = DemoModel(answers, name=name, context_window=context_window, chunk_delay_s=chunk_delay_s)
    target = session if session is not None else get_session()
    target.register_model(name, model)
    target.context.costs.register_price(name, pricing)
    return name
