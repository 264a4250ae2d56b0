"""``OTelSink``: every run as OpenTelemetry GenAI spans, for Phoenix, Langfuse, Logfire and friends.

Attach it like any other listener (``ctx.events.add_listener(OTelSink())``) or give it to a harness's
context; it turns the event stream into the ``invoke_agent`` → ``chat`` / ``execute_tool`` span tree
of the GenAI semantic conventions, plus their two client metrics. The OpenTelemetry SDK is an
optional extra (``pip install 'tinyagents-nb[otel]'``); this module imports it only when a sink is
built, so the harness loads without it.

Why a listener and not a tracer inside the loop: the events already say everything a span needs,
in order, for the whole run tree, so tracing costs nothing when it is off and one dict lookup per
event that has no span. Export happens on the SDK's batch thread; a slow or dead collector fills
(and then drops from) a bounded queue and never blocks or fails a run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._events import AgentEvent
from ._credentials import secrets_from_env
from ._obs_sinks import RedactingSink
from ._otel_conventions import capture_from_env, conventions_for

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ._otel_spans import SpanBuilder

__all__ = ["DEFAULT_TIMEOUT_S", "OTEL_EXTRA_HINT", "OTelSink"]

OTEL_EXTRA_HINT = "OpenTelemetry export needs the SDK: pip install 'tinyagents-nb[otel]'"
"""The one line shown when the ``[otel]`` extra is missing."""

_SCOPE = "tinyagents_nb"
DEFAULT_TIMEOUT_S = 3.0
_TIMEOUT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
)


def _require_sdk() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ImportError(OTEL_EXTRA_HINT) from None


def _drop(offset: int, event: AgentEvent) -> None:
    """The redactor is used for its ``scrub_text``/``redact`` only: nothing is forwarded."""


def _signal_url(endpoint: str, signal: str) -> str:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics: a base URL gets ``/v1/{signal}``; a full one is kept."""
    base = endpoint.rstrip("/")
    if base.endswith(("/v1/traces", "/v1/metrics")):
        return base.rsplit("/v1/", 1)[0] + f"/v1/{signal}"
    return f"{base}/v1/{signal}"


class OTelSink:
    """An event listener that records each run as GenAI spans and metrics.

    Args:
        tracer_provider: Where spans go; ``None`` uses the global provider (``trace.set_tracer_provider``).
        meter_provider: Where ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` go;
            ``None`` uses the global one.
        capture_content: Put prompts, answers, tool arguments and results on spans. ``None`` reads
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``SPAN_ONLY``/``SPAN_AND_EVENT``/``true``).
            Content always passes the project's redaction first (configured and environment secrets,
            key-shaped strings, values under ``api_key``-like keys).
        conventions: Which version of the conventions' names to emit: ``"latest"`` (default), ``"1.41"``
            or ``"1.36"``; see the mapping table in ``docs/observability.md``.
        secrets: More literal values to scrub, besides credential-named environment variables.

    Raises:
        ImportError: The ``[otel]`` extra is not installed (one line names it).
        ConfigurationError: An unknown ``conventions`` version.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        *,
        conventions: str | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        _require_sdk()
        from opentelemetry import metrics, trace

        from ._otel_spans import SpanBuilder

        names = conventions_for(conventions)
        self.capture_content = capture_from_env() if capture_content is None else bool(capture_content)
        self.conventions = names.version
        self._owned: list[Any] = []
        tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(_SCOPE)
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_SCOPE)
        scrubber = RedactingSink(_drop, secrets=(*secrets_from_env(), *secrets), hold_deltas=False)
        self._builder: SpanBuilder = SpanBuilder(tracer, meter, names, capture=self.capture_content, scrubber=scrubber)
        self._lock = threading.Lock()
        self.errors = 0
        """Events the sink failed to turn into spans (each is logged by the event sink)."""

    @classmethod
    def otlp(
        cls,
        endpoint: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        capture_content: bool | None = None,
        conventions: str | None = None,
        service_name: str = "tinyagents-nb",
        metrics: bool = True,
    ) -> OTelSink:
        """A sink with its own providers exporting OTLP/HTTP protobuf to ``endpoint`` (batched, off the run's thread).

        ``endpoint`` is a collector's base URL (``http://127.0.0.1:4318``; ``/v1/traces`` and
        ``/v1/metrics`` are appended) or ``None`` to let the exporters read the standard
        ``OTEL_EXPORTER_OTLP_*`` variables (endpoint, headers, timeout). Call ``shutdown()`` to
        flush and stop the providers. Each export gives up after ``timeout_s`` (default 3 s rather
        than the SDK's 10, unless an ``OTEL_EXPORTER_OTLP_*TIMEOUT`` variable is set), which bounds
        what a dead collector can cost ``shutdown()`` and a kernel's exit.
        """
        _require_sdk()
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider as SDKMeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({"service.name": service_name})
        options: dict[str, Any] = {}
        if headers is not None:
            options["headers"] = dict(headers)
        if timeout_s is None and not any(os.environ.get(name) for name in _TIMEOUT_VARIABLES):
            timeout_s = DEFAULT_TIMEOUT_S
        if timeout_s is not None:
            options["timeout"] = timeout_s
        span_url = _signal_url(endpoint, "traces") if endpoint else None
        tracer_provider = SDKTracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=span_url, **options)))
        meter_provider = None
        if metrics:
            metric_url = _signal_url(endpoint, "metrics") if endpoint else None
            reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=metric_url, **options))
            meter_provider = SDKMeterProvider(resource=resource, metric_readers=[reader])
        sink = cls(tracer_provider, meter_provider, capture_content, conventions=conventions)
        sink._owned = [p for p in (tracer_provider, meter_provider) if p is not None]
        sink.endpoint = span_url
        return sink

    endpoint: str | None = None
    """Where ``otlp()`` sends spans (``None``: the ``OTEL_EXPORTER_OTLP_*`` variables decide)."""

    def __call__(self, offset: int, event: AgentEvent) -> None:
        with self._lock:
            try:
                self._builder.handle(event)
            except Exception:
                self.errors += 1
                raise

    @property
    def open_runs(self) -> int:
        """Runs whose ``invoke_agent`` span is still open."""
        return len(self._builder.runs)

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        """Export what the providers this sink owns still buffer; ``True`` when they all finished in time."""
        millis = int(timeout_s * 1000)
        return all(bool(p.force_flush(millis)) for p in self._owned)

    def shutdown(self) -> None:
        """Flush and stop the providers this sink built (``otlp()``); a no-op for providers passed in."""
        owned, self._owned = self._owned, []
        for provider in owned:
            provider.shutdown()

    def __repr__(self) -> str:
        where = f", endpoint={self.endpoint!r}" if self.endpoint else ""
        return (
            f"OTelSink(conventions={self.conventions!r}, capture_content={self.capture_content}"
            f"{where}, open_runs={self.open_runs})"
        )
