"""Folding an Anthropic Messages event stream into the harness's stream items (pure, no I/O).

A Messages stream is ``message_start``, then per content block ``content_block_start``, deltas and
``content_block_stop``, then ``message_delta`` (stop reason and cumulative usage) and
``message_stop``; ``ping`` and unknown event types may appear anywhere and are ignored (Anthropic
documents that new event types may be added). An ``error`` event becomes a typed error, raised by the
caller after the deltas that arrived before it (in the same network read too): a stream keeps what it got.

Thinking text is yielded as ``ThinkingDelta`` as it arrives; when the block closes, a
``StreamBlock`` carries the whole signed block so the reply can be sent back as the API requires.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .._errors import ProviderError, TinyAgentsError
from .._messages import InventedCallIds, TextDelta, ThinkingBlock, ThinkingDelta, ToolCallDelta
from .._model import ModelStreamItem, StreamBlock, StreamFinish, StreamUsage
from .._usage import Usage
from ._anthropic_wire import finish_reason, thinking_block, usage_from
from ._openai_errors import error_from_payload
from ._registry import ProviderSpec
from ._sse import SSEEvent

__all__ = ["EventParser"]


class EventParser:
    """Turns the SSE events of one Messages stream into stream items, remembering usage and finish.

    Tool calls are indexed by their content-block index, which is unique within a message, so the
    accumulator joins each call's ``input_json_delta`` fragments by it. A ``tool_use`` block without
    an id (Anthropic always sends one; compatible proxies may not) gets an invented one.
    """

    __slots__ = (
        "_calls",
        "_invented",
        "_thinking",
        "_usage_raw",
        "done",
        "error",
        "finish_reason",
        "model",
        "response_id",
        "saw_finish",
        "secrets",
        "spec",
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
        self._usage_raw: dict[str, Any] | None = None
        self._thinking: dict[int, tuple[list[str], list[str]]] = {}  # open thinking blocks: (text, signature) parts
        self._calls = 0  # tool_use blocks seen: an invented id carries the call's position, as in a unary reply
        self._invented = InventedCallIds()

    @property
    def usage(self) -> Usage | None:
        return None if self._usage_raw is None else usage_from(self._usage_raw)

    def feed(self, events: Iterable[SSEEvent]) -> list[ModelStreamItem]:
        """Items for these events; sets ``done`` at ``message_stop`` (later events are ignored).

        An ``error`` event or a malformed one sets ``error`` and ``done`` instead of raising, so the
        deltas of the events before it in the same network read are still returned; the caller
        raises ``error`` after yielding them (Anthropic sends ``overloaded_error`` mid-answer).
        """
        items: list[ModelStreamItem] = []
        for event in events:
            if self.done:
                break
            data = event.data
            if not data or data.isspace():
                continue
            try:
                payload = json.loads(data)
            except ValueError:
                payload = None
            if not isinstance(payload, dict):
                shape = "not JSON" if payload is None and data.strip() != "null" else "not an object"
                self._fail(self._malformed(f"malformed stream event ({shape})"))
                break
            try:
                self._event(payload.get("type") or event.event, payload, items)
            except TinyAgentsError as exc:
                self._fail(exc)
                break
        return items

    def _fail(self, error: TinyAgentsError) -> None:
        self.error = error
        self.done = True

    def finish(self) -> list[ModelStreamItem]:
        """The closing items: usage (when the stream reported any), then ``StreamFinish``."""
        usage = self.usage
        tail: list[ModelStreamItem] = [] if usage is None else [StreamUsage(usage=usage)]
        tail.append(StreamFinish(finish_reason=self.finish_reason, model=self.model, response_id=self.response_id))
        return tail

    def _malformed(self, detail: str) -> ProviderError:
        return ProviderError(
            f"{self.spec.name} model {self.model!r}: {detail}",
            retryable=True,
            provider=self.spec.name,
            model=self.model,
            code="malformed_stream",
        )

    def _error(self, payload: dict[str, Any]) -> TinyAgentsError:
        return error_from_payload(
            payload.get("error") or payload, spec=self.spec, model=self.model, secrets=self.secrets
        )

    def _event(self, kind: object, payload: dict[str, Any], items: list[ModelStreamItem]) -> None:
        if kind == "content_block_delta":
            self._delta(payload, items)
        elif kind == "content_block_start":
            self._start(payload, items)
        elif kind == "content_block_stop":
            self._stop(payload, items)
        elif kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                served = message.get("model")
                if isinstance(served, str) and served:
                    self.model = served
                if isinstance(message.get("id"), str) and message["id"]:
                    self.response_id = message["id"]
                self._merge_usage(message.get("usage"))
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.finish_reason = finish_reason(delta["stop_reason"])
                self.saw_finish = True
            self._merge_usage(payload.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise self._error(payload)
        # "ping" and event types added after this was written carry nothing we use

    def _merge_usage(self, raw: object) -> None:
        # message_delta counts are cumulative and may repeat or extend message_start's.
        if isinstance(raw, dict):
            merged = dict(self._usage_raw or {})
            merged.update({key: value for key, value in raw.items() if value is not None})
            self._usage_raw = merged

    def _start(self, payload: dict[str, Any], items: list[ModelStreamItem]) -> None:
        index = payload.get("index")
        block = payload.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            raise self._malformed("content_block_start without an index or block")
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                items.append(TextDelta(text=text))
        elif kind == "tool_use":
            call_id = str(block.get("id") or self._invented(self._calls))
            self._calls += 1
            items.append(ToolCallDelta(index=index, id=call_id, name=str(block.get("name") or "")))
        elif kind == "thinking":
            text = str(block.get("thinking") or "")
            self._thinking[index] = ([text], [])
            if text:
                items.append(ThinkingDelta(text=text))
        elif kind == "redacted_thinking":
            redacted = thinking_block(block)
            if redacted is not None:
                items.append(StreamBlock(block=redacted))

    def _delta(self, payload: dict[str, Any], items: list[ModelStreamItem]) -> None:
        index = payload.get("index")
        delta = payload.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            raise self._malformed("content_block_delta without an index or delta")
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            if isinstance(text, str) and text:
                items.append(TextDelta(text=text))
        elif kind == "input_json_delta":
            fragment = delta.get("partial_json")
            if isinstance(fragment, str) and fragment:
                items.append(ToolCallDelta(index=index, arguments=fragment))
        elif kind == "thinking_delta":
            text = delta.get("thinking")
            if isinstance(text, str) and text:
                self._thinking.setdefault(index, ([], []))[0].append(text)
                items.append(ThinkingDelta(text=text))
        elif kind == "signature_delta":
            signature = delta.get("signature")
            if isinstance(signature, str):
                self._thinking.setdefault(index, ([], []))[1].append(signature)
        # citations_delta and future delta types: nothing to keep

    def _stop(self, payload: dict[str, Any], items: list[ModelStreamItem]) -> None:
        index = payload.get("index")
        parts = self._thinking.pop(index, None) if isinstance(index, int) else None
        if parts is None:
            return
        text, signature = "".join(parts[0]), "".join(parts[1])
        items.append(StreamBlock(block=ThinkingBlock(text=text, signature=signature or None)))
