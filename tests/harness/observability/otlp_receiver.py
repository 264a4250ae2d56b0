"""A minimal OTLP/HTTP collector on 127.0.0.1 that decodes real protobuf export requests.

It answers ``POST /v1/traces`` and ``POST /v1/metrics`` the way a collector does (an empty
protobuf response, status 200) and keeps what it decoded, so tests read back exactly what the
OpenTelemetry exporter put on the wire.
"""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def plain(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(plain(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


class ReceivedSpan:
    """One decoded span: name, ids, attributes as a dict, events as (name, attributes)."""

    def __init__(self, span: Any, resource: dict[str, Any]) -> None:
        self.name: str = span.name
        self.trace_id: bytes = span.trace_id
        self.span_id: bytes = span.span_id
        self.parent_span_id: bytes = span.parent_span_id
        self.kind: int = span.kind
        self.status_code: int = span.status.code
        self.attributes = {kv.key: plain(kv.value) for kv in span.attributes}
        self.events = [(e.name, {kv.key: plain(kv.value) for kv in e.attributes}) for e in span.events]
        self.resource = resource


class OTLPReceiver:
    """``with OTLPReceiver() as rx:`` serves on a free port; ``rx.url`` is the base URL to export to."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.metric_names: list[str] = []
        self.requests: list[tuple[str, str]] = []  # (path, content-type)
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                receiver._receive(self.path, self.headers.get("Content-Type", ""), body)
                reply = (
                    ExportTraceServiceResponse() if self.path == "/v1/traces" else ExportMetricsServiceResponse()
                ).SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _receive(self, path: str, content_type: str, body: bytes) -> None:
        with self._lock:
            self.requests.append((path, content_type))
            if path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                for rs in request.resource_spans:
                    resource = {kv.key: plain(kv.value) for kv in rs.resource.attributes}
                    for scope in rs.scope_spans:
                        self.spans.extend(ReceivedSpan(span, resource) for span in scope.spans)
            elif path == "/v1/metrics":
                metrics = ExportMetricsServiceRequest.FromString(body)
                for rm in metrics.resource_metrics:
                    for scope in rm.scope_metrics:
                        self.metric_names.extend(m.name for m in scope.metrics)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[ReceivedSpan]:
        """The spans received once at least ``count`` arrived (raises on timeout)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        raise AssertionError(f"only {len(self.spans)} of {count} spans arrived")

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
