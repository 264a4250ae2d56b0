"""Anthropic Messages wire samples for the replay server: event streams and response bodies.

The shapes follow Anthropic's published streaming reference: every SSE event carries both an
``event:`` name and a ``data:`` JSON object whose ``type`` repeats it. ``rechunk`` cuts the encoded
stream into small byte pieces, so lines, JSON and multi-byte UTF-8 characters are split across
network reads the way a real connection may split them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MODEL = "claude-sonnet-4-5-20250929"


def event(kind: str, data: Mapping[str, Any] | None = None) -> bytes:
    payload = {"type": kind, **(data or {})}
    return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


def rechunk(events: Iterable[bytes], size: int = 7) -> list[bytes]:
    """The concatenated stream cut every ``size`` bytes (inside lines and UTF-8 characters)."""
    blob = b"".join(events)
    return [blob[at : at + size] for at in range(0, len(blob), size)]


def usage(
    input_tokens: int = 0,
    output_tokens: int = 0,
    *,
    cache_write: int | None = 0,
    cache_read: int | None = 0,
    write_1h: int = 0,
) -> dict[str, Any]:
    raw: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_write is not None:
        raw["cache_creation_input_tokens"] = cache_write
        raw["cache_creation"] = {
            "ephemeral_5m_input_tokens": cache_write - write_1h,
            "ephemeral_1h_input_tokens": write_1h,
        }
    if cache_read is not None:
        raw["cache_read_input_tokens"] = cache_read
    return raw


def message_start(usage_raw: Mapping[str, Any] | None, *, model: str = MODEL) -> bytes:
    message: dict[str, Any] = {
        "id": "msg_01replay",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": model,
        "stop_reason": None,
        "stop_sequence": None,
    }
    if usage_raw is not None:
        message["usage"] = dict(usage_raw)
    return event("message_start", {"message": message})


def text_block(index: int, pieces: Sequence[str]) -> list[bytes]:
    out = [event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})]
    out += [event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": p}}) for p in pieces]
    out.append(event("content_block_stop", {"index": index}))
    return out


def tool_block(index: int, call_id: str, name: str, fragments: Sequence[str]) -> list[bytes]:
    start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    out = [event("content_block_start", {"index": index, "content_block": start})]
    out += [
        event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": f}})
        for f in fragments
    ]
    out.append(event("content_block_stop", {"index": index}))
    return out


def thinking_block(index: int, pieces: Sequence[str], signature: str) -> list[bytes]:
    out = [
        event(
            "content_block_start",
            {"index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        )
    ]
    out += [
        event("content_block_delta", {"index": index, "delta": {"type": "thinking_delta", "thinking": p}})
        for p in pieces
    ]
    out.append(
        event("content_block_delta", {"index": index, "delta": {"type": "signature_delta", "signature": signature}})
    )
    out.append(event("content_block_stop", {"index": index}))
    return out


def message_end(stop_reason: str, output_tokens: int | None) -> list[bytes]:
    delta: dict[str, Any] = {"delta": {"stop_reason": stop_reason, "stop_sequence": None}}
    if output_tokens is not None:
        delta["usage"] = {"output_tokens": output_tokens}
    return [event("message_delta", delta), event("message_stop")]


def stream(
    *blocks: list[bytes],
    stop_reason: str = "end_turn",
    usage_raw: Mapping[str, Any] | None = None,
    output_tokens: int | None = 12,
    size: int = 7,
) -> list[bytes]:
    """A whole stream: message_start, a ping, the blocks, message_delta, message_stop, re-chunked."""
    events = [message_start(usage(25, 1) if usage_raw is None else usage_raw), event("ping")]
    for block in blocks:
        events += block
    events += message_end(stop_reason, output_tokens)
    return rechunk(events, size)


def message_body(
    content: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str = "end_turn",
    usage_raw: Mapping[str, Any] | None = None,
    model: str = MODEL,
) -> dict[str, Any]:
    return {
        "id": "msg_01replay",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": dict(usage_raw) if usage_raw is not None else usage(25, 12),
    }


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011replay"}
