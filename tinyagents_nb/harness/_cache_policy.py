"""Cache policy and prompt-cache layout: what may be cached, and whether the cacheable prefix held.

Providers cache the longest prefix a request shares with an earlier one. A prefix that only
*grows* (history appended to) keeps its cache; a prefix whose earlier part changes (a new system
prompt, different tools, a rewritten message) misses. ``PromptCacheLayout`` records a prompt's
prefix message by message so ``is_prefix_stable_against`` can tell those apart, and
``CacheLayoutEvent`` (``cache.layout``) reports, per model call, which of them happened.
``CachePolicy`` gates the local response cache and the provider prompt-cache breakpoints.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._events import AgentEvent
from ._messages import Message, dump_messages
from ._model import ToolSchema

__all__ = ["CacheLayoutEvent", "CachePolicy", "PrefixStatus", "PromptCacheLayout", "message_digests"]

PrefixStatus: TypeAlias = Literal["first", "same", "appended", "prefix_changed", "rewritten"]
"""How a request's prompt relates to the run's previous one: the first call, identical, the same
prefix with messages appended (the cache holds), the stable prefix (system messages, tools) changed,
or earlier messages rewritten (the cache misses from the first difference on)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CachePolicy:
    """Which caches a harness uses.

    Attributes:
        response_cache: Consult and fill the local response cache (``RunPolicy.response_cache`` or
            the context's); ``False`` bypasses it, e.g. for a run that must sample afresh.
        prompt_cache: Let provider adapters place prompt-cache breakpoints (Anthropic's
            ``cache_control``); ``False`` sends requests without them.
    """

    response_cache: bool = True
    prompt_cache: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheLayoutEvent(AgentEvent):
    """The prompt-cache layout of one model call, compared with the run's previous call.

    ``stable_messages`` leading messages form the stable prefix; ``shared_messages`` is how many
    leading messages this request shares with the previous one (what a provider cache can reuse).
    """

    kind: Literal["cache.layout"] = "cache.layout"
    status: str
    stable_messages: int = 0
    shared_messages: int = 0
    messages: int = 0
    tools: int = 0
    prompt_cache: bool = True


def message_digests(messages: Sequence[Message]) -> tuple[str, ...]:
    """A short content digest per message (model-visible fields only), for prefix comparisons."""
    out = []
    for record in dump_messages(messages):
        blob = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        out.append(hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16])
    return tuple(out)


def tools_digest(tools: Sequence[ToolSchema]) -> str:
    """A short digest of tool schemas as a provider sees them (name, description, parameters, strict)."""
    blob = json.dumps(
        [[t.name, t.description, dict(t.parameters), t.strict] for t in tools], sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptCacheLayout:
    """Where a built prompt's cacheable prefix ends, and its identity.

    Attributes:
        fingerprint: ``PromptBuilder.fingerprint()`` at the time of the layout.
        segments: ``(kind, name)`` of every segment, in order.
        stable_segments: How many leading segments are stable.
        stable_messages: How many leading messages of ``build()``'s request form the stable prefix.
        prefix_digests: One digest per stable-prefix message (``message_digests``).
        tools_digest: A digest of the tool schemas in the prefix.
    """

    fingerprint: str
    segments: tuple[tuple[str, str], ...]
    stable_segments: int
    stable_messages: int
    prefix_digests: tuple[str, ...] = ()
    tools_digest: str = ""

    def is_prefix_stable_against(self, other: PromptCacheLayout) -> bool:
        """Whether a provider's cached prefix from ``other`` still applies to this prompt.

        True when the stable segments are identical, and also when this prefix is ``other``'s with
        messages appended (history grew): a provider reuses the shared part. False when the tools
        or any message of ``other``'s prefix changed.
        """
        if self.fingerprint == other.fingerprint:
            return True
        if self.tools_digest != other.tools_digest or not other.prefix_digests:
            return False
        theirs = other.prefix_digests
        return len(self.prefix_digests) >= len(theirs) and self.prefix_digests[: len(theirs)] == theirs


def shared_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
