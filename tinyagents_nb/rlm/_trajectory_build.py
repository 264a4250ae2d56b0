"""Building a ``Trajectory`` from a run tree's events, and recording those events for a live ``RLM``.

``build_trajectory`` reads events in offset order (from a journal, or from ``TrajectoryRecorder``)
and keeps the subtree of one run: each run's ``run.started``/``run.completed``/``run.failed``/
``run.cancelled``, its code steps (``rlm.code`` then ``rlm.output``), the sub-calls a step started
(``subagent.started`` emitted by the run while the step was running), its own model calls, usage
and cost, its limit and partial answer. Every string is scrubbed of secrets on the way (configured
keys found in the environment, key-shaped text: the ``RedactingSink`` rules).

``TrajectoryRecorder`` is the live ``RLM``'s way to keep those events: the RLM's middleware attaches
it to the run's event sink when the root RLM run starts and it detaches when the run has ended.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tinyagents_nb.harness import Usage
from tinyagents_nb.harness.events import (
    AgentEvent,
    CostRecorded,
    LimitReached,
    ModelCompleted,
    ModelFailed,
    RunCancelledEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    SubAgentStarted,
    UsageRecorded,
)
from tinyagents_nb.harness.observability import AgentObservation, RedactingSink, secrets_from_env

from ._events import RLMCode, RLMOutput, RLMPartialAnswer, RLMStarted
from ._trajectory import Trajectory, TrajectoryError
from ._trajectory_model import TrajectoryCall, TrajectoryRun, TrajectoryStep

__all__ = ["TrajectoryRecorder", "build_trajectory"]

EventLike = AgentObservation | tuple[int, AgentEvent] | AgentEvent


@dataclass
class _Run:
    run_id: str
    parent: str | None
    depth: int
    fields: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    open_step: dict[str, Any] | None = None
    calls: list[TrajectoryCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost: Decimal | None = Decimal(0)


def _events(items: Iterable[EventLike]) -> list[AgentEvent]:
    pairs: list[tuple[int, AgentEvent]] = []
    for position, item in enumerate(items):
        if isinstance(item, AgentObservation):
            pairs.append((item.offset, item.event))
        elif isinstance(item, tuple):
            pairs.append(item)
        else:
            pairs.append((position, item))
    pairs.sort(key=lambda pair: pair[0])
    return [event for _, event in pairs]


def _subtree(events: list[AgentEvent], root: str) -> set[str]:
    parent: dict[str, str | None] = {}
    for event in events:
        parent.setdefault(str(event.run_id), None if event.parent_run_id is None else str(event.parent_run_id))
    inside: dict[str, bool] = {root: True}

    def within(run: str) -> bool:
        chain = []
        node: str | None = run
        while node is not None and node not in inside:
            chain.append(node)
            node = parent.get(node)
        answer = node is not None and inside[node]
        for item in chain:
            inside[item] = answer
        return answer

    return {run for run in parent if within(run)}


def build_trajectory(
    events: Iterable[EventLike], root_run_id: str, *, answer: str | None = None, scrub: bool = True
) -> Trajectory:
    """The trajectory of ``root_run_id`` and everything beneath it, from its events.

    Args:
        events: Journal observations, ``(offset, event)`` pairs or events in order.
        root_run_id: The RLM run to start from.
        answer: The root's whole answer when known (the events carry 2,000 characters of it).
        scrub: Replace secrets (keys in the environment, key-shaped text) in every string.

    Raises:
        TrajectoryError: No event of ``root_run_id`` is among ``events``.
    """
    ordered = _events(events)
    members = _subtree(ordered, root_run_id)
    runs: dict[str, _Run] = {}
    for event in ordered:
        run_id = str(event.run_id)
        if run_id not in members:
            continue
        run = runs.get(run_id)
        if run is None:
            parent = None if event.parent_run_id is None or run_id == root_run_id else str(event.parent_run_id)
            run = runs[run_id] = _Run(run_id, parent, event.depth)
        _apply(run, event, runs)
    if root_run_id not in runs:
        raise TrajectoryError(f"no events of run {root_run_id!r}: it is not in this journal (or not yet started)")
    if answer is not None and runs[root_run_id].fields.get("status") == "completed":
        runs[root_run_id].fields["answer"] = answer
    scrubber = RedactingSink(lambda offset, event: None, secrets=secrets_from_env()).scrub_text if scrub else None
    ordered_runs = _preorder(runs, root_run_id)
    return Trajectory([_freeze(run, scrubber) for run in ordered_runs], exported_at=time.time())


def _apply(run: _Run, event: AgentEvent, runs: dict[str, _Run]) -> None:
    if not _lifecycle(run, event):
        _work(run, event, runs)


def _lifecycle(run: _Run, event: AgentEvent) -> bool:
    """The run's start, end, limit and partial answer (``False``: not one of those events)."""
    fields = run.fields
    if isinstance(event, RunStarted):
        fields.update(input=event.input, model=event.model, started_at=event.ts, status="running")
        fields.setdefault("agent", event.agent)
    elif isinstance(event, RLMStarted):
        fields["kind"] = "rlm"
    elif isinstance(event, RunCompleted):
        fields.update(status="completed", answer=event.final_text, duration_s=event.duration_s)
    elif isinstance(event, RunFailed):
        fields.update(status="failed", error_type=event.error_type, error=event.error, duration_s=event.duration_s)
    elif isinstance(event, RunCancelledEvent):
        fields.update(status="cancelled", error_type="RunCancelled", error=event.reason, duration_s=event.duration_s)
    elif isinstance(event, LimitReached):
        fields["limit"] = str(event.limit)
    elif isinstance(event, RLMPartialAnswer):
        fields.update(partial_answer=event.answer, partial_source=event.source)
    else:
        return False
    return True


def _work(run: _Run, event: AgentEvent, runs: dict[str, _Run]) -> None:
    """Code steps, sub-calls, model calls, usage and cost."""
    if isinstance(event, RLMCode):
        run.open_step = {"iteration": event.iteration, "index": event.index, "code": event.code, "sub_calls": []}
        run.open_step.update(prose=event.prose, prose_after=event.prose_after)
        run.steps.append(run.open_step)
    elif isinstance(event, RLMOutput):
        step = run.open_step
        if step is None or (step["iteration"], step["index"]) != (event.iteration, event.index):
            step = {"iteration": event.iteration, "index": event.index, "code": "", "sub_calls": []}
            run.steps.append(step)
        step.update(
            output=event.output, error_type=event.error_type, duration_s=event.duration_s, truncated=event.truncated
        )
        run.open_step = None
    elif isinstance(event, SubAgentStarted):
        child = runs.setdefault(event.child_run_id, _Run(event.child_run_id, run.run_id, run.depth + 1))
        child.fields["agent"] = event.name
        if run.open_step is not None:
            run.open_step["sub_calls"].append(event.child_run_id)
    elif isinstance(event, ModelCompleted):
        if event.finish_reason != "rlm_final":  # the protocol's closing turn: no model was called
            run.calls.append(
                TrajectoryCall(
                    call_id=event.call_id,
                    model=event.model,
                    input_tokens=event.usage.input_tokens,
                    output_tokens=event.usage.output_tokens,
                    duration_s=event.duration_s,
                    finish_reason=event.finish_reason,
                )
            )
    elif isinstance(event, ModelFailed):
        run.calls.append(
            TrajectoryCall(call_id=event.call_id, model=event.model, error_type=event.error_type, error=event.error)
        )
    elif isinstance(event, UsageRecorded):
        run.usage = run.usage + event.usage
    elif isinstance(event, CostRecorded):
        run.cost = None if run.cost is None or event.usd is None else run.cost + event.usd


def _preorder(runs: dict[str, _Run], root: str) -> list[_Run]:
    children: dict[str, list[_Run]] = {}
    for run in runs.values():
        if run.parent is not None and run.run_id != root:
            children.setdefault(run.parent, []).append(run)
    out: list[_Run] = []
    stack = [runs[root]]
    while stack:
        run = stack.pop()
        out.append(run)
        stack.extend(reversed(children.get(run.run_id, ())))
    return out


def _freeze(run: _Run, scrub: Callable[[str], str] | None) -> TrajectoryRun:
    def clean(value: Any) -> Any:
        return scrub(value) if scrub is not None and isinstance(value, str) else value

    steps = tuple(
        TrajectoryStep(
            iteration=step["iteration"],
            index=step["index"],
            code=clean(step["code"]),
            output=clean(step.get("output", "")),
            error_type=step.get("error_type"),
            duration_s=step.get("duration_s", 0.0),
            truncated=step.get("truncated", False),
            sub_calls=tuple(step["sub_calls"]),
            prose=clean(step.get("prose", "")),
            prose_after=clean(step.get("prose_after", "")),
        )
        for step in run.steps
    )
    calls = tuple(dataclasses.replace(call, error=clean(call.error)) for call in run.calls)
    fields = {name: clean(value) for name, value in run.fields.items()}
    return TrajectoryRun(
        run_id=run.run_id,
        parent_run_id=run.parent,
        depth=run.depth,
        usage=run.usage,
        cost_usd=run.cost,
        steps=steps,
        model_calls=calls,
        **fields,
    )


class TrajectoryRecorder:
    """Keeps the events of one root RLM run's tree while it runs (a listener on the run's sink).

    ``attach`` takes the events the sink already delivered for the run (its ``run.started`` came
    before the middleware saw the run) and listens from then on; the recorder detaches itself when
    the run completes, and ``detach`` (the middleware's ``on_error``, after the partial answer was
    emitted) ends it for a failed or stopped run.
    """

    def __init__(self, root_run_id: str, tree_root_id: str) -> None:
        self.root_run_id = root_run_id
        self.tree_root_id = tree_root_id  # the sink's root run (the RLM run may itself be a child)
        self.events: dict[int, AgentEvent] = {}
        self._detach: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def attach(self, sink: Any) -> None:
        self._detach = sink.add_listener(self)
        for offset, event in sink.recent():
            if str(event.root_run_id) == self.tree_root_id:
                with self._lock:
                    self.events.setdefault(offset, event)

    def __call__(self, offset: int, event: AgentEvent) -> None:
        if event.root_run_id != self.tree_root_id:  # ids are str: no conversion on this per-event path
            return
        with self._lock:
            self.events[offset] = event
        if event.kind == "run.completed" and event.run_id == self.root_run_id:
            self.detach()

    def detach(self) -> None:
        detach, self._detach = self._detach, None
        if detach is not None:
            detach()

    def trajectory(self, *, answer: str | None = None) -> Trajectory:
        with self._lock:
            pairs = sorted(self.events.items())
        return build_trajectory(pairs, self.root_run_id, answer=answer)
