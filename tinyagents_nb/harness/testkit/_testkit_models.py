"""Fake chat models for deterministic tests: scripted, streaming, slow, echoing and programmable.

Every fake answers ``invoke`` and ``stream`` from the same source, so a test can drive the unary and
the streaming path of the loop with one script: ``collect_stream(model.stream(r))`` equals what
``invoke(r)`` returns (tool calls and usage included). Each records the requests it received in
``.requests`` (the request objects themselves, never copies) so a test can assert on exactly what
the loop sent. Delays use ``anyio.sleep``, a real timer, so cancellation and timeouts behave as they
do against a slow provider and nothing busy-waits.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

import anyio

from .._clock import IdSource
from .._errors import ConfigurationError, ProviderError
from .._messages import AssistantMessage, TextDelta, ThinkingBlock, ThinkingDelta, ToolCall, ToolCallDelta, UserMessage
from .._model import ChatModel, ModelRequest, ModelResponse, ModelStreamItem, StreamBlock, StreamFinish, StreamUsage
from .._profile import ModelProfile
from .._usage import Usage

__all__ = ["EchoModel", "FunctionModel", "ScriptedModel", "SlowModel", "StreamingMock"]

_PROVIDER: Final = "test"
_WORDS: Final = re.compile(r"\s*\S+\s*|\s+")  # word-sized chunks that re-join to the exact text
_call_ids = itertools.count(1)  # process-wide, so scripted tool-call ids never collide across turns


def _check_name(name: object, *, what: str = "model_name") -> str:
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{what} must be a non-empty string, got {name!r}")
    return name


def _check_delay(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigurationError(f"{name} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _check_chunk_size(chunk_size: object) -> int | None:
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ConfigurationError(f"chunk_size must be a positive int or None, got {chunk_size!r}")
    return chunk_size


def _chunks(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def _stream_items(response: ModelResponse, chunk_size: int | None) -> list[ModelStreamItem]:
    """How ``response`` would arrive from a streaming provider; ``StreamAccumulator`` folds it back.

    Reasoning, then text, then each tool call as three fragments (id and name, then the argument
    JSON in two halves, to exercise joining), then usage (when any) and the finish marker. Thinking
    blocks (signed reasoning) follow the reasoning deltas as ``StreamBlock``s; other ``blocks`` and
    ``tags`` have no stream form and are not sent.
    """
    message = response.message
    items: list[ModelStreamItem] = [ThinkingDelta(text=part) for part in _chunks(message.reasoning or "", chunk_size)]
    items.extend(StreamBlock(block=block) for block in message.blocks if isinstance(block, ThinkingBlock))
    items.extend(TextDelta(text=part) for part in _chunks(message.text, chunk_size))
    for index, call in enumerate(message.tool_calls):
        arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(dict(call.arguments))
        half = len(arguments) // 2
        items.append(ToolCallDelta(index=index, id=call.id, name=call.name))
        items.append(ToolCallDelta(index=index, arguments=arguments[:half]))
        items.append(ToolCallDelta(index=index, arguments=arguments[half:]))
    if not response.usage.is_empty:
        items.append(StreamUsage(usage=response.usage))
    items.append(StreamFinish(finish_reason=response.finish_reason, model=response.model))
    return items


_NO_USAGE: Final = Usage()


def _text_response(
    text: str, *, model: str | None = None, usage: Usage | None = None, reasoning: str | None = None
) -> ModelResponse:
    return ModelResponse(
        message=AssistantMessage(text=text, reasoning=reasoning),
        usage=usage if usage is not None else _NO_USAGE,
        finish_reason="stop",
        model=model,
    )


class _FakeModel:
    """Shared identity and request recording of the fakes."""

    def __init__(self, *, model_name: str, profile: ModelProfile | None) -> None:
        self._model_name = _check_name(model_name)
        if profile is not None and not isinstance(profile, ModelProfile):
            raise ConfigurationError(f"profile must be a ModelProfile or None, got {type(profile).__name__}")
        self._profile = profile
        self.requests: list[ModelRequest] = []
        """Every request received, in order (the objects themselves)."""

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider(self) -> str:
        return _PROVIDER

    @property
    def profile(self) -> ModelProfile | None:
        """The profile given at construction (``None``: the model's limits are unknown)."""
        return self._profile

    @property
    def calls(self) -> int:
        """How many times the model was asked (``invoke`` and ``stream`` together)."""
        return len(self.requests)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self._model_name!r}, calls={self.calls})"


class ScriptedModel(_FakeModel):
    """Replays a script of responses, one per call, for both ``invoke`` and ``stream``.

    Args:
        responses: In call order. A ``ModelResponse`` is returned as is; a ``str`` is shorthand for
            ``ScriptedModel.text(...)``; an exception instance is raised on that call (to exercise
            retry and fallback).
        model_name: Reported as ``model_name``; also the ``model`` of responses built from a ``str``.
        chunk_size: Characters per text/reasoning delta when streaming; ``None`` sends each whole.
        profile: Optional ``ModelProfile`` (context window, capabilities).
        ids: When given, every tool call of a response gets a fresh id from it as the response is
            served (replacing the script's ids): share the policy's ``DeterministicIds`` and two
            identical runs carry identical tool-call ids, however many scripts the process built.

    Raises:
        ProviderError: From a call after the script is used up (``retryable=False``, so a retry
            policy fails fast instead of sleeping through attempts).
    """

    def __init__(
        self,
        responses: Sequence[ModelResponse | BaseException | str],
        *,
        model_name: str = "scripted",
        chunk_size: int | None = 8,
        profile: ModelProfile | None = None,
        ids: IdSource | None = None,
    ) -> None:
        super().__init__(model_name=model_name, profile=profile)
        self._ids = ids
        if isinstance(responses, str | ModelResponse | BaseException):
            raise ConfigurationError(f"responses must be a sequence, not one item (did you mean [{responses!r}]?)")
        self._chunk_size = _check_chunk_size(chunk_size)
        script: list[ModelResponse | BaseException] = []
        for item in responses:
            if isinstance(item, str):
                script.append(_text_response(item, model=model_name))
            elif isinstance(item, ModelResponse | BaseException):
                script.append(item)
            else:
                raise ConfigurationError(
                    f"a scripted response must be a ModelResponse, str or exception instance, got {item!r}"
                )
        self._script = tuple(script)
        self._used = 0

    @property
    def remaining(self) -> int:
        """How many scripted items are left."""
        return len(self._script) - self._used

    def _next(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        used = self._used
        if used >= len(self._script):
            raise ProviderError(
                f"scripted model has no responses left ({used} used)", provider=_PROVIDER, model=self._model_name
            )
        self._used = used + 1
        item = self._script[used]
        if isinstance(item, BaseException):
            raise item
        ids = self._ids
        if ids is None or not item.message.tool_calls:
            return item
        calls = [replace(call, id=str(ids.call_id())) for call in item.message.tool_calls]
        return replace(item, message=replace(item.message, tool_calls=calls))

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        return self._next(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        for item in _stream_items(self._next(request), self._chunk_size):
            yield item

    @staticmethod
    def text(text: str, *, usage: Usage | None = None, reasoning: str | None = None) -> ModelResponse:
        """A final text answer (``finish_reason="stop"``)."""
        return _text_response(text, usage=usage, reasoning=reasoning)

    @staticmethod
    def tool_call(
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        text: str = "",
        usage: Usage | None = None,
    ) -> ModelResponse:
        """A turn that calls one tool; ``id`` defaults to a process-unique ``call_<n>``."""
        return ScriptedModel.tool_calls(
            [ToolCall(id=id or "", name=name, arguments=dict(arguments or {}))], text=text, usage=usage
        )

    @staticmethod
    def tool_calls(
        calls: Sequence[ToolCall | tuple[str, Mapping[str, Any]]],
        *,
        text: str = "",
        usage: Usage | None = None,
    ) -> ModelResponse:
        """A turn that calls several tools at once (``ToolCall``s or ``(name, arguments)`` pairs)."""
        built = []
        for call in calls:
            if not isinstance(call, ToolCall):
                name, arguments = call
                call = ToolCall(id="", name=name, arguments=dict(arguments))
            built.append(call if call.id else replace(call, id=f"call_{next(_call_ids)}"))
        return ModelResponse(
            message=AssistantMessage(text=text, tool_calls=built),
            usage=usage if usage is not None else _NO_USAGE,
            finish_reason="tool_calls",
        )

    def __repr__(self) -> str:
        return f"ScriptedModel(model_name={self._model_name!r}, used={self._used}/{len(self._script)})"


class StreamingMock(_FakeModel):
    """Always answers with the same text, streamed chunk by chunk with a real delay between chunks.

    Args:
        text: A ``str`` is streamed in word-sized chunks (each word with its surrounding spaces);
            a sequence of strings is streamed exactly as given.
        chunk_delay_s: Seconds to wait between chunks; ``invoke`` waits the same total before answering.
        usage: Reported usage, if any.
        model_name: Reported as ``model_name`` and as the responses' ``model``.
        profile: Optional ``ModelProfile``.
    """

    def __init__(
        self,
        text: str | Sequence[str],
        *,
        chunk_delay_s: float = 0.0,
        usage: Usage | None = None,
        model_name: str = "streaming-mock",
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(model_name=model_name, profile=profile)
        chunks = _WORDS.findall(text) if isinstance(text, str) else list(text)
        if not all(isinstance(chunk, str) for chunk in chunks):
            raise ConfigurationError("StreamingMock chunks must be strings")
        self._delay = _check_delay("chunk_delay_s", chunk_delay_s)
        self.chunks: tuple[str, ...] = tuple(chunk for chunk in chunks if chunk)
        self._deltas = tuple(TextDelta(text=chunk) for chunk in self.chunks)
        self._response = ModelResponse(
            message=AssistantMessage(text="".join(self.chunks)),
            usage=usage if usage is not None else _NO_USAGE,
            finish_reason="stop",
            model=model_name,
        )
        self._tail = _stream_items(replace(self._response, message=AssistantMessage()), None)

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self._delay and len(self._deltas) > 1:
            await anyio.sleep(self._delay * (len(self._deltas) - 1))
        return self._response

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        self.requests.append(request)
        for index, delta in enumerate(self._deltas):
            if index and self._delay:
                await anyio.sleep(self._delay)
            yield delta
        for item in self._tail:
            yield item


class SlowModel:
    """Wraps a model, adding latency before its answer and between its stream items.

    For cancellation and timeout tests: the waits are real ``anyio.sleep`` calls, so a cancel scope
    or cancellation token interrupts them exactly as it would a slow network read. Identity
    (``model_name``, ``provider``, ``profile``) is the inner model's.
    """

    def __init__(self, inner: ChatModel, *, delay_s: float = 0.0, chunk_delay_s: float = 0.0) -> None:
        if not isinstance(inner, ChatModel):
            raise ConfigurationError(f"SlowModel wraps a ChatModel, got {type(inner).__name__}")
        self.inner = inner
        self._delay = _check_delay("delay_s", delay_s)
        self._chunk_delay = _check_delay("chunk_delay_s", chunk_delay_s)
        self.requests: list[ModelRequest] = []
        """Every request received (recorded before the delay, so a cancelled call still counts)."""

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def profile(self) -> ModelProfile | None:
        profile: ModelProfile | None = getattr(self.inner, "profile", None)
        return profile

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self._delay:
            await anyio.sleep(self._delay)
        return await self.inner.invoke(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        self.requests.append(request)
        if self._delay:
            await anyio.sleep(self._delay)
        items = self.inner.stream(request)
        try:
            first = True
            async for item in items:
                if not first and self._chunk_delay:
                    await anyio.sleep(self._chunk_delay)
                first = False
                yield item
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()

    def __repr__(self) -> str:
        return f"SlowModel({self.inner!r}, delay_s={self._delay}, chunk_delay_s={self._chunk_delay})"


class EchoModel(_FakeModel):
    """Replies with ``prefix`` plus the text of the last user message (empty when there is none).

    Usage is a stand-in, not a tokenizer: ``input_tokens`` is the number of whitespace-separated
    words in the ``text`` of every request message, ``output_tokens`` the words in the reply. It is
    enough for accounting tests to see non-zero, predictable numbers.
    """

    def __init__(
        self,
        *,
        prefix: str = "",
        model_name: str = "echo",
        chunk_size: int | None = 8,
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(model_name=model_name, profile=profile)
        self.prefix = prefix
        self._chunk_size = _check_chunk_size(chunk_size)

    def _answer(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        last = next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)
        text = self.prefix + (last.text if last is not None else "")
        words_in = sum(len(message.text.split()) for message in request.messages)
        return ModelResponse(
            message=AssistantMessage(text=text),
            usage=Usage(input_tokens=words_in, output_tokens=len(text.split())),
            finish_reason="stop",
            model=self._model_name,
        )

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        return self._answer(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        for item in _stream_items(self._answer(request), self._chunk_size):
            yield item


FunctionModelFn = Callable[[ModelRequest], ModelResponse | str | Awaitable[ModelResponse | str]]


class FunctionModel(_FakeModel):
    """Answers with ``fn(request)``: a ``ModelResponse`` or a text (``fn`` may be sync or async).

    For tests that need logic, e.g. "call the tool until its result appears, then answer". An
    exception raised by ``fn`` propagates from the call, as a provider error would.
    """

    def __init__(
        self,
        fn: FunctionModelFn,
        *,
        model_name: str = "function",
        chunk_size: int | None = 8,
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(model_name=model_name, profile=profile)
        if not callable(fn):
            raise ConfigurationError(f"FunctionModel needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self._chunk_size = _check_chunk_size(chunk_size)

    async def _answer(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        result = self.fn(request)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            return _text_response(result, model=self._model_name)
        if isinstance(result, ModelResponse):
            return result
        raise ConfigurationError(f"FunctionModel fn must return a ModelResponse or str, got {type(result).__name__}")

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        return await self._answer(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        for item in _stream_items(await self._answer(request), self._chunk_size):
            yield item
