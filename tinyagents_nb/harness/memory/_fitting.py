"""``ContextFitter``: makes each request of a harness fit its model's context window.

The loop asks it before every model call (``fit``), the budget check asks what the request it made
costs in prompt tokens (``request_tokens``), a fallback to a model with a smaller window refits the
request (``refit``), and reactive compaction shrinks a request the provider rejected as too long
(``compact_rejected`` in this package). Estimates are counted once: the tokenizer is looked up once
per fitter, tool-schema tokens once per distinct tool set, and the request ``fit`` made is
remembered so the budget check that follows does not count it again. What a rejection taught is
kept (``learn``): once the provider said a prompt was too long, later requests are fitted to the
smaller budget it implied, instead of being rejected again every turn.

Estimates are also calibrated per model (``_calibration``): each response that reports its prompt
tokens teaches the fitter (``observe``) how far the estimator runs from the model's real tokenizer,
and later requests are fitted with the corrected figure. With a ``counter`` (exact counts from the
host) each request is counted before it is sent, and the count is checked against what the response
reports.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._calibration import PromptTokenCounter, calibrated, calibration_for, observe_prompt_tokens
from .._errors import ContextLimitError
from .._tokens import TokenEstimator
from .._window import ContextWindow
from ._pressure import ContextPressureChain

if TYPE_CHECKING:
    from .._context import RunContext
    from .._model import ModelRequest, ToolSchema
    from .._usage import Usage

__all__ = ["ContextFitter"]

_TOOL_TOKEN_SETS = 16  # distinct tool sets whose schema token count is remembered
_EXACT_ROUNDS = 3  # relieve-and-recount rounds when the host counts exactly


class ContextFitter:
    """The context-window arithmetic of one harness: its window, its pressure chain, its estimates.

    Args:
        model_name: The model whose tokenizer estimates prompts.
        window: The window requests must fit (``None``: unknown, so requests are only measured
            when asked and never relieved).
        pressure: The chain that relieves a request over its window (``None``: measure only and
            let the provider have the last word).
        provider: The model's provider: estimates are calibrated per ``provider:model``.
        counter: Counts requests exactly before they are sent (``RunPolicy(token_counting="exact")``
            with a model that can ask its host); ``None``: the calibrated estimate.
    """

    __slots__ = (
        "_estimator",
        "_key",
        "_last_estimate",
        "_last_tools",
        "_tool_tokens",
        "counter",
        "learned_prompt_tokens",
        "model_name",
        "pressure",
        "window",
    )

    def __init__(
        self,
        model_name: str,
        window: ContextWindow | None,
        pressure: ContextPressureChain | None = None,
        *,
        provider: str | None = None,
        counter: PromptTokenCounter | None = None,
    ) -> None:
        self.model_name = model_name
        self._key = f"{provider}:{model_name}" if provider else model_name  # the calibration's key
        self.window = window
        self.pressure = pressure
        self._estimator: TokenEstimator | None = None
        # tool-schema token counts by the identity of the schemas sent (kept alive, so ids stay unique)
        self._tool_tokens: dict[tuple[int, ...], tuple[tuple[ToolSchema, ...], int]] = {}
        self._last_tools: tuple[tuple[ToolSchema, ...], int] = ((), 0)  # the same tuple again: no lookup
        # (request, the figure published, raw estimate, whether the figure is the host's exact count)
        self._last_estimate: tuple[ModelRequest, int, int, bool] | None = None
        self.counter = counter
        self.learned_prompt_tokens: int | None = None
        """The prompt budget a provider's rejection implied (``learn``); ``None`` until one happens."""

    @property
    def estimator(self) -> TokenEstimator:
        """The estimator for this fitter's model (looked up on first use)."""
        if self._estimator is None:
            self._estimator = TokenEstimator.for_model(self.model_name)
        return self._estimator

    async def fit(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        """Make the request fit the window (the pressure chain) and publish the estimate.

        The run's own transcript is not changed: relief applies to what is sent, and the chain's
        summaries are reused across calls so re-relieving the same history is cheap. The final
        (calibrated, or exact) figure lands on ``ctx.context_window``, where the notebook's gauge reads it.
        With an exact counter the chain works in estimate units scaled by this request's own
        exact ÷ estimated ratio, and the relieved request is counted again (a few rounds at most).
        """
        window = self._effective_window()
        if window is None:
            return request
        estimator = self.estimator
        tool_tokens = self.schema_tokens(estimator, tuple(request.tools))
        raw = estimator.estimate(request.messages, tools_schema_tokens=tool_tokens)
        exact = await self._count(request, raw)
        estimate = calibrated(self._key, raw) if exact is None else exact
        pressure = self.pressure
        if pressure is None and window is not self.window:  # a learned budget must be met, like refit's
            pressure = ContextPressureChain()
        rounds = _EXACT_ROUNDS if exact is not None else 1
        while pressure is not None and rounds and not window.fits(estimate):
            rounds -= 1
            ratio = None if exact is None else exact / max(raw, 1)
            try:
                relieved = await pressure.relieve(
                    ctx,
                    request.messages,
                    window=self._raw_window(window, ratio),
                    estimator=estimator,
                    tools_schema_tokens=tool_tokens,
                )
            except ContextLimitError:
                if exact is None:
                    raise
                raise _too_long(window, exact) from None
            if _same(relieved, request.messages):
                break
            request = request.with_messages(tuple(relieved))
            raw = estimator.estimate(request.messages, tools_schema_tokens=tool_tokens)
            exact = await self._count(request, raw) if exact is not None else None
            estimate = calibrated(self._key, raw) if exact is None else exact
        if exact is not None and pressure is not None and pressure.fail and not window.fits(exact):
            raise _too_long(window, exact)
        ctx.context_window = window.with_estimate(estimate, exact=exact is not None)
        self._last_estimate = (request, estimate, raw, exact is not None)
        return request

    async def _count(self, request: ModelRequest, raw: int) -> int | None:
        """The host's exact count of ``request`` (which also teaches the calibration); ``None`` without one."""
        counter = self.counter
        if counter is None:
            return None
        exact = await counter.count_prompt_tokens(request)
        if exact is not None:
            observe_prompt_tokens(self._key, raw, exact)
        return exact

    def _raw_window(self, window: ContextWindow, ratio: float | None = None) -> ContextWindow:
        """``window`` in raw-estimate units: a model whose real count runs 1.4x the estimate gets 1/1.4 the room."""
        if ratio is None:
            found = calibration_for(self._key)
            ratio = None if found is None else found.ratio
        if ratio is None or ratio == 1.0:
            return window
        usable = max(1, math.floor(window.usable_tokens / ratio))
        return dataclasses.replace(window, max_tokens=usable + window.reserved_output_tokens)

    def observe(self, ctx: RunContext[Any], request: ModelRequest, usage: Usage, *, served: bool = True) -> None:
        """Learn from the prompt tokens the provider reported for ``request`` (a call that completed).

        ``served=False``: another model (a fallback) answered, whose count says nothing about this one.
        """
        reported = usage.input_tokens
        if reported <= 0 or not served:
            return
        last = self._last_estimate
        if last is not None and last[0] is request:
            raw = last[2]
            if last[3] and self.counter is not None:
                self.counter.check_prompt_tokens(last[1], reported)  # the host's count against its own usage
        else:
            estimator = self.estimator
            raw = estimator.estimate(request.messages, tools_schema_tokens=self.schema_tokens(estimator, request.tools))
        observe_prompt_tokens(self._key, raw, reported)
        if ctx.context_window is not None:
            ctx.context_window = ctx.context_window.with_measured(reported)

    def learn(self, prompt_tokens: int) -> None:
        """Remember that prompts must stay within ``prompt_tokens`` (estimated): a provider rejected more.

        Only ever tightens; every later ``fit`` of this harness's requests meets it.
        """
        if prompt_tokens >= 1 and (self.learned_prompt_tokens is None or prompt_tokens < self.learned_prompt_tokens):
            self.learned_prompt_tokens = prompt_tokens

    def _effective_window(self) -> ContextWindow | None:
        window, learned = self.window, self.learned_prompt_tokens
        if learned is None:
            return window
        if window is None:
            return ContextWindow(model=self.model_name, max_tokens=learned)
        if learned >= window.usable_tokens:
            return window
        reserved = window.reserved_output_tokens
        return ContextWindow(model=window.model, max_tokens=learned + reserved, reserved_output_tokens=reserved)

    def request_tokens(self, request: ModelRequest) -> int:
        """The prompt tokens ``request`` is estimated at, calibrated (``fit``'s estimate when it made this request)."""
        last = self._last_estimate
        if last is not None and last[0] is request:
            return last[1]
        estimator = self.estimator
        raw = estimator.estimate(request.messages, tools_schema_tokens=self.schema_tokens(estimator, request.tools))
        return calibrated(self._key, raw)

    async def refit(
        self, ctx: RunContext[Any], request: ModelRequest, window: ContextWindow, *, estimator: TokenEstimator
    ) -> ModelRequest:
        """``request`` relieved to fit ``window`` (another model's, or a tighter target); itself when unchanged.

        Uses this fitter's chain, or the default chain when it has none: a window that is known to
        be too small must be met, whatever the harness chose for routine relief.
        """
        chain = self.pressure if self.pressure is not None else ContextPressureChain()
        messages = await chain.relieve(
            ctx,
            request.messages,
            window=window,
            estimator=estimator,
            tools_schema_tokens=self.schema_tokens(estimator, tuple(request.tools)),
        )
        return request if _same(messages, request.messages) else request.with_messages(tuple(messages))

    def schema_tokens(self, estimator: TokenEstimator, tools: Sequence[ToolSchema]) -> int:
        """Tokens the tool schemas cost, counted once per distinct tool set.

        The set can change between calls (tools registered or removed, the structured-output tool
        added, a middleware narrowing the tools), so the count is keyed by the schemas' identity:
        the registry hands out the same schema objects until it changes, which keeps a hit to one
        tuple of ``id``s and one dict lookup.
        """
        last = self._last_tools
        if last[0] is tools:
            return last[1]
        schemas = tuple(tools)
        key = tuple(map(id, schemas))
        hit = self._tool_tokens.get(key)
        if hit is not None:
            self._last_tools = hit
            return hit[1]
        text = "".join(f"{s.name}{s.description}{dict(s.parameters)}" for s in schemas)
        tokens = estimator.counter.count(text) if text else 0
        if len(self._tool_tokens) >= _TOOL_TOKEN_SETS:
            self._tool_tokens.pop(next(iter(self._tool_tokens)))  # oldest first
        self._tool_tokens[key] = self._last_tools = (schemas, tokens)
        return tokens

    def __repr__(self) -> str:
        size = None if self.window is None else self.window.max_tokens
        return f"ContextFitter(model={self.model_name!r}, window={size}, pressure={self.pressure is not None})"


def _too_long(window: ContextWindow, exact: int) -> ContextLimitError:
    """The pre-flight refusal of a request the host counted at ``exact`` tokens (nothing more to relieve)."""
    limit = window.usable_tokens
    return ContextLimitError(
        f"the request for {window.model} needs {exact} tokens (counted by the host) but only {limit} fit "
        f"({window.max_tokens} minus {window.reserved_output_tokens} reserved for output)",
        model=window.model,
        estimated_tokens=exact,
        limit_tokens=limit,
    )


def _same(after: Sequence[Any], before: Sequence[Any]) -> bool:
    return len(after) == len(before) and all(a is b for a, b in zip(after, before, strict=True))
