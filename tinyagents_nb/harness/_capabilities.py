"""What a call needs from a model and which model served it: ``CapabilitySet``, ``ModelHint``, ``ResolvedModel``.

These are plain values (no model, registry or loop here) so requests, responses, profiles and the
selection logic can all speak of them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal, TypeAlias

from ._errors import ConfigurationError

if TYPE_CHECKING:
    from ._profile import ModelProfile

__all__ = ["CapabilitySet", "ModelHint", "ModelResolutionSource", "ModelSelection", "ResolvedModel"]

ModelResolutionSource: TypeAlias = Literal["configured", "fallback", "capabilities", "cache", "hint", "registry"]
"""Why this model served the call: the harness's own model, a fallback after an error, the first of
the chain that has the required capabilities, a cached response, a ``ModelHint`` name, or the first
registered model that fits."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CapabilitySet:
    """Capabilities a model has (from its profile) or a call requires (``False`` / ``None``: not required).

    Attributes:
        tools: Can call tools.
        structured_output: Can return structured output natively or by a forced tool call.
        vision: Accepts images.
        reasoning: Reports reasoning (thinking) content or tokens.
        streaming: Can stream.
        context_tokens: The context window; as a requirement, the smallest acceptable window.
    """

    tools: bool = False
    structured_output: bool = False
    vision: bool = False
    reasoning: bool = False
    streaming: bool = False
    context_tokens: int | None = None

    def __post_init__(self) -> None:
        size: object = self.context_tokens
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
            raise ConfigurationError(f"context_tokens must be a positive int or None, got {size!r}")

    @classmethod
    def of(cls, profile: ModelProfile) -> CapabilitySet:
        """What a model with ``profile`` can do."""
        return cls(
            tools=profile.supports_tools,
            structured_output=profile.structured_output != "none",
            vision=profile.supports_vision,
            reasoning=profile.supports_reasoning,
            streaming=profile.supports_streaming,
            context_tokens=profile.context_window,
        )

    def missing(self, required: CapabilitySet) -> tuple[str, ...]:
        """The names of ``required`` capabilities this set lacks (empty: it covers them).

        A required ``context_tokens`` is missing when this set's window is unknown or smaller.
        """
        out = [
            f.name
            for f in fields(self)
            if f.name != "context_tokens" and getattr(required, f.name) and not getattr(self, f.name)
        ]
        need = required.context_tokens
        if need is not None and (self.context_tokens is None or self.context_tokens < need):
            out.append("context_tokens")
        return tuple(out)

    def covers(self, required: CapabilitySet) -> bool:
        return not self.missing(required)

    def merge(self, other: CapabilitySet) -> CapabilitySet:
        """Both sets of requirements at once (the larger window)."""
        sizes = [s for s in (self.context_tokens, other.context_tokens) if s is not None]
        return CapabilitySet(
            tools=self.tools or other.tools,
            structured_output=self.structured_output or other.structured_output,
            vision=self.vision or other.vision,
            reasoning=self.reasoning or other.reasoning,
            streaming=self.streaming or other.streaming,
            context_tokens=max(sizes) if sizes else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelHint:
    """Which models a call would like, in order of preference.

    Attributes:
        names: Registered names (or model strings) to try first, in order.
        provider: Only models of this provider.
    """

    names: tuple[str, ...] = ()
    provider: str | None = None

    def __post_init__(self) -> None:
        names: object = self.names
        if isinstance(names, str):
            object.__setattr__(self, "names", (names,))
        elif not isinstance(names, tuple):
            object.__setattr__(self, "names", tuple(self.names))


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSelection:
    """A request for a model: a hint and the capabilities the call needs."""

    hint: ModelHint | None = None
    required: CapabilitySet = CapabilitySet()


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedModel:
    """Which concrete model served a call, and why (recorded on every ``ModelResponse`` the loop returns)."""

    provider: str
    model: str
    source: ModelResolutionSource = "configured"
