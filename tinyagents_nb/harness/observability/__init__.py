"""Observability: event journals, sinks that persist or redact events, run status and latency metrics.

Journals keep a run's events for replay (``InMemoryEventJournal``, ``SQLiteEventJournal``,
``JsonlEventJournal``); sinks feed them and scrub secrets on the way (``RedactingSink``);
``OTelSink`` turns runs into OpenTelemetry GenAI spans (extra ``[otel]``); ``AgentObservation`` is the flat, JSON-safe view of one event (``as_observations`` turns any record
a journal or sink holds into those, for code that reads records its own way); ``AgentLatencyMetrics``
and ``events_to_dataframe`` summarise a run.
"""

from __future__ import annotations

from ._credentials import (
    DEFAULT_PATTERNS as DEFAULT_PATTERNS,
    looks_like_credential as looks_like_credential,
    secrets_from_env as secrets_from_env,
)
from ._journal import (
    EventJournal as EventJournal,
    InMemoryEventJournal as InMemoryEventJournal,
    SQLiteEventJournal as SQLiteEventJournal,
)
from ._jsonl import (
    JsonlEventJournal as JsonlEventJournal,
)
from ._metrics import (
    AgentCallLatency as AgentCallLatency,
    AgentLatencyMetrics as AgentLatencyMetrics,
    RunLatency as RunLatency,
    event_detail as event_detail,
    events_to_dataframe as events_to_dataframe,
)
from ._obs_sinks import (
    DEFAULT_SENSITIVE_KEYS as DEFAULT_SENSITIVE_KEYS,
    FanOutSink as FanOutSink,
    JournalSink as JournalSink,
    JsonlSink as JsonlSink,
    RedactingSink as RedactingSink,
)
from ._observability import (
    AgentObservation as AgentObservation,
    Observed as Observed,
    RunStatusStore as RunStatusStore,
    UnrecognizedEvent as UnrecognizedEvent,
    as_observations as as_observations,
    event_from_dict as event_from_dict,
)
from ._otel import (
    OTelSink as OTelSink,
)
from ._otel_conventions import (
    CONVENTIONS as CONVENTIONS,
    GenAIConventions as GenAIConventions,
)

__all__ = [
    "AgentCallLatency",
    "AgentLatencyMetrics",
    "AgentObservation",
    "CONVENTIONS",
    "DEFAULT_PATTERNS",
    "DEFAULT_SENSITIVE_KEYS",
    "EventJournal",
    "FanOutSink",
    "GenAIConventions",
    "InMemoryEventJournal",
    "JournalSink",
    "JsonlEventJournal",
    "JsonlSink",
    "OTelSink",
    "Observed",
    "RedactingSink",
    "RunLatency",
    "RunStatusStore",
    "SQLiteEventJournal",
    "UnrecognizedEvent",
    "as_observations",
    "event_detail",
    "event_from_dict",
    "events_to_dataframe",
    "looks_like_credential",
    "secrets_from_env",
]
