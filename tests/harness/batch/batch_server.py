"""A 127.0.0.1 server speaking the OpenAI Batch and Anthropic Message Batches APIs, for tests.

It implements the documented endpoints and response shapes (from the public API references):

- OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``) → a file object; ``POST /v1/batches``
  → a batch object (``validating``); ``GET /v1/batches/{id}`` moves it ``in_progress`` →
  ``finalizing`` → ``completed`` over successive polls, with ``request_counts``; then
  ``output_file_id``/``error_file_id`` name JSONL files served by ``GET /v1/files/{id}/content``
  (output lines ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}``);
  ``POST /v1/batches/{id}/cancel`` → ``cancelling`` then ``cancelled``.
- Anthropic: ``POST /v1/messages/batches`` (``requests`` of ``{custom_id, params}``) → a
  ``message_batch`` (``in_progress``); ``GET`` it until ``ended`` with ``results_url``; the results
  JSONL has ``{"custom_id", "result": {"type": "succeeded", "message"}}`` or ``errored``/``canceled``.

Answers are computed by ``answer(body)`` per request (a chat completion or a Message), or an error
for rows it fails. Everything the server received is kept (``uploads``, ``headers``) for assertions.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["BatchServer", "batch_server"]

Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        owner = self.server.owner
        with owner.lock:
            owner.headers.append({k.lower(): v for k, v in self.headers.items()})
            status, body, ctype = owner.route(self.command, self.path, raw, self.headers.get("Content-Type") or "")
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: BatchServer


def _multipart(raw: bytes, content_type: str) -> dict[str, bytes]:
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    out: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        out[str(name)] = part.get_payload(decode=True) or b""
    return out


class BatchServer:
    """OpenAI Batch + Anthropic Message Batches on ``127.0.0.1`` (an ephemeral port)."""

    def __init__(self, answer: Answer, *, polls_to_finish: int = 2) -> None:
        self.answer = answer
        self.polls_to_finish = polls_to_finish
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.uploads: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.answered = 0  # requests actually processed (what the provider would bill)
        self.submitted = threading.Event()  # set when the first job is created
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> BatchServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    # ------------------------------------------------------------------------------------ routing
    def route(self, method: str, path: str, raw: bytes, ctype: str) -> tuple[int, Any, str]:
        parts = path.split("?")[0].strip("/").split("/")
        j = "application/json"
        if parts[:2] == ["v1", "files"] and method == "POST":
            form = _multipart(raw, ctype)
            if form.get("purpose") != b"batch":
                return 400, {"error": {"message": "purpose must be batch", "type": "invalid_request_error"}}, j
            file_id = self._id("file-")
            self.files[file_id] = form["file"]
            self.uploads.append(form["file"])
            return (
                200,
                {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(form["file"]),
                    "created_at": 1,
                    "filename": "x.jsonl",
                    "purpose": "batch",
                },
                j,
            )
        if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
            return 200, self.files[parts[2]], "application/octet-stream"
        if parts[:2] == ["v1", "batches"]:
            return self._openai(method, parts[2:], raw)
        if parts[:3] == ["v1", "messages", "batches"]:
            return self._anthropic(method, parts[3:], raw)
        return 404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}}, j

    # ------------------------------------------------------------------------------------ OpenAI
    def _openai(self, method: str, rest: list[str], raw: bytes) -> tuple[int, Any, str]:
        j = "application/json"
        if method == "POST" and not rest:
            body = json.loads(raw)
            lines = [json.loads(line) for line in self.files[body["input_file_id"]].decode().splitlines() if line]
            batch_id = self._id("batch_")
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "errors": None,
                "input_file_id": body["input_file_id"],
                "completion_window": body["completion_window"],
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": 1,
                "in_progress_at": None,
                "expires_at": 86_401,
                "finalizing_at": None,
                "completed_at": None,
                "failed_at": None,
                "expired_at": None,
                "cancelling_at": None,
                "cancelled_at": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": body.get("metadata"),
                "_lines": lines,
                "_polls": 0,
            }
            self.submitted.set()
            return 200, self._public(batch_id), j
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None:
            return 404, {"error": {"message": "no such batch", "type": "invalid_request_error"}}, j
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch["status"] in ("validating", "in_progress"):
                batch["status"] = "cancelling"
            return 200, self._public(rest[0]), j
        batch["_polls"] += 1
        if batch["status"] == "cancelling":
            batch["status"] = "cancelled"
        elif batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif batch["status"] == "in_progress" and batch["_polls"] >= self.polls_to_finish:
            batch["status"] = "finalizing"
        elif batch["status"] == "finalizing":
            self._finish_openai(batch)
        return 200, self._public(rest[0]), j

    def _finish_openai(self, batch: dict[str, Any]) -> None:
        out: list[str] = []
        errors: list[str] = []
        for line in batch["_lines"]:
            status, body = self.answer(line["body"])
            self.answered += 1
            record = {
                "id": self._id("batch_req_"),
                "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": self._id("req_"), "body": body},
                "error": None,
            }
            (out if status == 200 else errors).append(json.dumps(record))
        batch["request_counts"].update(completed=len(out), failed=len(errors))
        for key, lines in (("output_file_id", out), ("error_file_id", errors)):
            if lines:
                file_id = self._id("file-")
                self.files[file_id] = ("\n".join(lines) + "\n").encode()
                batch[key] = file_id
        batch["status"] = "completed"

    def _public(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    # ------------------------------------------------------------------------------------ Anthropic
    def _anthropic(self, method: str, rest: list[str], raw: bytes) -> tuple[int, Any, str]:
        j = "application/json"
        if method == "POST" and not rest:
            body = json.loads(raw)
            batch_id = self._id("msgbatch_")
            self.uploads.append(raw)
            self.submitted.set()
            self.batches[batch_id] = {
                "id": batch_id,
                "type": "message_batch",
                "processing_status": "in_progress",
                "request_counts": {
                    "processing": len(body["requests"]),
                    "succeeded": 0,
                    "errored": 0,
                    "canceled": 0,
                    "expired": 0,
                },
                "ended_at": None,
                "created_at": "2026-11-26T12:00:00Z",
                "expires_at": "2026-11-27T12:00:00Z",
                "cancel_initiated_at": None,
                "results_url": None,
                "archived_at": None,
                "_requests": body["requests"],
                "_polls": 0,
                "_results": None,
            }
            return 200, self._public(batch_id), j
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None:
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": "no such batch"}}, j
        if rest[1:] == ["results"]:
            return 200, batch["_results"].encode(), "application/binary"
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch["processing_status"] == "in_progress":
                batch["processing_status"] = "canceling"
                batch["cancel_initiated_at"] = "2026-11-26T12:00:01Z"
            return 200, self._public(rest[0]), j
        batch["_polls"] += 1
        if batch["processing_status"] == "canceling":
            self._finish_anthropic(batch, canceled=True)
        elif batch["processing_status"] == "in_progress" and batch["_polls"] >= self.polls_to_finish:
            self._finish_anthropic(batch, canceled=False)
        return 200, self._public(rest[0]), j

    def _finish_anthropic(self, batch: dict[str, Any], *, canceled: bool) -> None:
        lines: list[str] = []
        counts = batch["request_counts"]
        counts["processing"] = 0
        for request in batch["_requests"]:
            if canceled:
                result: dict[str, Any] = {"type": "canceled"}
                counts["canceled"] += 1
            else:
                status, body = self.answer(request["params"])
                self.answered += 1
                if status == 200:
                    result = {"type": "succeeded", "message": body}
                    counts["succeeded"] += 1
                else:
                    result = {"type": "errored", "error": body}
                    counts["errored"] += 1
            lines.append(json.dumps({"custom_id": request["custom_id"], "result": result}))
        batch["_results"] = "\n".join(lines) + "\n"
        batch["processing_status"] = "ended"
        batch["ended_at"] = "2026-11-26T12:05:00Z"
        batch["results_url"] = f"{self.base_url}/messages/batches/{batch['id']}/results"


@pytest.fixture
def batch_server() -> Iterator[Callable[..., BatchServer]]:
    """A factory of started ``BatchServer``s, all stopped after the test."""
    started: list[BatchServer] = []

    def make(answer: Answer, **kwargs: Any) -> BatchServer:
        server = BatchServer(answer, **kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()
