"""Durable observability, part 1: ``AgentObservation``, the event codec, and the run status store.

An ``AgentObservation`` is an event plus the correlation a journal or trace backend needs without the
live sink: its stream offset, a stable ``event_id`` and the run lineage copied out as plain columns.
``event_from_dict`` is the inverse of ``event_to_dict``, so a journal written by one process can be
replayed as typed events by another. Kinds this process does not know (a newer writer, a plugin's
events) decode to ``UnrecognizedEvent`` rather than failing: an old journal must stay readable.

``RunStatusStore`` is an ``EventSink`` listener that folds the stream into one ``HarnessRunStatus``
per run, which is what the notebook's ``%agent runs`` shows.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Self, TypeAlias

from pydantic import TypeAdapter, ValidationError

from .._errors import ConfigurationError
from .._events import AgentEvent, event_to_dict
from .._run import HarnessRunStatus, RunStatus

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AgentObservation",
    "Observed",
    "RunStatusStore",
    "UnrecognizedEvent",
    "event_from_dict",
]

_LINEAGE: Final = ("kind", "run_id", "parent_run_id", "root_run_id", "depth", "ts")


@dataclass(frozen=True, kw_only=True, slots=True)
class UnrecognizedEvent(AgentEvent):
    """An event whose ``kind`` this process has no class for (or whose payload no longer fits it).

    ``kind`` and lineage are kept, so filters, status and metrics still see it; the other fields stay
    in ``data``, and re-serializing writes them back in their original shape.

    Attributes:
        data: The payload fields other than ``kind`` and lineage.
        reason: Why the event could not be decoded as a typed event.
    """

    data: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def _is_int(value: object) -> bool:
    """A real int (``True`` is not a count); for validating arguments that come from untyped callers."""
    return isinstance(value, int) and not isinstance(value, bool)


# ------------------------------------------------------------------------------------------ codec
_classes: dict[str, type[AgentEvent]] = {}
_adapters: dict[type[AgentEvent], TypeAdapter[Any]] = {}
_codec_lock = threading.Lock()


def _scan_event_classes() -> dict[str, type[AgentEvent]]:
    """Map each kind to its class by walking ``AgentEvent``'s subclasses (lazily, so plugins count too).

    ``dataclass(slots=True)`` leaves the pre-slots class behind until it is collected; when two classes
    claim a kind, the slotted one (the real one) wins, else the most recently defined.
    """
    candidates: dict[str, list[type[AgentEvent]]] = {}
    stack: list[type[AgentEvent]] = list(AgentEvent.__subclasses__())
    seen: set[type[AgentEvent]] = set()
    while stack:
        cls = stack.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        kind_field = getattr(cls, "__dataclass_fields__", {}).get("kind")
        kind = getattr(kind_field, "default", None)
        if cls is UnrecognizedEvent or not isinstance(kind, str) or kind == "event":
            continue
        candidates.setdefault(kind, []).append(cls)
    found: dict[str, type[AgentEvent]] = {}
    for kind, classes in candidates.items():
        slotted = [cls for cls in classes if "__slots__" in vars(cls)]
        found[kind] = (slotted or classes)[-1]
    return found


def _event_class(kind: str) -> type[AgentEvent] | None:
    cls = _classes.get(kind)
    if cls is None:  # maybe defined since the last scan
        with _codec_lock:
            _classes.clear()
            _classes.update(_scan_event_classes())
            cls = _classes.get(kind)
    return cls


def _adapter(cls: type[AgentEvent]) -> TypeAdapter[Any]:
    adapter = _adapters.get(cls)
    if adapter is None:
        adapter = _adapters[cls] = TypeAdapter(cls)
    return adapter


def _unrecognized(data: Mapping[str, Any], reason: str) -> UnrecognizedEvent:
    run_id = data.get("run_id")
    root = data.get("root_run_id", run_id)
    if not isinstance(run_id, str) or not isinstance(root, str):
        raise ConfigurationError(f"event dict of kind {data.get('kind')!r} has no run_id/root_run_id")
    depth, ts, parent = data.get("depth", 0), data.get("ts", 0.0), data.get("parent_run_id")
    return UnrecognizedEvent(
        kind=str(data["kind"]),
        run_id=run_id,
        parent_run_id=parent if isinstance(parent, str) else None,
        root_run_id=root,
        depth=depth if isinstance(depth, int) and not isinstance(depth, bool) else 0,
        ts=float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0.0,
        data={k: v for k, v in data.items() if k not in _LINEAGE},
        reason=reason,
    )


def event_from_dict(data: Mapping[str, Any], *, lenient: bool = False) -> AgentEvent:
    """Rebuild a typed event from ``event_to_dict`` output (nested usage, deltas and Decimals included).

    Args:
        data: The dict, as decoded from JSON.
        lenient: Decode a known kind whose payload does not validate as ``UnrecognizedEvent`` instead of
            raising, so one drifted row never makes a whole journal unreadable.

    Raises:
        ConfigurationError: ``data`` has no ``kind``, or (unless ``lenient``) does not fit its kind's class.
    """
    raw: object = data  # callers pass decoded JSON: check its shape at runtime
    if not isinstance(raw, Mapping) or not isinstance(raw.get("kind"), str):
        raise ConfigurationError(f"an event dict needs a str 'kind', got {type(data).__name__}")
    kind: str = data["kind"]
    cls = _event_class(kind)
    if cls is None:
        return _unrecognized(data, f"no event class for kind {kind!r}")
    try:
        event: AgentEvent = _adapter(cls).validate_python(dict(data))
    except ValidationError as exc:
        if lenient:
            return _unrecognized(data, f"does not fit {cls.__name__}: {exc.error_count()} validation error(s)")
        raise ConfigurationError(f"event dict does not fit {cls.__name__}: {exc}") from None
    return event


def _dumps(value: Any) -> str:
    """Compact JSON; non-ASCII kept readable unless it holds lone surrogates that UTF-8 cannot encode."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, separators=(",", ":"))
    return text


def _event_dict(event: AgentEvent) -> dict[str, Any]:
    """``event_to_dict``, except an ``UnrecognizedEvent`` is written back in its original flat shape."""
    if isinstance(event, UnrecognizedEvent):
        out = {name: getattr(event, name) for name in _LINEAGE}
        out.update(event_to_dict(event)["data"])
        return out
    return event_to_dict(event)


# ------------------------------------------------------------------------------------------ observation
@dataclass(frozen=True, kw_only=True, slots=True)
class AgentObservation:
    """One event as a journal stores it: the event plus its position and lineage as plain columns.

    Attributes:
        event_id: ``"{root_run_id}-evt-{offset}"``; unique while a root run's events share one sink.
        offset: The event's offset on its ``EventSink`` (dense from 0 for a sink).
        run_id: The run that emitted the event.
        parent_run_id: Its parent run, ``None`` for a root run.
        root_run_id: The root of its recursion tree.
        depth: ``0`` for a root run, ``+1`` per sub-agent level.
        kind: The event's dotted kind, e.g. ``"tool.started"``.
        ts: Wall-clock time of the event (epoch seconds).
        event: The typed event.
    """

    event_id: str
    offset: int
    run_id: str
    parent_run_id: str | None
    root_run_id: str
    depth: int
    kind: str
    ts: float
    event: AgentEvent

    @classmethod
    def from_event(cls, offset: int, event: AgentEvent) -> AgentObservation:
        """Wrap an event delivered by a sink at ``offset``."""
        root = str(event.root_run_id)
        return cls(
            event_id=f"{root}-evt-{offset}",
            offset=offset,
            run_id=str(event.run_id),
            parent_run_id=None if event.parent_run_id is None else str(event.parent_run_id),
            root_run_id=root,
            depth=event.depth,
            kind=event.kind,
            ts=event.ts,
            event=event,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; the event is nested under ``"event"``."""
        return {
            "event_id": self.event_id,
            "offset": self.offset,
            "run_id": self.run_id,
            "parent_run_id": self.parent_run_id,
            "root_run_id": self.root_run_id,
            "depth": self.depth,
            "kind": self.kind,
            "ts": self.ts,
            "event": _event_dict(self.event),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, lenient: bool = False) -> AgentObservation:
        """Inverse of ``to_dict`` (``lenient`` as in ``event_from_dict``).

        Raises:
            ConfigurationError: A column is missing or has the wrong type.
        """
        try:
            event = event_from_dict(data["event"], lenient=lenient)
            offset = data["offset"]
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise TypeError("offset must be an int")
            return cls(
                event_id=str(data.get("event_id") or f"{event.root_run_id}-evt-{offset}"),
                offset=offset,
                run_id=str(data.get("run_id", event.run_id)),
                parent_run_id=data.get("parent_run_id", event.parent_run_id),
                root_run_id=str(data.get("root_run_id", event.root_run_id)),
                depth=int(data.get("depth", event.depth)),
                kind=str(data.get("kind", event.kind)),
                ts=float(data.get("ts", event.ts)),
                event=event,
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigurationError):
                raise
            raise ConfigurationError(f"not an observation dict: {exc!r}") from None


Observed: TypeAlias = AgentObservation | tuple[int, AgentEvent] | AgentEvent
"""What readers of a record accept: observations, a sink's ``(offset, event)`` pairs, or bare events."""


def as_observations(items: Iterable[Observed]) -> list[AgentObservation]:
    """Normalise a record to observations; a bare event's offset is its position in ``items``."""
    out: list[AgentObservation] = []
    for index, entry in enumerate(items):
        item: object = entry  # untyped callers pass anything: check at runtime
        if isinstance(item, AgentObservation):
            out.append(item)
        elif isinstance(item, AgentEvent):
            out.append(AgentObservation.from_event(index, item))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], AgentEvent):
            out.append(AgentObservation.from_event(int(item[0]), item[1]))
        else:
            raise ConfigurationError(
                f"expected AgentObservation, (offset, AgentEvent) or AgentEvent, got {type(item).__name__}"
            )
    return out


# ------------------------------------------------------------------------------------------ status store
_TERMINAL: Final[dict[str, RunStatus]] = {
    "run.completed": "completed",
    "run.failed": "failed",
    "run.cancelled": "cancelled",
}


class RunStatusStore:
    """Keeps a ``HarnessRunStatus`` per run, folded from the event stream; attach it to a sink.

    ``sink.add_listener(store)`` keeps it live; ``store.replay(journal.read_from(0))`` rebuilds it
    after a restart. Reads return copies, so a caller cannot corrupt the store. ``metadata`` holds the
    run's ``model`` and the ``last_kind``/``last_offset`` seen for it.

    Args:
        max_runs: Past this many runs the oldest *terminal* runs are forgotten; active runs never are.

    Raises:
        ConfigurationError: ``max_runs`` is below 1.
    """

    def __init__(self, *, max_runs: int = 1000) -> None:
        if not _is_int(max_runs) or max_runs < 1:
            raise ConfigurationError(f"max_runs must be an int >= 1, got {max_runs!r}")
        self._max = max_runs
        self._runs: OrderedDict[str, HarnessRunStatus] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, offset: int, event: AgentEvent) -> None:
        self.observe(event, offset)

    def observe(self, event: AgentEvent, offset: int | None = None) -> None:
        """Fold one event into its run's status."""
        kind, run_id = event.kind, str(event.run_id)
        with self._lock:
            status = self._runs.get(run_id)
            if status is None or kind == "run.started":
                status = self._start(event)
            status.metadata["last_kind"] = kind
            if offset is not None:
                status.metadata["last_offset"] = offset
            if kind == "model.started":
                status.phase = "model"
                status.active_model_call = getattr(event, "call_id", None)
            elif kind == "model.completed":
                status.model_calls += 1
                status.active_model_call = None
            elif kind == "model.failed":
                status.active_model_call = None
            elif kind == "tool.started":
                status.phase = "tools"
            elif kind in ("tool.completed", "tool.replayed"):  # a resumed run counts its calls from before
                status.tool_calls += 1
            elif kind == "run.resumed":
                status.model_calls += getattr(event, "model_calls", 0)
            elif kind in _TERMINAL:
                self._finish(status, event)

    def _start(self, event: AgentEvent) -> HarnessRunStatus:
        run_id = str(event.run_id)
        thread_id = getattr(event, "thread_id", None)
        status = HarnessRunStatus(
            run_id=run_id,
            parent_run_id=None if event.parent_run_id is None else str(event.parent_run_id),
            root_run_id=str(event.root_run_id),
            thread_id=None if thread_id is None else str(thread_id),
            depth=event.depth,
            started_at=event.ts,
        )
        model = getattr(event, "model", None)
        if event.kind == "run.started" and model is not None:
            status.metadata["model"] = model
        self._runs.pop(run_id, None)
        self._runs[run_id] = status
        return status

    def _finish(self, status: HarnessRunStatus, event: AgentEvent) -> None:
        status.status = _TERMINAL[event.kind]
        status.phase = "done"
        status.active_model_call = None
        status.ended_at = event.ts
        if event.kind == "run.completed":
            status.model_calls = getattr(event, "model_calls", status.model_calls)
            status.tool_calls = getattr(event, "tool_calls", status.tool_calls)
        elif event.kind == "run.failed":
            status.error = f"{getattr(event, 'error_type', 'Error')}: {getattr(event, 'error', '')}"
        else:
            reason = getattr(event, "reason", None)
            status.error = f"cancelled: {reason}" if reason else "cancelled"
        self._runs.move_to_end(status.run_id)  # terminal runs are evicted in the order they ended
        self._evict()

    def _evict(self) -> None:
        excess = len(self._runs) - self._max
        if excess <= 0:
            return
        for run_id in [r for r, s in self._runs.items() if s.is_terminal][:excess]:
            del self._runs[run_id]

    def replay(self, items: Iterable[Observed]) -> Self:
        """Fold a recorded stream (e.g. a journal's observations) in; returns the store."""
        for obs in as_observations(items):
            self.observe(obs.event, obs.offset)
        return self

    # ---------------------------------------------------------------------------- reads
    def get(self, run_id: str) -> HarnessRunStatus | None:
        """A copy of the run's status, or ``None`` when unknown (or evicted)."""
        with self._lock:
            status = self._runs.get(str(run_id))
            return None if status is None else _copy(status)

    def list_all(self) -> list[HarnessRunStatus]:
        """Every known run, oldest first (terminal runs ordered by when they ended)."""
        with self._lock:
            return [_copy(s) for s in self._runs.values()]

    def list_by_root(self, root_run_id: str) -> list[HarnessRunStatus]:
        """The runs of one recursion tree."""
        return [s for s in self.list_all() if s.root_run_id == root_run_id]

    def list_by_thread(self, thread_id: str) -> list[HarnessRunStatus]:
        """The runs of one conversation thread."""
        return [s for s in self.list_all() if s.thread_id == thread_id]

    def list_active(self) -> list[HarnessRunStatus]:
        """Runs that have not reached a terminal event."""
        return [s for s in self.list_all() if not s.is_terminal]

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def to_dataframe(self) -> pd.DataFrame:
        """One row per run (pandas is imported on first use)."""
        import pandas as pd

        columns = [f.name for f in dataclasses.fields(HarnessRunStatus) if f.name != "metadata"]
        rows = [{**{c: getattr(s, c) for c in columns}, "model": s.metadata.get("model")} for s in self.list_all()]
        return pd.DataFrame(rows, columns=[*columns, "model"])

    def __repr__(self) -> str:
        active = sum(not s.is_terminal for s in self._runs.values())
        return f"RunStatusStore(runs={len(self._runs)}, active={active}, max_runs={self._max})"


def _copy(status: HarnessRunStatus) -> HarnessRunStatus:
    return dataclasses.replace(status, metadata=dict(status.metadata))
