"""A real loopback HTTP server that replays scripted OpenAI-Chat-Completions wire responses.

Tests enqueue responses (a JSON body, or a list of SSE chunks with optional delays, a dropped
connection, malformed data), point a real ``OpenAIChatModel`` at ``server.base_url`` and then assert
on what the adapter produced and on ``server.requests`` (what it actually sent). The server runs in
a daemon thread (stdlib ``ThreadingHTTPServer``), so scripted delays never block the event loop
under test. Use the ``replay_server`` fixture (re-exported by ``tests/harness/conftest.py``).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tinyagents_nb.harness import ModelRequest, TinyAgentsError
from tinyagents_nb.harness.models import ModelStreamItem

__all__ = [
    "RecordedRequest",
    "ReplayServer",
    "Responder",
    "chat_completion",
    "chunk",
    "embeddings_body",
    "error_body",
    "replay_server",
    "sse_done",
    "sse_text_chunks",
    "sse_tool_call_chunks",
    "usage_body",
]

Chunk = Mapping[str, Any] | str | bytes
"""One SSE item: a dict is sent as ``data: <json>\\n\\n``; str/bytes are written verbatim."""

DEFAULT_MODEL = "gpt-4o-mini-2024-07-18"

Responder = Callable[[Any], tuple[Any, ...]]
"""Computes a response from a request's parsed JSON body: ``(status, body[, headers])``."""


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # parsed JSON, or None when the body was not JSON


@dataclass(kw_only=True)
class _Script:
    status: int
    body: bytes | None = None
    chunks: list[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    drop_after: int | None = None
    chunked: bool = True
    hang_up: bool = False


def _encode_chunk(item: Chunk) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode()
    return f"data: {json.dumps(item)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle holds the body back
        # until the client's delayed ACK (~40 ms per keep-alive request)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        owner = self.server.owner
        owner._record(
            RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw=raw,
                body=body,
            )
        )
        route = owner.routes.get(self.path.split("?", 1)[0])
        script = owner._answer(route, body) if route is not None else owner._next_script(body)
        if script.delay_s:
            time.sleep(script.delay_s)
        if script.hang_up:
            self._drop()
            return
        if script.chunks is None:
            self._send_unary(script)
        else:
            self._send_stream(script)

    def _send_unary(self, script: _Script) -> None:
        payload = script.body or b""
        self.send_response(script.status)
        headers = {"Content-Type": "application/json", **script.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_stream(self, script: _Script) -> None:
        assert script.chunks is not None
        self.send_response(script.status)
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **script.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        if script.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        for position, data in enumerate(script.chunks):
            if script.drop_after is not None and position >= script.drop_after:
                self._drop()
                return
            if script.chunk_delay_s:
                time.sleep(script.chunk_delay_s)
            if script.chunked:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            else:
                self.wfile.write(data)
            self.wfile.flush()
        if script.drop_after is not None:
            self._drop()
            return
        if script.chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        else:
            self.close_connection = True

    def _drop(self) -> None:
        """Cut the connection without finishing the HTTP message (no terminating chunk)."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ReplayServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Record handler failures instead of printing them; a client hanging up is normal here."""
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, ConnectionError):
            self.owner.errors.append(error)


class ReplayServer:
    """A scripted OpenAI-compatible endpoint on ``127.0.0.1`` (ephemeral port)."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._lock = threading.Lock()
        self._scripts: deque[_Script] = deque()
        self._requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []  # unexpected handler failures (a bug in a script or here)
        self.responder: Responder | None = None
        self.routes: dict[str, Responder] = {}
        """Responders by request path (``"/tokenize"``): they answer before the script queue, on handler threads."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name="replay-server", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """Scripted responses not yet served."""
        with self._lock:
            return len(self._scripts)

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def enqueue(
        self,
        status: int = 200,
        body: Mapping[str, Any] | str | bytes | Sequence[Chunk] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        delay_s: float = 0.0,
        chunk_delay_s: float = 0.0,
        drop_after: int | None = None,
        chunked: bool = True,
        hang_up: bool = False,
    ) -> None:
        """Script the next response.

        Args:
            status: HTTP status.
            body: A dict (sent as JSON), str/bytes (sent verbatim), or a *list* of SSE chunks (streamed).
            headers: Extra response headers (e.g. ``retry-after-ms``).
            delay_s: Wait before sending anything (for timeout tests).
            chunk_delay_s: Wait before each SSE chunk.
            drop_after: Stream only this many chunks, then cut the connection mid-message.
            chunked: Stream with chunked transfer encoding (a cut is then a protocol error); with
                ``False`` the body ends at a clean EOF (``Connection: close``).
            hang_up: Close the connection without answering at all.
        """
        script = _Script(
            status=status,
            headers=dict(headers or {}),
            delay_s=delay_s,
            chunk_delay_s=chunk_delay_s,
            drop_after=drop_after,
            chunked=chunked,
            hang_up=hang_up,
        )
        if isinstance(body, list | tuple):
            script.chunks = [_encode_chunk(item) for item in body]
        elif isinstance(body, bytes):
            script.body = body
        elif isinstance(body, str):
            script.body = body.encode()
        elif body is not None:
            script.body = json.dumps(body).encode()
        with self._lock:
            self._scripts.append(script)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def respond_with(self, responder: Responder | None) -> None:
        """Answer every request the script queue does not with ``responder(body)``: ``(status, body)`` or
        ``(status, body, headers)``; a list body is streamed as SSE chunks. It runs on the server's handler threads (one per connection)."""
        self.responder = responder

    def _next_script(self, body: Any = None) -> _Script:
        with self._lock:
            if self._scripts:
                return self._scripts.popleft()
        if self.responder is not None:
            return self._answer(self.responder, body)
        message = "replay server: no scripted response left for this request"
        return _Script(status=500, body=json.dumps(error_body(message, type="replay_error")).encode())

    @staticmethod
    def _answer(responder: Responder, body: Any) -> _Script:
        answer = responder(body)
        status, payload = answer[0], answer[1]
        headers = dict(answer[2]) if len(answer) > 2 else {}
        if isinstance(payload, list):  # SSE chunks: a stream
            return _Script(status=status, chunks=[_encode_chunk(item) for item in payload], headers=headers)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return _Script(status=status, body=data, headers=headers)


@pytest.fixture
def replay_server() -> Iterator[ReplayServer]:
    """A started ``ReplayServer``, stopped after the test."""
    server = ReplayServer().start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.errors, f"replay server handler failed: {server.errors!r}"


# ------------------------------------------------------------------------------------------ builders
def usage_body(
    prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0, total: int | None = None, **extra: Any
) -> dict[str, Any]:
    """An OpenAI ``usage`` object (extra keys, e.g. DeepSeek's ``prompt_cache_hit_tokens``, added verbatim)."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion if total is None else total,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
        **extra,
    }


def chat_completion(
    content: str | None = None,
    *,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    model: str = DEFAULT_MODEL,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    reasoning_content: str | None = None,
    id: str = "chatcmpl-1",
) -> dict[str, Any]:
    """A non-streaming completion; ``tool_calls`` are ``(id, name, arguments_json_text)``."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in tool_calls
        ]
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion",
        "created": 1727895263,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
                "logprobs": None,
                "message": message,
            }
        ],
        "system_fingerprint": "fp_replay",
        "service_tier": "default",
    }
    if usage is not None:
        body["usage"] = dict(usage)
    return body


def chunk(
    delta: Mapping[str, Any] | None,
    *,
    finish_reason: str | None = None,
    model: str = DEFAULT_MODEL,
    id: str = "chatcmpl-1",
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice."""
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": 1727895263,
        "model": model,
        "system_fingerprint": "fp_replay",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        "usage": None,
    }


def _usage_chunk(usage: Mapping[str, Any], *, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1727895263,
        "model": model,
        "system_fingerprint": "fp_replay",
        "choices": [],
        "usage": dict(usage),
    }


def sse_done() -> str:
    return "data: [DONE]\n\n"


def sse_text_chunks(
    pieces: Sequence[str],
    *,
    model: str = DEFAULT_MODEL,
    finish_reason: str = "stop",
    usage: Mapping[str, Any] | None = None,
    done: bool = True,
) -> list[Chunk]:
    """A streamed text answer: role chunk, one chunk per piece, finish chunk, usage chunk, ``[DONE]``."""
    out: list[Chunk] = [chunk({"role": "assistant", "content": "", "refusal": None}, model=model)]
    out += [chunk({"content": piece}, model=model) for piece in pieces]
    out.append(chunk({}, finish_reason=finish_reason, model=model))
    if usage is not None:
        out.append(_usage_chunk(usage, model=model))
    if done:
        out.append(sse_done())
    return out


def sse_tool_call_chunks(
    calls: Sequence[tuple[str, str, Sequence[str]]],
    *,
    interleave: bool = False,
    model: str = DEFAULT_MODEL,
    usage: Mapping[str, Any] | None = None,
    done: bool = True,
) -> list[Chunk]:
    """Streamed tool calls: ``calls`` are ``(id, name, argument_fragments)``.

    Each call opens with its id, name and empty arguments, then sends its fragments by ``index``.
    With ``interleave`` the fragments of different calls alternate (index 0, 1, 0, 1, ...).
    """
    out: list[Chunk] = [chunk({"role": "assistant", "content": None}, model=model)]

    def opener(index: int) -> dict[str, Any]:
        call_id, name, _ = calls[index]
        entry = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        return chunk({"tool_calls": [entry]}, model=model)

    def fragment(index: int, text: str) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]}, model=model)

    if interleave:
        out += [opener(index) for index in range(len(calls))]
        longest = max((len(fragments) for _, _, fragments in calls), default=0)
        for step in range(longest):
            for index, (_, _, fragments) in enumerate(calls):
                if step < len(fragments):
                    out.append(fragment(index, fragments[step]))
    else:
        for index, (_, _, fragments) in enumerate(calls):
            out.append(opener(index))
            out += [fragment(index, text) for text in fragments]
    out.append(chunk({}, finish_reason="tool_calls", model=model))
    if usage is not None:
        out.append(_usage_chunk(usage, model=model))
    if done:
        out.append(sse_done())
    return out


def error_body(
    message: str, *, type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """An OpenAI error body ``{"error": {message, type, param, code}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def embeddings_body(
    vectors: Sequence[Sequence[float] | str],
    *,
    model: str = "text-embedding-3-small",
    prompt_tokens: int | None = None,
    order: Sequence[int] | None = None,
) -> dict[str, Any]:
    """An embeddings response (``POST /v1/embeddings``): one ``{"object": "embedding", index, embedding}`` per vector.

    ``order`` lists the indices in the order the items appear (hosts need not sort them); a str
    vector is sent verbatim (``encoding_format="base64"``). ``prompt_tokens=None`` omits ``usage``.
    """
    positions = list(range(len(vectors))) if order is None else list(order)
    body: dict[str, Any] = {
        "object": "list",
        "data": [
            {
                "object": "embedding",
                "index": i,
                "embedding": vectors[i] if isinstance(vectors[i], str) else list(vectors[i]),
            }
            for i in positions
        ],
        "model": model,
    }
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return body


async def drain(
    model: Any, request: ModelRequest, *, close: bool = True
) -> tuple[list[ModelStreamItem], TinyAgentsError | None]:
    """What ``model.stream(request)`` yields, and the typed error that ended it (``None``: it ended well).

    ``close`` releases the model's HTTP clients afterwards; a test that streams again on the same
    model in the same loop keeps them open.
    """
    items: list[ModelStreamItem] = []
    try:
        async for item in model.stream(request):
            items.append(item)
    except TinyAgentsError as exc:
        return items, exc
    finally:
        if close:
            await model.aclose()
    return items, None
