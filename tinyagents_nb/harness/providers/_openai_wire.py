"""The OpenAI Chat Completions wire format, as pure functions (no I/O, no httpx).

``_openai.OpenAIChatModel`` does the HTTP; everything here turns our values into request JSON and
the provider's JSON back into our values: messages and tools out; completions, stream chunks, usage
in. Keeping it I/O-free makes each mapping testable on its own and keeps the adapter small; error
bodies are mapped in ``_openai_errors``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import TinyAgentsError
from .._messages import (
    AssistantMessage,
    ImageRef,
    InventedCallIds,
    JsonBlock,
    Message,
    SystemMessage,
    TextBlock,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolMessage,
    UserMessage,
)
from .._model import ModelRequest, ModelResponse, ModelStreamItem, ResponseFormat, StreamFinish, StreamUsage, ToolSchema
from .._usage import Usage
from ._openai_errors import error_from_payload, malformed
from ._registry import ProviderSpec
from ._sse import SSEEvent

__all__ = [
    "ChunkParser",
    "build_body",
    "messages_payload",
    "normalize_usage",
    "parse_completion",
    "tools_payload",
]


# ------------------------------------------------------------------------------------------ request
def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _block_text(block: object) -> str | None:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, JsonBlock):
        return _dumps(block.data)
    return None  # images travel as image parts (see messages_payload); thinking blocks are not sent


def _image_part(block: ImageRef) -> dict[str, Any]:
    detail = {} if block.detail is None else {"detail": block.detail}
    return {"type": "image_url", "image_url": {"url": block.url, **detail}}


def _user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    if not message.blocks:
        return message.text
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "text": message.text})
    for block in message.blocks:
        if isinstance(block, ImageRef):
            parts.append(_image_part(block))
        else:
            text = _block_text(block)
            if text is not None:
                parts.append({"type": "text", "text": text})
    return parts


def _tool_call_payload(call: ToolCall) -> dict[str, Any]:
    arguments = call.raw_arguments if call.raw_arguments is not None else _dumps(dict(call.arguments))
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _tool_images(message: ToolMessage) -> list[dict[str, Any]]:
    """The image parts of a tool result, headed by a line naming the call they answer."""
    images = [_image_part(block) for block in message.blocks if isinstance(block, ImageRef)]
    head = f"The image{'s' if len(images) > 1 else ''} returned by tool call {message.tool_call_id} ({message.name}):"
    return [{"type": "text", "text": head}, *images] if images else []


def messages_payload(messages: Sequence[Message], *, send_names: bool = True) -> list[dict[str, Any]]:
    """Our transcript as Chat Completions ``messages``; reasoning is never sent back.

    A ``tool`` message holds text only: tool results' images follow their turn's tool messages in one ``user`` message.
    """
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for message in messages:
        if images and not isinstance(message, ToolMessage):
            out.append({"role": "user", "content": images})
            images = []
        if isinstance(message, UserMessage):
            item: dict[str, Any] = {"role": "user", "content": _user_content(message)}
            if send_names and message.name:
                item["name"] = message.name
        elif isinstance(message, AssistantMessage):
            # Always a string, "" for a tool-call turn without text: null is valid OpenAI, but
            # llama-cpp-python's server rejects it (HTTP 500), and several hosts reject a null
            # content without tool calls; "" is what OpenAI, Groq, Mistral, DeepSeek, OpenRouter,
            # llama.cpp, vLLM and Ollama all accept.
            item = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                item["tool_calls"] = [_tool_call_payload(call) for call in message.tool_calls]
        elif isinstance(message, ToolMessage):
            extra = [text for text in map(_block_text, message.blocks) if text is not None]
            content = "\n".join([message.text, *extra]) if extra else message.text
            item = {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
            images += _tool_images(message)
        elif isinstance(message, SystemMessage):
            item = {"role": "system", "content": message.text}
        else:  # pragma: no cover - the Message union is closed
            raise TypeError(f"not a message: {type(message).__name__}")
        out.append(item)
    if images:
        out.append({"role": "user", "content": images})
    return out


def tools_payload(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """Tool schemas as Chat Completions function tools."""
    out = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "parameters": dict(tool.parameters)}
        if tool.description:
            function["description"] = tool.description
        if tool.strict:
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out


def _response_format(fmt: ResponseFormat) -> dict[str, Any] | None:
    if fmt.type == "json_schema":
        schema: dict[str, Any] = {"name": fmt.name, "schema": dict(fmt.schema or {})}
        if fmt.strict:
            schema["strict"] = True
        return {"type": "json_schema", "json_schema": schema}
    if fmt.type == "json_object":
        return {"type": "json_object"}
    return None  # "text" is the default; sending it only risks a 400 on strict hosts


def build_body(
    request: ModelRequest,
    *,
    model: str,
    spec: ProviderSpec,
    stream: bool,
    tools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The request JSON; ``tools`` lets the caller pass a cached ``tools_payload``.

    The provider's ``omit_fields`` are removed from the defaults, then ``request.settings`` is
    merged last, so any field can be overridden or added, and a setting of ``None`` removes the
    field (a default such as ``stream_options`` included) instead of sending ``null``.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": messages_payload(request.messages, send_names=spec.send_message_names),
    }
    if request.tools:
        body["tools"] = tools if tools is not None else tools_payload(request.tools)
    choice = request.tool_choice
    if choice is not None:
        if choice in ("auto", "none", "required"):
            body["tool_choice"] = choice
        else:
            body["tool_choice"] = {"type": "function", "function": {"name": choice}}
    if request.response_format is not None:
        fmt = _response_format(request.response_format)
        if fmt is not None:
            body["response_format"] = fmt
    if request.max_output_tokens is not None:
        body[spec.max_tokens_field] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if spec.send_prompt_cache_key and request.thread_id:
        # A digest: stable per thread, fixed length, and reveals nothing about the id itself.
        body["prompt_cache_key"] = hashlib.sha256(request.thread_id.encode()).hexdigest()[:32]
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    for name in spec.omit_fields:
        body.pop(name, None)
    for name, value in request.settings.items():
        if value is None:
            body.pop(name, None)
        else:
            body[name] = value
    return body


# ------------------------------------------------------------------------------------------ usage
def _count(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value.is_integer():
        return max(int(value), 0)
    return 0


def _details(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def normalize_usage(raw: object, *, reasoning_outside_completion: bool = False) -> Usage:
    """Provider usage JSON as our ``Usage`` (OpenAI convention), clamped so its invariants hold.

    Handles DeepSeek's ``prompt_cache_hit_tokens``, OpenRouter's ``cache_write_tokens`` and reasoning
    counted outside ``completion_tokens`` (xAI): ``total_tokens`` decides when present, the
    provider's flag otherwise, and reasoning larger than the completion is outside by definition.
    A ``total_tokens`` above prompt plus completion with no reasoning count is hidden thinking
    (Gemini's compatible endpoint): the difference is counted, and billed, as reasoning output.
    """
    if not isinstance(raw, Mapping):
        return Usage()
    prompt = _count(raw.get("prompt_tokens"))
    completion = _count(raw.get("completion_tokens"))
    prompt_details = _details(raw, "prompt_tokens_details")
    cached = _count(prompt_details.get("cached_tokens")) or _count(raw.get("prompt_cache_hit_tokens"))
    cache_write = _count(prompt_details.get("cache_write_tokens"))
    reasoning = _count(_details(raw, "completion_tokens_details").get("reasoning_tokens"))
    total = raw.get("total_tokens")
    if not reasoning and type(total) is int and total > prompt + completion:
        reasoning = total - prompt - completion
        completion = total - prompt
    elif reasoning:
        if isinstance(total, int) and total == prompt + completion + reasoning:
            outside = True
        elif isinstance(total, int) and total == prompt + completion:
            outside = reasoning > completion
        else:
            outside = reasoning_outside_completion or reasoning > completion
        if outside:
            completion += reasoning
    cached = min(cached, prompt)
    cache_write = min(cache_write, prompt - cached)
    return Usage(
        input_tokens=prompt,
        output_tokens=completion,
        cached_input_tokens=cached,
        reasoning_tokens=min(reasoning, completion),
        cache_write_tokens=cache_write,
    )


# ------------------------------------------------------------------------------------------ responses
def _text_of(content: object) -> str:
    return _content_parts(content)[0]


def _content_parts(content: object) -> tuple[str, str]:
    """``(text, reasoning)`` of a ``content`` value: a string, or a list of typed parts.

    Mistral's reasoning models (Magistral) answer with ``[{"type": "thinking", "thinking":
    [{"type": "text", "text": ...}]}, {"type": "text", "text": ...}]``, in whole messages and in
    stream deltas alike; ``reasoning`` parts are read the same way.
    """
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return "", ""
    text: list[str] = []
    thought: list[str] = []
    for part in content:
        if isinstance(part, str):
            text.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "text":
                text.append(_flat_text(part.get("text")))
            elif kind in ("thinking", "reasoning"):
                thought.append(_flat_text(part.get(kind, part.get("text"))))
    return "".join(text), "".join(thought)


def _flat_text(value: object) -> str:
    """The text of a part's value: a string, a ``{"text": ...}`` part, or a list of either."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return _flat_text(value.get("text"))
    if isinstance(value, list):
        return "".join(_flat_text(item) for item in value)
    return ""


def _reasoning_of(obj: Mapping[str, Any]) -> str | None:
    for key in ("reasoning_content", "reasoning"):  # DeepSeek; OpenRouter, Groq, Ollama
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _arguments_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return _dumps(value)  # a few hosts send the arguments as an object, not a JSON string


def parse_completion(data: object, *, spec: ProviderSpec, model: str) -> ModelResponse:
    """A non-streaming completion body as a ``ModelResponse``."""
    if not isinstance(data, Mapping):
        raise malformed(spec, model, "the response body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise malformed(spec, model, "the response has no choices", code="empty_response")
    choice = choices[0]
    message = choice.get("message")
    message = message if isinstance(message, Mapping) else {}
    calls: list[ToolCall] = []
    invented = InventedCallIds()
    for raw in message.get("tool_calls") or ():
        if not isinstance(raw, Mapping):
            continue
        function = raw.get("function")
        function = function if isinstance(function, Mapping) else {}
        calls.append(
            ToolCall.from_json_arguments(
                id=str(raw.get("id") or invented(len(calls))),
                name=str(function.get("name") or ""),
                arguments=_arguments_text(function.get("arguments")),
            )
        )
    text, thought = _content_parts(message.get("content"))
    text = text or _text_of(message.get("refusal"))
    served = data.get("model")
    finish = choice.get("finish_reason")
    return ModelResponse(
        message=AssistantMessage(text=text, tool_calls=calls, reasoning=_reasoning_of(message) or thought or None),
        usage=normalize_usage(data.get("usage"), reasoning_outside_completion=spec.reasoning_outside_completion),
        finish_reason=finish if isinstance(finish, str) else None,
        model=served if isinstance(served, str) and served else model,
        provider=spec.name,
        response_id=data["id"] if isinstance(data.get("id"), str) and data["id"] else None,
    )


class ChunkParser:
    """Folds SSE events of one stream into stream items, remembering finish, model and usage.

    Tool-call fragments are re-indexed densely; a fragment that reuses a wire ``index`` with a *new*
    ``id`` starts a new call (Ollama-compatible servers send every parallel call as index 0). A call
    whose first fragment has no id gets an invented one there (``InventedCallIds``, one stem per
    stream), so the deltas and the assembled response name it alike.
    """

    __slots__ = (
        "_invented",
        "_next",
        "_slots",
        "done",
        "error",
        "finish_reason",
        "model",
        "response_id",
        "saw_finish",
        "secrets",
        "spec",
        "usage",
    )

    def __init__(self, *, spec: ProviderSpec, model: str, secrets: Sequence[str] = ()) -> None:
        self.spec = spec
        self.model = model
        self.secrets = secrets
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.saw_finish = False
        self.done = False
        self.error: TinyAgentsError | None = None
        self.usage: Usage | None = None
        self._slots: dict[int, tuple[str | None, int]] = {}
        self._next = 0
        self._invented = InventedCallIds()

    def feed(self, events: Iterable[SSEEvent]) -> list[ModelStreamItem]:
        """Items for these events; sets ``done`` at ``[DONE]`` (later events are ignored).

        An error event or a malformed chunk sets ``error`` and ``done`` instead of raising, so the
        items of the events before it in the same network read are still returned (a stream keeps
        what arrived); the caller raises ``error`` after yielding them.
        """
        items: list[ModelStreamItem] = []
        for event in events:
            if self.done:
                break
            data = event.data.strip()
            if not data:
                continue  # an empty event carries nothing (some proxies send them as keep-alives)
            if data == "[DONE]":
                self.done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                chunk = None
            if not isinstance(chunk, dict):
                shape = "not JSON" if chunk is None and data != "null" else "not an object"
                self._fail(
                    malformed(self.spec, self.model, f"malformed stream chunk ({shape})", code="malformed_stream")
                )
                break
            error = chunk.get("error")
            if error:
                self._fail(error_from_payload(error, spec=self.spec, model=self.model, secrets=self.secrets))
                break
            self._chunk(chunk, items)
        return items

    def _fail(self, error: TinyAgentsError) -> None:
        self.error = error
        self.done = True

    def finish(self) -> list[ModelStreamItem]:
        """The closing items: the usage (when the stream reported it), then ``StreamFinish``."""
        tail: list[ModelStreamItem] = [] if self.usage is None else [StreamUsage(usage=self.usage)]
        tail.append(StreamFinish(finish_reason=self.finish_reason, model=self.model, response_id=self.response_id))
        return tail

    def _chunk(self, chunk: dict[str, Any], items: list[ModelStreamItem]) -> None:
        served = chunk.get("model")
        if isinstance(served, str) and served:
            self.model = served
        if self.response_id is None and isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"] or None
        usage = chunk.get("usage")
        if not isinstance(usage, dict):  # older Groq responses carry usage only under x_groq
            groq = chunk.get("x_groq")
            usage = groq.get("usage") if isinstance(groq, dict) else None
        if isinstance(usage, dict):
            self.usage = normalize_usage(usage, reasoning_outside_completion=self.spec.reasoning_outside_completion)
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is not supported; keep the first choice
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta, items)
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish_reason = finish
                self.saw_finish = True

    def _delta(self, delta: dict[str, Any], items: list[ModelStreamItem]) -> None:
        # json.loads makes dicts, so exact dict checks stand in for the slower Mapping ABC here.
        reasoning = _reasoning_of(delta)
        if reasoning:
            items.append(ThinkingDelta(text=reasoning))
        for key in ("content", "refusal"):
            text = delta.get(key)
            if isinstance(text, list):  # content parts (Magistral's thinking, then text)
                text, thought = _content_parts(text)
                if thought:
                    items.append(ThinkingDelta(text=thought))
            if isinstance(text, str) and text:
                items.append(TextDelta(text=text))
        for raw in delta.get("tool_calls") or ():
            if not isinstance(raw, dict):
                continue
            wire = raw.get("index")
            wire = wire if isinstance(wire, int) else 0
            call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
            function = raw.get("function")
            function = function if isinstance(function, dict) else {}
            name = function.get("name") if isinstance(function.get("name"), str) and function.get("name") else None
            slot = self._slots.get(wire)
            sent_id = call_id
            if slot is None or (call_id is not None and slot[0] is not None and call_id != slot[0]):
                index = self._next
                self._next += 1
                self._slots[wire] = (call_id, index)
                if sent_id is None:
                    sent_id = self._invented(index)
            else:
                index = slot[1]
                if slot[0] is None and call_id is not None:
                    self._slots[wire] = (call_id, index)
            items.append(
                ToolCallDelta(index=index, id=sent_id, name=name, arguments=_arguments_text(function.get("arguments")))
            )
