"""Provider-neutral chat shapes: messages, content blocks, tool calls and streaming deltas.

Messages are frozen keyword-only dataclasses tagged by ``role`` (blocks and deltas by ``type``) so
the loop can share them between transcripts without copying. Pydantic is used only at the edge, to
round-trip a transcript through JSON losslessly (``dump_messages`` / ``load_messages``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

__all__ = [
    "RETRIEVED_TAG",
    "AssistantMessage",
    "ContentBlock",
    "ImageRef",
    "InventedCallIds",
    "JsonBlock",
    "Message",
    "MessageDelta",
    "SystemMessage",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolMessage",
    "UserMessage",
    "dump_messages",
    "load_messages",
    "messages_from_json",
    "messages_to_json",
]

RETRIEVED_TAG = "retrieved"
"""Tag on messages that carry retrieved, nonessential context: the pressure chain drops these first."""
REPAIR_TAG = "structured_repair"
"""Tag on the user message asking the model to fix an invalid structured answer: a follow-up within
the current turn, not a new question (trimming keeps it with the question it follows)."""
SUMMARY_TAG = "summary"
"""Tag on the system message that carries a summary; the next compaction folds it into the new one."""

JsonValue: TypeAlias = Any
"""A value that survives ``json.dumps``; kept as ``Any`` because recursive aliases defeat pydantic here."""


# ------------------------------------------------------------------------------------------ blocks
@dataclass(frozen=True, kw_only=True, slots=True)
class TextBlock:
    """Plain text content."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True, slots=True)
class JsonBlock:
    """Structured JSON content, e.g. a tool's machine-readable result."""

    data: JsonValue
    type: Literal["json"] = "json"


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageRef:
    """A reference to an image (URL or ``data:`` URI); the bytes are never inlined in the transcript."""

    url: str
    media_type: str | None = None
    detail: Literal["auto", "low", "high"] | None = None
    type: Literal["image"] = "image"


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingBlock:
    """Model reasoning; ``signature`` is the provider's opaque token for replaying it.

    Anthropic requires signed thinking blocks to be sent back unchanged with the turn that made
    them, so adapters keep them in ``AssistantMessage.blocks``. A ``redacted`` block has no
    readable text: ``signature`` then holds the provider's encrypted payload.
    """

    text: str
    signature: str | None = None
    redacted: bool = False
    type: Literal["thinking"] = "thinking"


ContentBlock: TypeAlias = Annotated[TextBlock | JsonBlock | ImageRef | ThinkingBlock, Field(discriminator="type")]


# ------------------------------------------------------------------------------------------ tool calls
@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """A model's request to run one tool.

    Attributes:
        id: The provider's call id; the tool result answers it.
        name: The requested tool name (may be unknown to the registry).
        arguments: Parsed JSON arguments.
        raw_arguments: The argument text as received when it was not a JSON object, so a malformed call
            is reported to the model verbatim instead of being lost.
    """

    id: str
    name: str
    arguments: Mapping[str, JsonValue] = field(default_factory=dict)
    raw_arguments: str | None = None

    @property
    def arguments_valid(self) -> bool:
        return self.raw_arguments is None

    @classmethod
    def from_json_arguments(cls, *, id: str, name: str, arguments: str) -> ToolCall:
        """Build a call from the wire's JSON argument string, keeping the raw text if it does not parse."""
        text = arguments.strip() or "{}"
        try:
            parsed = json.loads(text)
        except ValueError:
            return cls(id=id, name=name, arguments={}, raw_arguments=arguments)
        if not isinstance(parsed, dict):
            return cls(id=id, name=name, arguments={}, raw_arguments=arguments)
        return cls(id=id, name=name, arguments=parsed)


class InventedCallIds:
    """Ids for the tool calls of one response that came without one, e.g. ``call_5f0c2a9e41b7_0``.

    Some OpenAI-compatible servers (local ones, some proxies) send tool calls without an id. An id
    made from the position alone (``call_0``) repeats every turn, and everything keyed by call id
    (tool results, approvals, journals, pressure stores) would mix the calls up. One random stem per
    response, plus the call's position, keeps ids unique across turns and stable within a response,
    so a streamed call keeps its id across deltas. The stem is drawn on first use only: providers
    that send ids pay nothing. Hex keeps the ids valid on every host (Anthropic allows
    ``[A-Za-z0-9_-]``).
    """

    __slots__ = ("_stem",)

    def __init__(self) -> None:
        self._stem: str | None = None

    def __call__(self, position: int) -> str:
        if self._stem is None:
            self._stem = f"call_{os.urandom(6).hex()}"
        return f"{self._stem}_{position}"


# ------------------------------------------------------------------------------------------ messages
def _freeze_seq(obj: object, name: str) -> None:
    value = getattr(obj, name)
    if not isinstance(value, tuple):
        object.__setattr__(obj, name, tuple(value))


@dataclass(frozen=True, kw_only=True, slots=True)
class SystemMessage:
    """Instructions for the model; kept by every trimming and pressure action."""

    text: str
    tags: Sequence[str] = ()
    role: Literal["system"] = "system"

    def __post_init__(self) -> None:
        _freeze_seq(self, "tags")


@dataclass(frozen=True, kw_only=True, slots=True)
class UserMessage:
    """A user turn: text plus optional extra blocks (images, JSON)."""

    text: str = ""
    blocks: Sequence[ContentBlock] = ()
    name: str | None = None
    tags: Sequence[str] = ()
    role: Literal["user"] = "user"

    def __post_init__(self) -> None:
        _freeze_seq(self, "blocks")
        _freeze_seq(self, "tags")


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantMessage:
    """A model turn: text, tool calls and, when the provider exposes it, reasoning."""

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    reasoning: str | None = None
    blocks: Sequence[ContentBlock] = ()
    tags: Sequence[str] = ()
    role: Literal["assistant"] = "assistant"

    def __post_init__(self) -> None:
        _freeze_seq(self, "tool_calls")
        _freeze_seq(self, "blocks")
        _freeze_seq(self, "tags")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolMessage:
    """The result of one tool call; always follows the assistant message that made the call."""

    tool_call_id: str
    name: str
    text: str
    is_error: bool = False
    blocks: Sequence[ContentBlock] = ()
    tags: Sequence[str] = ()
    role: Literal["tool"] = "tool"

    def __post_init__(self) -> None:
        _freeze_seq(self, "blocks")
        _freeze_seq(self, "tags")


Message: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


# ------------------------------------------------------------------------------------------ deltas
@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    """A fragment of assistant text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDelta:
    """A fragment of model reasoning."""

    text: str
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call; fragments with the same ``index`` belong to one call."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    type: Literal["tool_call"] = "tool_call"


MessageDelta: TypeAlias = Annotated[TextDelta | ThinkingDelta | ToolCallDelta, Field(discriminator="type")]


# ------------------------------------------------------------------------------------------ JSON edge
@cache
def _adapter() -> TypeAdapter[list[Message]]:
    return TypeAdapter(list[Message])


def dump_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as JSON-able dicts (the inverse of ``load_messages``)."""
    dumped: list[dict[str, Any]] = _adapter().dump_python(list(messages), mode="json")
    return dumped


def load_messages(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Validate JSON-able dicts back into messages; raises ``pydantic.ValidationError`` on bad input."""
    return _adapter().validate_python(list(data))


def messages_to_json(messages: Sequence[Message]) -> str:
    """Serialize a transcript to a JSON string."""
    return _adapter().dump_json(list(messages)).decode()


def messages_from_json(text: str | bytes) -> list[Message]:
    """Parse a transcript serialized by ``messages_to_json``."""
    return _adapter().validate_json(text)


def stable_prefix_len(messages: Sequence[Message]) -> int:
    """Leading system messages that are neither retrieved nor a summary: the cacheable prefix.

    Prompt caching and every compaction agree on this boundary, so it lives with the messages.
    """
    n = 0
    for m in messages:
        if not isinstance(m, SystemMessage) or RETRIEVED_TAG in m.tags or SUMMARY_TAG in m.tags:
            break
        n += 1
    return n
