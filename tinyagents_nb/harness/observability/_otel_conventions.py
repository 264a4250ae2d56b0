"""The GenAI semantic conventions' attribute names, per version, for ``OTelSink``.

The conventions are still "Development" and have renamed attributes more than once (``gen_ai.system``
became ``gen_ai.provider.name``; the cache-write token count moved from ``cache_creation`` to
``cache_write`` when the conventions left the main OpenTelemetry repository). A backend reads the
names of the version it was built for, so the sink lets the user pick one; ``docs/observability.md``
has the table these values spell out. A ``None`` name means that version defines no such attribute,
and the sink leaves the value out rather than invent a name for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from .._errors import ConfigurationError

__all__ = ["CONVENTIONS", "ConventionVersion", "GenAIConventions", "capture_from_env", "conventions_for"]

ConventionVersion = Literal["latest", "1.41", "1.36"]
"""``latest``: the GenAI conventions repository (v0.1); ``1.41``: the last in-repo release; ``1.36``: the
version older instrumentations keep emitting by default."""

# Our provider names -> the conventions' well-known values (unknown names pass through).
_PROVIDERS_NEW: Final = {
    "xai": "x_ai",
    "mistral": "mistral_ai",
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "azure": "azure.ai.openai",
    "bedrock": "aws.bedrock",
}
_PROVIDERS_136: Final = {
    "mistral": "mistral_ai",
    "azure": "az.ai.openai",
    "vertex": "vertex_ai",
    "bedrock": "aws.bedrock",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class GenAIConventions:
    """The attribute names one version of the conventions uses (``None``: the version has none)."""

    version: str
    provider: str
    cache_read_tokens: str | None
    cache_write_tokens: str | None
    reasoning_tokens: str | None
    tool_arguments: str | None
    tool_result: str | None
    input_messages: str | None
    output_messages: str | None
    providers: Mapping[str, str] = field(default_factory=dict)

    def provider_value(self, provider: str | None) -> str | None:
        """Our provider name as this version's well-known value."""
        if not provider:
            return None
        return self.providers.get(provider, provider)


_LATEST = GenAIConventions(
    version="latest",
    provider="gen_ai.provider.name",
    cache_read_tokens="gen_ai.usage.cache_read.input_tokens",
    cache_write_tokens="gen_ai.usage.cache_write.input_tokens",
    reasoning_tokens="gen_ai.usage.reasoning.output_tokens",
    tool_arguments="gen_ai.tool.call.arguments",
    tool_result="gen_ai.tool.call.result",
    input_messages="gen_ai.input.messages",
    output_messages="gen_ai.output.messages",
    providers=_PROVIDERS_NEW,
)

CONVENTIONS: Final[Mapping[str, GenAIConventions]] = {
    "latest": _LATEST,
    "1.41": GenAIConventions(
        version="1.41",
        provider="gen_ai.provider.name",
        cache_read_tokens="gen_ai.usage.cache_read.input_tokens",
        cache_write_tokens="gen_ai.usage.cache_creation.input_tokens",
        reasoning_tokens="gen_ai.usage.reasoning.output_tokens",
        tool_arguments="gen_ai.tool.call.arguments",
        tool_result="gen_ai.tool.call.result",
        input_messages="gen_ai.input.messages",
        output_messages="gen_ai.output.messages",
        providers=_PROVIDERS_NEW,
    ),
    "1.36": GenAIConventions(
        version="1.36",
        provider="gen_ai.system",
        cache_read_tokens=None,
        cache_write_tokens=None,
        reasoning_tokens=None,
        tool_arguments=None,
        tool_result=None,
        input_messages=None,
        output_messages=None,
        providers=_PROVIDERS_136,
    ),
}
"""Every version the sink can emit, by name."""


def conventions_for(version: str | None) -> GenAIConventions:
    """The names of ``version`` (``None``: ``latest``, which ``OTEL_SEMCONV_STABILITY_OPT_IN`` also asks for).

    Raises:
        ConfigurationError: An unknown version (the message lists the known ones).
    """
    found = CONVENTIONS.get(version or "latest")
    if found is None:
        raise ConfigurationError(f"unknown GenAI conventions version {version!r}; use one of {sorted(CONVENTIONS)}")
    return found


_CAPTURE_ON: Final = frozenset({"true", "1", "yes", "span_only", "span_and_event"})


def capture_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for content on spans.

    ``SPAN_ONLY``/``SPAN_AND_EVENT`` (and the older ``true``) turn it on; ``NO_CONTENT``, ``EVENT_ONLY``
    (the sink writes no content events) or anything else leave it off.
    """
    env = os.environ if environ is None else environ
    return env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() in _CAPTURE_ON
