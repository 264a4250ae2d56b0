"""Building blocks for writing a provider adapter: the pieces the built-in adapters are made of.

A new adapter meets the same wire problems the built-in ones solve, so it can reuse their answers:
``SSEDecoder`` turns network bytes into ``SSEEvent``s whatever the chunk boundaries;
``ChunkParser`` folds an OpenAI-compatible Chat Completions stream into stream items and
``EventParser`` an Anthropic Messages stream; the Anthropic Messages codec builds a request body
(``anthropic_body`` with ``AnthropicWireOptions``: cache breakpoints, thinking, tool choice, native
JSON; ``anthropic_tools`` once per tool set) and reads a unary response (``parse_anthropic_message``),
for an adapter to an Anthropic-compatible endpoint; ``normalize_usage`` reads OpenAI-style usage JSON
(with the vendors' variants) as ``Usage``; ``error_from_payload`` maps an ``{"error": ...}`` body
to the typed error the retry policy understands and ``parse_retry_after`` reads the wait a
response asks for, ``parse_rate_limit_headers`` the rate-limit state it reports; ``scrub``/``scrub_value`` remove keys and bearer tokens from anything that will
reach an error message; ``PerLoopClients`` keeps one HTTP client per event loop, so one model
object can serve several threads' loops.
"""

from __future__ import annotations

from ._anthropic_stream import EventParser as EventParser
from ._anthropic_wire import (
    WireOptions as AnthropicWireOptions,
    build_body as anthropic_body,
    parse_message as parse_anthropic_message,
    tools_payload as anthropic_tools,
)
from ._loop_clients import PerLoopClients as PerLoopClients
from ._openai_errors import (
    error_from_payload as error_from_payload,
    parse_retry_after as parse_retry_after,
    scrub as scrub,
    scrub_value as scrub_value,
)
from ._openai_wire import (
    ChunkParser as ChunkParser,
    normalize_usage as normalize_usage,
)
from ._ratelimit import parse_rate_limit_headers as parse_rate_limit_headers
from ._sse import (
    SSEDecoder as SSEDecoder,
    SSEEvent as SSEEvent,
)

__all__ = [
    "AnthropicWireOptions",
    "ChunkParser",
    "EventParser",
    "PerLoopClients",
    "SSEDecoder",
    "SSEEvent",
    "anthropic_body",
    "anthropic_tools",
    "error_from_payload",
    "normalize_usage",
    "parse_anthropic_message",
    "parse_rate_limit_headers",
    "parse_retry_after",
    "scrub",
    "scrub_value",
]
