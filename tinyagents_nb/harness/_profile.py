"""What the harness knows about a model before calling it: window, output cap and capabilities.

Profiles drive decisions that must be made up front: the context-window budget, how to request
structured output (provider-native JSON schema or a forced tool call), and whether streaming and
parallel tool calls are available.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from ._errors import ConfigurationError, ModelNotFound

__all__ = ["ModelProfile", "StructuredOutputSupport", "claude_facts", "profile_for"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


StructuredOutputSupport = Literal["native", "tool", "json_object", "none"]
"""How a model can be made to return structured output: a JSON-schema response format (``native``),
a forced tool call (``tool``), plain JSON mode (``json_object``), or not at all."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelProfile:
    """Static facts about one model.

    Attributes:
        name: The model name as the provider knows it.
        provider: The provider's name.
        context_window: Total tokens (prompt + output) the model accepts, when known.
        max_output_tokens: The model's cap on generated tokens, when known.
        supports_tools: Whether the model can call tools.
        supports_parallel_tool_calls: Whether one turn may contain several tool calls.
        supports_streaming: Whether ``stream`` is available.
        structured_output: The best structured-output strategy the model supports.
        supports_reasoning: Whether the model reports reasoning content or reasoning tokens.
        supports_vision: Whether the model accepts images.
    """

    name: str
    provider: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    supports_tools: bool = True
    supports_parallel_tool_calls: bool = True
    supports_streaming: bool = True
    structured_output: StructuredOutputSupport = "tool"
    supports_reasoning: bool = False
    supports_vision: bool = False

    def __post_init__(self) -> None:
        for field_name in ("context_window", "max_output_tokens"):
            value = getattr(self, field_name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ConfigurationError(f"{field_name} must be a positive int or None, got {value!r}")


# ------------------------------------------------------------------------------------------ Claude facts
# Anthropic's documented output caps by family, most specific first (ids look like
# "claude-sonnet-4-5-20250929", "claude-3-5-haiku-latest").
_CLAUDE_CAPS: Final = (
    (re.compile(r"claude-3-(?:opus|sonnet|haiku)", re.IGNORECASE), 4096),
    (re.compile(r"claude-3-5-", re.IGNORECASE), 8192),
    (re.compile(r"claude-opus-4(?:-[01])?(?:-\d{8}|-latest)?$", re.IGNORECASE), 32000),
    (re.compile(r"claude-", re.IGNORECASE), 64000),
)
_CLAUDE_NATIVE_JSON: Final = re.compile(r"claude-(?:opus|sonnet|haiku)-(?:4-[5-9]|[5-9])", re.IGNORECASE)
_GEMINI_THINKING: Final = re.compile(r"gemini-(?:2\.5|[3-9])", re.IGNORECASE)
_CLAUDE_THINKING: Final = re.compile(r"claude-(?:3-7-|(?:opus|sonnet|haiku)-[4-9])", re.IGNORECASE)


def claude_facts(model: str) -> tuple[int | None, bool, bool]:
    """``(max_output_tokens, native_json, thinking)`` for a Claude model id, from its family name.

    Native JSON (``output_config.format``) exists from the 4.5 generation on; extended thinking
    from Claude 3.7 on. Unknown names get ``(None, False, False)``.
    """
    cap = next((limit for pattern, limit in _CLAUDE_CAPS if pattern.search(model)), None)
    return cap, bool(_CLAUDE_NATIVE_JSON.search(model)), bool(_CLAUDE_THINKING.search(model))


_NATIVE_SCHEMA_RE: Final = re.compile(
    r"(?:ft:)?(?:gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1(?!-mini|-preview)|o[3-9])", re.IGNORECASE
)
_VISION_RE: Final = re.compile(
    r"gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|(?:^|[/:])o[1-9](?!-mini|-preview)|claude-(?:3|opus|sonnet|haiku)|gemini|vision|pixtral|llava",
    re.IGNORECASE,
)
_NO_TOOLS_RE: Final = re.compile(r"o1-(?:mini|preview)", re.IGNORECASE)
_REASONING_RE: Final = re.compile(
    r"(?:^|[/:])(?:o[1-9](?:-|$)|gpt-5(?!-chat))|reasoner|deepseek-r1|\br1\b|grok-3-mini|grok-4|thinking|qwq|magistral",
    re.IGNORECASE,
)


# ------------------------------------------------------------------------------------------ guessing
def profile_for(provider: str | _Named, model: str) -> ModelProfile:
    """A best-effort ``ModelProfile`` for ``model`` served by ``provider``.

    The context window comes from ``context_window_for`` (``None`` when no source knows it);
    capabilities come from the model name. Register an explicit profile for anything this guesses
    wrong.
    """
    from ._window import context_window_for  # lazy: the size data loads genai-prices

    provider_name = provider if isinstance(provider, str) else provider.name
    given: object = model
    if not isinstance(given, str) or not given.strip():
        raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
    try:
        window: int | None = context_window_for(f"{provider_name}:{model}")
    except ModelNotFound:
        window = None
    structured: StructuredOutputSupport = "tool"
    if provider_name == "openai" and _NATIVE_SCHEMA_RE.match(model):
        structured = "native"
    reasoning = bool(_REASONING_RE.search(model))
    cap = None
    if provider_name in ("anthropic", "anthropic-compat"):
        cap, native_json, thinking = claude_facts(model)
        native = provider_name == "anthropic"  # the compatibility endpoint ignores response_format and thinking
        structured = "native" if native and native_json else "tool"
        reasoning = native and thinking
    elif provider_name in ("compatible", "ollama"):
        # Local servers (llama.cpp's llama-server, Ollama, vLLM, LM Studio) constrain output to a
        # json_schema response format, while llama-server ignores a named tool_choice. A host that
        # rejects json_schema (llama-cpp-python's server) makes the run fall back to a tool call once,
        # remembered for the model (see StructuredTurn).
        structured = "native"
    elif provider_name == "gemini":  # the compatible endpoint honours json_schema response formats
        structured = "native"
        reasoning = reasoning or bool(_GEMINI_THINKING.search(model))
    return ModelProfile(
        name=model,
        provider=provider_name,
        context_window=window,
        max_output_tokens=cap,
        supports_tools=not _NO_TOOLS_RE.match(model),
        structured_output=structured,
        supports_reasoning=reasoning,
        supports_vision=bool(_VISION_RE.search(model)),
    )
