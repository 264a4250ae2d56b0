"""The session's OpenTelemetry export: at most one ``OTelSink``, following the session's root event sink.

It outlives ``%agent reset`` (the new root context gets it too), and ``%config AgentMagics.otel_endpoint``
drives the same object as ``%agent trace``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from IPython.core.error import UsageError

from tinyagents_nb.harness import EventSink
from tinyagents_nb.harness.observability import OTelSink

__all__ = ["SessionTracing"]


class SessionTracing:
    """The session's OpenTelemetry export: at most one sink, attached to the session's root event sink."""

    def __init__(self) -> None:
        self.sink: OTelSink | None = None
        self._events: EventSink | None = None
        self._remove: Callable[[], None] | None = None

    def attach(self, events: EventSink) -> Callable[[], None]:
        """Follow ``events`` (the session's root sink, new at each reset); returns what detaches it."""
        self._events = events
        self._listen()
        return self._detach

    def _listen(self) -> None:
        self._detach()
        if self.sink is not None and self._events is not None:
            self._remove = self._events.add_listener(self.sink)

    def _detach(self) -> None:
        remove, self._remove = self._remove, None
        if remove is not None:
            remove()

    def start(self, endpoint: str | None, *, capture_content: bool | None = None) -> OTelSink:
        """Export from now on to ``endpoint`` (``None``: the ``OTEL_EXPORTER_OTLP_*`` variables), replacing any export.

        Raises:
            UsageError: The ``[otel]`` extra is missing (the message names it).
        """
        try:
            sink = OTelSink.otlp(endpoint, capture_content=capture_content)
        except ImportError as exc:
            raise UsageError(str(exc)) from None
        self.stop()
        self.sink = sink
        self._listen()
        return sink

    def stop(self) -> bool:
        """Stop exporting (what is buffered is still flushed, in the background); ``False`` when nothing was exported."""
        sink, self.sink = self.sink, None
        self._detach()
        if sink is None:
            return False
        # flush on a thread: a dead collector holds shutdown() up to the export timeout, never the cell
        threading.Thread(target=sink.shutdown, name="tinyagents-otel-shutdown", daemon=True).start()
        return True

    def describe(self) -> str:
        sink = self.sink
        if sink is None:
            return "tracing: off (%agent trace otlp URL exports every run as OpenTelemetry GenAI spans)"
        where = sink.endpoint or "the OTEL_EXPORTER_OTLP_* endpoint"
        content = "on (redacted)" if sink.capture_content else "off"
        return f"tracing: OTLP/HTTP to {where} · conventions {sink.conventions} · content {content}"
