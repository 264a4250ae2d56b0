"""What the harness knows about a model before calling it: window, output cap and capabilities.

Profiles drive decisions that must be made up front: the context-window budget, how to request
structured output (provider-native JSON schema or a forced tool call), and whether streaming and
parallel tool calls are available.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._errors import ConfigurationError

__all__ = ["ModelProfile", "StructuredOutputSupport"]

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

    def __post_init__(self) -> None:
        for field_name in ("context_window", "max_output_tokens"):
            value = getattr(self, field_name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ConfigurationError(f"{field_name} must be a positive int or None, got {value!r}")
