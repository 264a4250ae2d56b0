"""Durable observability, part 4: latency metrics and event tables computed from an event record.

Everything here reads a *record* — a journal's observations, a sink's ``(offset, event)`` pairs or
a list of events — so it works the same live, after a run, or on a journal from another process.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final, Literal

from .._events import AgentEvent, event_to_dict
from ._observability import AgentObservation, Observed, as_observations

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AgentCallLatency", "AgentLatencyMetrics", "RunLatency", "event_detail", "events_to_dataframe"]

_STARTS: Final = {"model.started": "model", "tool.started": "tool"}
_ENDS: Final = {"model.completed": "model", "model.failed": "model", "tool.completed": "tool", "tool.failed": "tool"}
_TERMINAL: Final = {"run.completed": "completed", "run.failed": "failed", "run.cancelled": "cancelled"}
_LINEAGE: Final = frozenset({"kind", "run_id", "parent_run_id", "root_run_id", "depth", "ts"})
_DETAIL_WIDTH: Final = 120


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentCallLatency:
    """One completed model or tool call.

    Attributes:
        kind: ``"model"`` or ``"tool"``.
        call_id: The call's id (unique within its run).
        run_id: The run that made the call.
        depth: That run's depth in the tree.
        name: The model that answered, or the tool that ran.
        started_at: Wall-clock time of the started event.
        duration_s: The duration the harness measured, else the time between the two events.
        ok: ``False`` for ``model.failed`` / ``tool.failed``.
        cached: The model answer came from the response cache.
    """

    kind: Literal["model", "tool"]
    call_id: str
    run_id: str
    depth: int
    name: str
    started_at: float
    duration_s: float
    ok: bool = True
    cached: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class RunLatency:
    """One run's share of a tree: its own elapsed time and the calls it made itself (not its children's)."""

    run_id: str
    parent_run_id: str | None
    depth: int
    status: str
    elapsed_s: float | None
    model_calls: int
    tool_calls: int
    total_model_s: float
    total_tool_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentLatencyMetrics:
    """Where a run's time went, across its whole sub-agent tree.

    Attributes:
        run_id: The run summarised (the record's first root run unless chosen).
        run_elapsed_s: Its started→terminal time; ``None`` while it has not ended.
        model_calls: Completed model calls in the subtree, in start order.
        tool_calls: Completed tool calls in the subtree, in start order.
        runs: Per-run breakdown (the run itself first, then its sub-agent runs as they started).
    """

    run_id: str | None
    run_elapsed_s: float | None
    model_calls: tuple[AgentCallLatency, ...] = ()
    tool_calls: tuple[AgentCallLatency, ...] = ()
    runs: tuple[RunLatency, ...] = ()

    @property
    def total_model_s(self) -> float:
        return sum(c.duration_s for c in self.model_calls)

    @property
    def max_model_s(self) -> float:
        return max((c.duration_s for c in self.model_calls), default=0.0)

    @property
    def total_tool_s(self) -> float:
        return sum(c.duration_s for c in self.tool_calls)

    @property
    def max_tool_s(self) -> float:
        return max((c.duration_s for c in self.tool_calls), default=0.0)

    @classmethod
    def from_record(cls, record: Iterable[Observed], *, run_id: str | None = None) -> AgentLatencyMetrics:
        """Pair started/finished events by call id and sum them; calls that never finished are ignored.

        Args:
            record: Observations, ``(offset, event)`` pairs or events, in emission order.
            run_id: Summarise this run and its sub-agents; default: the record's first root run.
        """
        observations = as_observations(record)
        target = run_id if run_id is not None else _first_root(observations)
        if target is None:
            return cls(run_id=None, run_elapsed_s=None)
        observations = _subtree(observations, target)
        pending: dict[tuple[str, str, str], AgentObservation] = {}
        calls: list[tuple[int, AgentCallLatency]] = []
        runs: dict[str, dict[str, Any]] = {}
        for obs in observations:
            event, kind = obs.event, obs.kind
            run = runs.setdefault(obs.run_id, {"obs": obs, "started": None, "ended": None})
            if kind == "run.started":
                run["started"] = obs
            elif kind in _TERMINAL:
                run["ended"] = obs
            elif kind in _STARTS:
                pending[(_STARTS[kind], obs.run_id, str(getattr(event, "call_id", "")))] = obs
            elif kind in _ENDS:
                family = _ENDS[kind]
                started = pending.pop((family, obs.run_id, str(getattr(event, "call_id", ""))), None)
                if started is not None:
                    calls.append((started.offset, _call(family, started, obs)))
        calls.sort(key=lambda item: item[0])
        model = tuple(c for _, c in calls if c.kind == "model")
        tool = tuple(c for _, c in calls if c.kind == "tool")
        breakdown = tuple(_run_latency(rid, info, model, tool) for rid, info in runs.items())
        ordered = sorted(breakdown, key=lambda r: r.run_id != target)  # stable: the target first
        elapsed = next((r.elapsed_s for r in ordered if r.run_id == target), None)
        return cls(run_id=target, run_elapsed_s=elapsed, model_calls=model, tool_calls=tool, runs=tuple(ordered))

    def to_dict(self) -> dict[str, Any]:
        """The headline numbers, for logging or a quick display."""
        return {
            "run_id": self.run_id,
            "run_elapsed_s": self.run_elapsed_s,
            "model_calls": len(self.model_calls),
            "tool_calls": len(self.tool_calls),
            "total_model_s": self.total_model_s,
            "max_model_s": self.max_model_s,
            "total_tool_s": self.total_tool_s,
            "max_tool_s": self.max_tool_s,
        }

    def to_dataframe(self, *, per: Literal["call", "run"] = "call") -> pd.DataFrame:
        """One row per call (``per="call"``) or per run (``per="run"``); pandas is imported on first use."""
        import pandas as pd

        if per == "run":
            columns = [f.name for f in fields(RunLatency)]
            return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in self.runs], columns=columns)
        if per != "call":
            raise ValueError(f"per must be 'call' or 'run', got {per!r}")
        columns = [f.name for f in fields(AgentCallLatency)]
        rows = [{c: getattr(call, c) for c in columns} for call in (*self.model_calls, *self.tool_calls)]
        frame = pd.DataFrame(rows, columns=columns)
        return frame.sort_values("started_at", kind="stable", ignore_index=True) if rows else frame


def _first_root(observations: list[AgentObservation]) -> str | None:
    for obs in observations:
        if obs.kind == "run.started" and obs.parent_run_id is None:
            return obs.run_id
    return observations[0].root_run_id if observations else None


def _subtree(observations: list[AgentObservation], run_id: str) -> list[AgentObservation]:
    """The observations of ``run_id`` and every run beneath it (lineage taken from the events)."""
    parents = {obs.run_id: obs.parent_run_id for obs in observations}
    inside: dict[str, bool] = {run_id: True}

    def within(rid: str) -> bool:
        chain: list[str] = []
        current: str | None = rid
        while current is not None and current not in inside and current not in chain:
            chain.append(current)
            current = parents.get(current)
        verdict = current is not None and inside.get(current, False)
        for seen in chain:
            inside[seen] = verdict
        return verdict

    return [obs for obs in observations if within(obs.run_id)]


def _duration(started: AgentObservation, ended: AgentObservation) -> float:
    measured = getattr(ended.event, "duration_s", 0.0)
    if isinstance(measured, int | float) and measured > 0:
        return float(measured)
    return max(ended.ts - started.ts, 0.0)


def _call(family: str, started: AgentObservation, ended: AgentObservation) -> AgentCallLatency:
    if family == "model":
        name = getattr(ended.event, "model", None) or getattr(started.event, "model", "")
        return AgentCallLatency(
            kind="model",
            call_id=str(getattr(started.event, "call_id", "")),
            run_id=started.run_id,
            depth=started.depth,
            name=str(name),
            started_at=started.ts,
            duration_s=_duration(started, ended),
            ok=ended.kind == "model.completed",
            cached=bool(getattr(ended.event, "cached", False)),
        )
    return AgentCallLatency(
        kind="tool",
        call_id=str(getattr(started.event, "call_id", "")),
        run_id=started.run_id,
        depth=started.depth,
        name=str(getattr(started.event, "tool_name", "")),
        started_at=started.ts,
        duration_s=_duration(started, ended),
        ok=ended.kind == "tool.completed" and not getattr(ended.event, "is_error", False),
    )


def _run_latency(
    run_id: str, info: dict[str, Any], model: tuple[AgentCallLatency, ...], tool: tuple[AgentCallLatency, ...]
) -> RunLatency:
    first: AgentObservation = info["obs"]
    started: AgentObservation | None = info["started"]
    ended: AgentObservation | None = info["ended"]
    elapsed = None if started is None or ended is None else _duration(started, ended)
    own_model = [c.duration_s for c in model if c.run_id == run_id]
    own_tool = [c.duration_s for c in tool if c.run_id == run_id]
    return RunLatency(
        run_id=run_id,
        parent_run_id=first.parent_run_id,
        depth=first.depth,
        status="running" if ended is None else _TERMINAL[ended.kind],
        elapsed_s=elapsed,
        model_calls=len(own_model),
        tool_calls=len(own_tool),
        total_model_s=sum(own_model),
        total_tool_s=sum(own_tool),
    )


# ------------------------------------------------------------------------------------------ event table
def events_to_dataframe(record: Iterable[Observed]) -> pd.DataFrame:
    """One row per event — offset, event_id, kind, lineage, ts and a one-line ``detail`` — for notebooks."""
    import pandas as pd

    columns = ["offset", "event_id", "kind", "run_id", "parent_run_id", "root_run_id", "depth", "ts", "detail"]
    rows = [
        {
            "offset": obs.offset,
            "event_id": obs.event_id,
            "kind": obs.kind,
            "run_id": obs.run_id,
            "parent_run_id": obs.parent_run_id,
            "root_run_id": obs.root_run_id,
            "depth": obs.depth,
            "ts": obs.ts,
            "detail": event_detail(obs.event),
        }
        for obs in as_observations(record)
    ]
    return pd.DataFrame(rows, columns=columns)


def event_detail(event: AgentEvent, width: int = _DETAIL_WIDTH) -> str:
    """A compact one-line summary of an event's payload (its non-lineage fields)."""
    data = event_to_dict(event)
    if event.kind == "model.delta" and isinstance(data.get("delta"), dict):
        delta = data["delta"]
        text = delta.get("text") if "text" in delta else delta.get("arguments", "")
        return _clip(f"{delta.get('type', 'delta')}: {json.dumps(text, ensure_ascii=False)}", width)
    parts = []
    for key, value in data.items():
        if key in _LINEAGE or value is None or value is False or value == "" or value == {}:
            continue
        if isinstance(value, dict) and "input_tokens" in value and "output_tokens" in value:
            value = f"{value['input_tokens']}+{value['output_tokens']} tok"
        elif isinstance(value, float):
            value = f"{value:.4g}"
        elif not isinstance(value, str | int):
            value = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
        parts.append(f"{key}={value}")
    return _clip(" ".join(parts), width)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())  # one line
    return text if len(text) <= width else text[: width - 1] + "…"
