"""Provider-neutral model calls: the ``ChatModel`` protocol, requests, responses and stream items.

A provider answers a ``ModelRequest`` either at once (``invoke``) or as a stream of small items
(``stream``): text, reasoning and tool-call fragments, then usage and a finish marker.
``StreamAccumulator`` folds a stream back into the ``ModelResponse`` that ``invoke`` would have
returned, so the loop handles both paths the same way and a dropped stream still leaves the
partial text that arrived.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ._capabilities import CapabilitySet, ResolvedModel
from ._errors import ConfigurationError
from ._messages import (
    AssistantMessage,
    InventedCallIds,
    Message,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
)
from ._usage import Usage

__all__ = [
    "ChatModel",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamItem",
    "ResponseFormat",
    "StreamAccumulator",
    "StreamBlock",
    "StreamFinish",
    "StreamUsage",
    "ToolChoice",
    "ToolSchema",
    "collect_stream",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSchema:
    """What the model sees of a tool: name, description and the JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ResponseFormat:
    """The requested shape of the final answer.

    ``json_schema`` asks the provider to constrain output to ``schema`` (provider-native structured
    output); ``json_object`` asks only for valid JSON; ``text`` is the default.
    """

    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str = "output"
    schema: Mapping[str, Any] | None = None
    strict: bool = True


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""``auto``/``none``/``required``, or the name of one tool the model must call."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    """One model call.

    Attributes:
        messages: The transcript to send.
        tools: Tool schemas the model may call.
        tool_choice: Whether and which tool must be called.
        response_format: Structured-output request, if any.
        model: A model hint; a provider that serves one model ignores it.
        max_output_tokens: Cap on generated tokens.
        temperature: Sampling temperature.
        settings: Extra provider parameters passed through as-is (e.g. ``{"seed": 7}``).
        thread_id: The conversation, so providers that key prompt caches by user/thread can do so.
        required_capabilities: What the serving model must be able to do; the loop sends the call to
            the first model of its chain whose profile covers it.
        prompt_cache: Whether the adapter may place provider prompt-cache breakpoints
            (``CachePolicy.prompt_cache``).
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSchema] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    model: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    thread_id: str | None = None
    required_capabilities: CapabilitySet | None = None
    prompt_cache: bool = True

    def with_messages(self, messages: Sequence[Message]) -> ModelRequest:
        return replace(self, messages=messages)

    def with_required_capabilities(
        self, capabilities: CapabilitySet | None = None, **flags: bool | int
    ) -> ModelRequest:
        """This request, also requiring ``capabilities`` and/or ``flags`` (``vision=True``, ``context_tokens=...``)."""
        try:
            wanted = CapabilitySet(**flags)  # type: ignore[arg-type]
        except TypeError:
            raise ConfigurationError(
                f"unknown capability in {sorted(flags)}; known: tools, structured_output, vision, reasoning, "
                "streaming, context_tokens"
            ) from None
        if capabilities is not None:
            wanted = wanted.merge(capabilities)
        if self.required_capabilities is not None:
            wanted = wanted.merge(self.required_capabilities)
        return replace(self, required_capabilities=wanted)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponse:
    """A model's answer: the assistant message, what it cost in tokens, and who served it."""

    message: AssistantMessage
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None
    provider: str | None = None
    resolved: ResolvedModel | None = None
    response_id: str | None = None
    """The provider's id for this response (``chatcmpl-…``, ``msg_…``), when it sent one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamUsage:
    """Token usage reported by a stream (usually in its last chunk)."""

    usage: Usage
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamFinish:
    """The end of a stream: why the model stopped and which model served it."""

    finish_reason: str | None = None
    model: str | None = None
    type: Literal["finish"] = "finish"
    response_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamBlock:
    """A finished content block the reply must keep verbatim, e.g. a signed ``ThinkingBlock``.

    Its text already arrived as deltas; this item carries what deltas cannot (the signature), so
    the accumulated message can be sent back exactly as the provider requires.
    """

    block: ThinkingBlock
    type: Literal["block"] = "block"


ModelStreamItem: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | StreamBlock | StreamUsage | StreamFinish


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a ``ModelRequest``: a remote provider, a local model, a test fake."""

    @property
    def model_name(self) -> str:
        """The concrete model, e.g. ``"gpt-4o-mini"``."""
        ...

    @property
    def provider(self) -> str:
        """The provider's name, e.g. ``"openai"`` (``"test"`` for fakes)."""
        ...

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        """Answer the request in one piece."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Answer the request incrementally."""
        ...


class StreamAccumulator:
    """Folds stream items into a ``ModelResponse``; tool-call fragments are joined by ``index``.

    A call's id is the last non-empty id its fragments carried (the built-in adapters send it with
    the first fragment, and invent one when the provider sent none); a call still without one gets
    an invented id unique to this response (``InventedCallIds``), never a bare position.
    """

    __slots__ = (
        "_blocks", "_calls", "_finish", "_id", "_invented", "_model", "_provider", "_reasoning", "_text", "_usage",
    )  # fmt: skip

    def __init__(self, *, model: str | None = None, provider: str | None = None) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, list[str | None]] = {}
        self._blocks: list[ThinkingBlock] = []
        self._usage = Usage()
        self._finish: str | None = None
        self._id: str | None = None
        self._model = model
        self._provider = provider
        self._invented = InventedCallIds()

    def add(self, item: ModelStreamItem) -> None:
        if isinstance(item, TextDelta):
            self._text.append(item.text)
        elif isinstance(item, ThinkingDelta):
            self._reasoning.append(item.text)
        elif isinstance(item, ToolCallDelta):
            slot = self._calls.get(item.index)
            if slot is None:
                self._calls[item.index] = [item.id, item.name, item.arguments]
            else:
                slot[0] = item.id or slot[0]  # a provider id sent late replaces one an adapter invented
                slot[1] = slot[1] or item.name
                slot[2] = (slot[2] or "") + item.arguments
        elif isinstance(item, StreamUsage):
            self._usage = item.usage
        elif isinstance(item, StreamBlock):
            self._blocks.append(item.block)
        else:
            self._finish = item.finish_reason or self._finish
            self._model = item.model or self._model
            self._id = item.response_id or self._id

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self._text)

    def response(self) -> ModelResponse:
        """The response assembled from everything received so far."""
        calls = []
        for position, index in enumerate(sorted(self._calls)):
            call_id, name, arguments = self._calls[index]
            calls.append(
                ToolCall.from_json_arguments(
                    id=call_id or self._invented(position), name=name or "", arguments=arguments or ""
                )
            )
        message = AssistantMessage(
            text="".join(self._text),
            tool_calls=calls,
            reasoning="".join(self._reasoning) or None,
            blocks=self._blocks,
        )
        return ModelResponse(
            message=message,
            usage=self._usage,
            finish_reason=self._finish,
            model=self._model,
            provider=self._provider,
            response_id=self._id,
        )


async def collect_stream(stream: AsyncIterator[ModelStreamItem]) -> ModelResponse:
    """Consume a whole stream into one response."""
    acc = StreamAccumulator()
    async for item in stream:
        acc.add(item)
    return acc.response()
