"""The context window a run budgets against, and where its size comes from.

``ContextWindow`` is a plain value: the notebook gauge and the context-pressure chain read
``remaining`` and ``utilization`` from it, and ``with_estimate`` yields the next one. Sizes are
resolved by ``context_window_for`` from, in order: project overrides (``register_context_window``),
a small built-in table for popular models the data source lacks, and genai-prices' bundled snapshot
(no network). Published sizes are hints; a provider's context-length error is the final word.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ._errors import ConfigurationError, ModelNotFound
from ._tokens import _split_provider

__all__ = [
    "DEFAULT_RESERVED_OUTPUT_TOKENS",
    "ContextWindow",
    "context_window_for",
    "register_context_window",
    "unregister_context_window",
]

DEFAULT_RESERVED_OUTPUT_TOKENS = 4096
"""Output room ``ContextWindow.for_model`` reserves by default (capped at a quarter of the window)."""

_BUILTIN: Mapping[str, int] = MappingProxyType(
    {
        # Groq model docs (console.groq.com/docs/models): 131,072-token context window.
        "llama-3.3-70b-versatile": 131_072,
        "llama-3.1-8b-instant": 131_072,
        # Google Gemini API model docs: input token limit 1,048,576.
        "gemini-2.5-pro": 1_048_576,
        "gemini-2.5-flash": 1_048_576,
    }
)
"""Models genai-prices knows but lists without a context window; keep this table small and sourced."""

_OVERRIDES: dict[str, int] = {}
_OVERRIDES_LOCK = threading.Lock()
_HINT = (
    "register its size with register_context_window({model!r}, tokens) "
    "or build ContextWindow(model={model!r}, max_tokens=...) directly"
)


def _check_count(field: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{field} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ConfigurationError(f"{field} must be >= {minimum}, got {value}")
    return value


def _check_model(model: object) -> str:
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
    return model.strip()


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextWindow:
    """A model's token budget and the current prompt estimate against it.

    Attributes:
        model: The model name the window belongs to (``"gpt-4o"`` or ``"openai:gpt-4o"``).
        max_tokens: The model's total context size (prompt plus output).
        reserved_output_tokens: Room kept free for the reply; must be below ``max_tokens``.
        estimated_prompt_tokens: The latest prompt estimate (``TokenEstimator.estimate``, calibrated
            per model from the prompt tokens providers reported).
        measured_prompt_tokens: The prompt tokens the provider reported for the last call (``None``
            before any call answered): a measurement, where ``estimated_prompt_tokens`` is a guess.
        exact: ``estimated_prompt_tokens`` was counted by the host's own template and tokenizer
            before the request was sent (``RunPolicy(token_counting="exact")``), not estimated.
    """

    model: str
    max_tokens: int
    reserved_output_tokens: int = 0
    estimated_prompt_tokens: int = 0
    measured_prompt_tokens: int | None = None
    exact: bool = False

    def __post_init__(self) -> None:
        _check_model(self.model)
        _check_count("max_tokens", self.max_tokens, minimum=1)
        _check_count("reserved_output_tokens", self.reserved_output_tokens, minimum=0)
        _check_count("estimated_prompt_tokens", self.estimated_prompt_tokens, minimum=0)
        if self.measured_prompt_tokens is not None:
            _check_count("measured_prompt_tokens", self.measured_prompt_tokens, minimum=0)
        if self.reserved_output_tokens >= self.max_tokens:
            raise ConfigurationError(
                f"reserved_output_tokens ({self.reserved_output_tokens}) must be less than max_tokens "
                f"({self.max_tokens}), or no room is left for the prompt"
            )

    @property
    def usable_tokens(self) -> int:
        """Tokens available to the prompt: ``max_tokens - reserved_output_tokens`` (always >= 1)."""
        return self.max_tokens - self.reserved_output_tokens

    @property
    def remaining(self) -> int:
        """Prompt room left: ``max - reserved - estimated``; negative means the prompt is over budget."""
        return self.usable_tokens - self.estimated_prompt_tokens

    @property
    def utilization(self) -> float:
        """``estimated ÷ (max - reserved)``: 0.0 when empty, above 1.0 when over budget."""
        return self.estimated_prompt_tokens / self.usable_tokens

    def fits(self, tokens: int) -> bool:
        """Whether a prompt of ``tokens`` fits while keeping the reserved output room."""
        return _check_count("tokens", tokens, minimum=0) <= self.usable_tokens

    def with_estimate(self, tokens: int, *, exact: bool = False) -> ContextWindow:
        """The same window with a new prompt figure (a new request: no measurement of it yet)."""
        return dataclasses.replace(self, estimated_prompt_tokens=tokens, measured_prompt_tokens=None, exact=exact)

    def with_measured(self, tokens: int) -> ContextWindow:
        """The same window with the prompt tokens the provider reported for the request just sent."""
        return dataclasses.replace(self, measured_prompt_tokens=tokens)

    @classmethod
    def for_model(
        cls,
        model: str,
        *,
        reserved_output_tokens: int | None = None,
        max_tokens: int | None = None,
    ) -> ContextWindow:
        """A window sized by ``context_window_for(model)`` unless ``max_tokens`` is given.

        ``reserved_output_tokens`` defaults to ``min(DEFAULT_RESERVED_OUTPUT_TOKENS, max_tokens // 4)``:
        enough for a typical reply without starving small windows.

        Raises:
            ModelNotFound: No override, built-in entry or genai-prices entry gives a size.
            ConfigurationError: The explicit numbers are invalid.
        """
        size = context_window_for(model) if max_tokens is None else max_tokens
        if reserved_output_tokens is None:
            _check_count("max_tokens", size, minimum=1)
            reserved_output_tokens = min(DEFAULT_RESERVED_OUTPUT_TOKENS, size // 4)
        return cls(model=model, max_tokens=size, reserved_output_tokens=reserved_output_tokens)


# ------------------------------------------------------------------------------------------ sizes
def register_context_window(model: str, tokens: int) -> int | None:
    """Set the context size for ``model``, overriding every other source; returns the previous override.

    ``"provider:model"`` applies to that provider only; a bare name applies under any provider.
    """
    key = _check_model(model).lower()
    size = _check_count("tokens", tokens, minimum=1)
    with _OVERRIDES_LOCK:
        previous = _OVERRIDES.get(key)
        _OVERRIDES[key] = size
    return previous


def unregister_context_window(model: str) -> bool:
    """Remove an override; True when one existed."""
    with _OVERRIDES_LOCK:
        return _OVERRIDES.pop(_check_model(model).lower(), None) is not None


@functools.lru_cache(maxsize=1024)
def _genai_lookup(model: str, provider: str | None) -> tuple[str | None, int | None]:
    """``(matched "provider:model" or None, context window or None)`` from genai-prices' bundled data."""
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:  # pragma: no cover - a declared dependency
        return None, None
    snapshot = get_snapshot()
    if provider is not None:
        try:
            snapshot.find_provider(None, provider, None)
        except LookupError:
            provider = None  # a host genai-prices does not list (e.g. ollama): match by model name alone
    try:
        found_provider, info = snapshot.find_provider_model(model, None, provider, None)
    except LookupError:
        return None, None
    return f"{found_provider.id}:{info.id}", info.context_window


def context_window_for(model: str) -> int:
    """The context size of ``model`` (``"gpt-4o"``, ``"openai:gpt-4o"``, ``"groq:llama-3.3-70b-versatile"``).

    Raises:
        ModelNotFound: No source knows the model, or its entry has no size; the hint says how to add one.
        ConfigurationError: ``model`` is not a non-empty string.
    """
    name = _check_model(model)
    provider, bare = _split_provider(name)
    with _OVERRIDES_LOCK:
        override = _OVERRIDES.get(name.lower()) or _OVERRIDES.get(bare.lower())
    if override is not None:
        return override
    builtin = _BUILTIN.get(bare.lower())
    if builtin is not None:
        return builtin
    matched, window = _genai_lookup(bare, provider)
    if matched is None and provider is not None:  # "qwen2:7b" may be a tag, not a provider prefix
        matched, window = _genai_lookup(name, None)
    if window is not None:
        return window
    detail = f"genai-prices lists {matched!r} without a context window" if matched else "no known context size"
    raise ModelNotFound(model, detail=detail, hint=_HINT.format(model=name))
