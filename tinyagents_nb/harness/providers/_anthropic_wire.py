"""The Anthropic Messages wire format, as pure functions (no I/O, no httpx).

``_anthropic.AnthropicModel`` does the HTTP; this module turns our values into a Messages request
body and Anthropic's JSON back into our values. Points where Messages differs from Chat
Completions and that shape the code:

- System text is a top-level ``system`` field, not a message; every ``SystemMessage`` is hoisted
  there, in order.
- Tool results are ``tool_result`` blocks inside a *user* message, first in its content;
  consecutive tool results (and a user turn right after them) share one user message.
- Signed ``thinking`` blocks must be sent back unchanged with the assistant turn that made them
  (``AssistantMessage.blocks`` keeps them); unsigned reasoning from other providers is dropped.
- Prompt caching is explicit: ``cache_control`` marks the end of each cacheable prefix (at most
  four per request). We mark the tools, the system text, the newest message and the previous
  user turn, so every turn reads the prefix the turn before wrote.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .._messages import (
    AssistantMessage,
    ImageRef,
    InventedCallIds,
    JsonBlock,
    Message,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from .._model import ModelRequest, ModelResponse, ToolSchema
from .._usage import Usage

__all__ = [
    "CacheTTL",
    "WireOptions",
    "build_body",
    "finish_reason",
    "messages_payload",
    "parse_message",
    "tools_payload",
    "usage_from",
]

CacheTTL = Literal["5m", "1h"]
"""How long Anthropic keeps a cached prefix: five minutes (the default) or one hour (dearer to write)."""

MAX_BREAKPOINTS: Final = 4
_STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class WireOptions:
    """Per-model settings that shape every request body.

    Attributes:
        max_tokens: The output cap sent when the request sets none (Messages requires one).
        thinking_budget: Tokens the model may spend thinking; ``None`` leaves thinking off.
        cache: Whether to place ``cache_control`` breakpoints.
        cache_ttl: The breakpoints' lifetime.
        native_json: The model supports ``output_config.format`` (constrained JSON output).
    """

    max_tokens: int
    thinking_budget: int | None = None
    cache: bool = True
    cache_ttl: CacheTTL = "5m"
    native_json: bool = False


# ------------------------------------------------------------------------------------------ request
def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _image(ref: ImageRef) -> dict[str, Any]:
    url = ref.url
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media = header[5:].split(";", 1)[0] or ref.media_type or "image/png"
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(text: str, blocks: Sequence[object]) -> list[dict[str, Any]]:
    """Text plus extra blocks as Messages content; empty text is left out (the API rejects it)."""
    out: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for block in blocks:
        if isinstance(block, TextBlock) and block.text:
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, JsonBlock):
            out.append({"type": "text", "text": _dumps(block.data)})
        elif isinstance(block, ImageRef):
            out.append(_image(block))
    return out


def _assistant(message: AssistantMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, ThinkingBlock) and block.signature:
            if block.redacted:
                out.append({"type": "redacted_thinking", "data": block.signature})
            else:
                out.append({"type": "thinking", "thinking": block.text, "signature": block.signature})
    if message.text:
        out.append({"type": "text", "text": message.text})
    out.extend(_tool_use(call) for call in message.tool_calls)
    return out


def _tool_use(call: ToolCall) -> dict[str, Any]:
    # A call whose arguments did not parse is replayed with empty input: Messages needs an object.
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}


def _tool_result(message: ToolMessage) -> dict[str, Any]:
    content = _blocks(message.text, message.blocks)
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if content:
        result["content"] = content
    if message.is_error:
        result["is_error"] = True
    return result


def messages_payload(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system, messages)``: system blocks hoisted, same-role turns merged, tool results first."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            if message.text:
                system.append({"type": "text", "text": message.text})
            continue
        if isinstance(message, AssistantMessage):
            role, content = "assistant", _assistant(message)
        elif isinstance(message, ToolMessage):
            role, content = "user", [_tool_result(message)]
        elif isinstance(message, UserMessage):
            role, content = "user", _blocks(message.text, message.blocks)
        else:  # pragma: no cover - the Message union is closed
            raise TypeError(f"not a message: {type(message).__name__}")
        if not content:
            continue  # an empty turn is rejected by the API and says nothing
        if out and out[-1]["role"] == role:
            merged = out[-1]["content"]
            if isinstance(message, ToolMessage):  # tool results lead their user message
                at = sum(1 for block in merged if block["type"] == "tool_result")
                merged[at:at] = content
            else:
                merged.extend(content)
        else:
            out.append({"role": role, "content": content})
    return system, out


def tools_payload(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """Tool schemas as Messages tools (``input_schema``; ``strict`` where asked)."""
    out = []
    for tool in tools:
        item: dict[str, Any] = {"name": tool.name, "input_schema": dict(tool.parameters)}
        if tool.description:
            item["description"] = tool.description
        if tool.strict:
            item["strict"] = True
        out.append(item)
    return out


def _tool_choice(choice: str, *, thinking: bool) -> dict[str, Any]:
    if choice in ("auto", "none"):
        return {"type": choice}
    if thinking:
        # With thinking on, Messages accepts only auto/none; a forced call would be a 400.
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def _mark(block: dict[str, Any], marker: dict[str, Any]) -> bool:
    if block.get("type") in ("thinking", "redacted_thinking") or (block.get("type") == "text" and not block["text"]):
        return False  # thinking blocks cannot carry cache_control
    block["cache_control"] = marker
    return True


def _mark_last(content: list[dict[str, Any]], marker: dict[str, Any]) -> bool:
    return any(_mark(block, marker) for block in reversed(content))


def _place_breakpoints(
    body: dict[str, Any], tools: list[dict[str, Any]] | None, system: list[dict[str, Any]], ttl: CacheTTL
) -> None:
    """Mark the stable prefix: tools, system, the newest message and the user turn before it.

    Marks go on copies of the last tool and the last blocks, so a cached tools payload stays clean.
    """
    marker: dict[str, Any] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    left = MAX_BREAKPOINTS
    if tools:
        body["tools"] = [*tools[:-1], {**tools[-1], "cache_control": marker}]
        left -= 1
    if system:
        system[-1]["cache_control"] = marker
        left -= 1
    marked = 0
    for message in reversed(body["messages"]):
        if marked >= min(left, 2):
            break
        if marked == 1 and message["role"] != "user":
            continue  # the second mark goes on the previous user turn (where last turn's mark was)
        if _mark_last(message["content"], marker):
            marked += 1


def build_body(
    request: ModelRequest,
    *,
    model: str,
    options: WireOptions,
    stream: bool,
    tools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The Messages request JSON; ``tools`` lets the caller pass a cached ``tools_payload``.

    ``request.settings`` is merged last, so any field can be overridden or added.
    """
    system, messages = messages_payload(request.messages)
    max_tokens = request.max_output_tokens or options.max_tokens
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = tools if tools is not None else tools_payload(request.tools)
    thinking = options.thinking_budget is not None
    if request.tool_choice is not None and request.tools:
        body["tool_choice"] = _tool_choice(request.tool_choice, thinking=thinking)
    if thinking:
        assert options.thinking_budget is not None
        body["thinking"] = {"type": "enabled", "budget_tokens": options.thinking_budget}
        # The budget must stay below max_tokens; leave room for the answer itself.
        body["max_tokens"] = max(max_tokens, options.thinking_budget + 1024)
    elif request.temperature is not None:
        body["temperature"] = request.temperature  # thinking requires the default temperature
    fmt = request.response_format
    if fmt is not None and fmt.type == "json_schema" and options.native_json:
        body["output_config"] = {"format": {"type": "json_schema", "schema": dict(fmt.schema or {})}}
    if options.cache and request.prompt_cache:  # CachePolicy(prompt_cache=False) turns them off per harness
        _place_breakpoints(body, body.get("tools"), system, options.cache_ttl)
    if stream:
        body["stream"] = True
    if request.settings:
        body.update(request.settings)
    return body


# ------------------------------------------------------------------------------------------ responses
def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_from(raw: Mapping[str, Any]) -> Usage:
    """Messages usage in the OpenAI convention: Anthropic's ``input_tokens`` excludes cache reads and writes.

    ``cache_creation.ephemeral_1h_input_tokens`` says how many writes were one-hour ones (priced higher);
    ``output_tokens_details.thinking_tokens`` how much of the output was thinking (``reasoning_tokens``).
    """
    fresh = _count(raw.get("input_tokens"))
    written = _count(raw.get("cache_creation_input_tokens"))
    read = _count(raw.get("cache_read_input_tokens"))
    split = raw.get("cache_creation")
    hour = _count(split.get("ephemeral_1h_input_tokens")) if isinstance(split, Mapping) else 0
    output = _count(raw.get("output_tokens"))
    details = raw.get("output_tokens_details")  # itemised output: the thinking part of output_tokens
    thinking = _count(details.get("thinking_tokens")) if isinstance(details, Mapping) else 0
    return Usage(
        input_tokens=fresh + written + read,
        output_tokens=output,
        cached_input_tokens=read,
        cache_write_tokens=written,
        cache_write_1h_tokens=min(hour, written),
        reasoning_tokens=min(thinking, output),
    )


def finish_reason(stop_reason: object) -> str | None:
    """Anthropic's ``stop_reason`` as the harness's finish reason (OpenAI's words); unknown ones pass through."""
    if not isinstance(stop_reason, str) or not stop_reason:
        return None
    return _STOP_REASONS.get(stop_reason, stop_reason)


def thinking_block(raw: Mapping[str, Any]) -> ThinkingBlock | None:
    """A ``thinking``/``redacted_thinking`` content block as a ``ThinkingBlock`` (``None`` for other types)."""
    kind = raw.get("type")
    if kind == "thinking":
        signature = raw.get("signature")
        return ThinkingBlock(text=str(raw.get("thinking") or ""), signature=signature if signature else None)
    if kind == "redacted_thinking":
        return ThinkingBlock(text="", signature=str(raw.get("data") or ""), redacted=True)
    return None


def parse_message(data: Mapping[str, Any], *, model: str, provider: str) -> ModelResponse:
    """A non-streaming Messages response body as a ``ModelResponse``."""
    text: list[str] = []
    reasoning: list[str] = []
    blocks: list[ThinkingBlock] = []
    calls: list[ToolCall] = []
    invented = InventedCallIds()
    for raw in data.get("content") or ():
        if not isinstance(raw, Mapping):
            continue
        kind = raw.get("type")
        if kind == "text":
            text.append(str(raw.get("text") or ""))
        elif kind == "tool_use":
            arguments = raw.get("input")
            calls.append(
                ToolCall.from_json_arguments(
                    id=str(raw.get("id") or invented(len(calls))),
                    name=str(raw.get("name") or ""),
                    arguments=_dumps(arguments) if isinstance(arguments, Mapping) else str(arguments or ""),
                )
            )
        else:
            block = thinking_block(raw)
            if block is not None:
                blocks.append(block)
                if block.text:
                    reasoning.append(block.text)
    usage = data.get("usage")
    served = data.get("model")
    return ModelResponse(
        message=AssistantMessage(
            text="".join(text), tool_calls=calls, reasoning="".join(reasoning) or None, blocks=blocks
        ),
        usage=usage_from(usage) if isinstance(usage, Mapping) else Usage(),
        finish_reason=finish_reason(data.get("stop_reason")),
        model=served if isinstance(served, str) and served else model,
        provider=provider,
        response_id=data["id"] if isinstance(data.get("id"), str) and data["id"] else None,
    )
