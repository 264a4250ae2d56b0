"""Test doubles and trajectory asserts that make an agent run deterministic and checkable.

Drive the loop with a fake model (``ScriptedModel`` and friends, re-exported here from
``_testkit_models``) and ``FakeTool``s, pin time and ids with ``DeterministicClock`` and
``DeterministicIds``, capture the event stream with ``EventRecorder``, then check the run's *shape*
with ``Trajectory``: which tools ran, how often the model was called, in what order things happened,
and how the run ended. Failed asserts print the actual sequence of event kinds, so the failure
explains itself.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

import anyio

from .._errors import ConfigurationError
from .._events import AgentEvent
from .._ids import CallId, RunId
from .._model import ToolSchema
from .._sink import EventSink
from ._testkit_models import EchoModel, FunctionModel, ScriptedModel, SlowModel, StreamingMock, _check_name

if TYPE_CHECKING:
    from types import TracebackType

    from .._context import RunContext
    from .._tools import ToolResult

__all__ = [
    "DeterministicClock",
    "DeterministicIds",
    "EchoModel",
    "EventRecorder",
    "FakeTool",
    "FunctionModel",
    "ScriptedModel",
    "SlowModel",
    "StreamingMock",
    "Trajectory",
]

EventT = TypeVar("EventT", bound=AgentEvent)
FakeToolFn = Callable[[Mapping[str, Any]], Any]


# ------------------------------------------------------------------------------------------ tools
class FakeTool:
    """A tool with canned results that records how it was called; satisfies the ``Tool`` protocol.

    Args:
        name: The tool name the model calls.
        results: Either a sequence used in call order (a ``str`` becomes ``ToolResult.ok``, a
            ``ToolResult`` is returned as is, an exception instance is raised), or a callable that
            computes each result from the arguments (sync or async; a non-``str`` return value becomes
            ``ToolResult.ok(json text, data=value)``). When a sequence is used up, its **last item
            repeats** (so ``FakeTool("t", ["ok"])`` always answers ``ok``, and a trailing exception
            keeps failing); an empty sequence answers ``ToolResult.ok("ok")``.
        description: Model-visible description.
        parameters: JSON schema of the arguments (default: an object with no declared properties).
        delay_s: Seconds to wait (a real, cancellable ``anyio.sleep``) before answering.
        timeout_s: Per-call timeout the loop should enforce, if any.
    """

    def __init__(
        self,
        name: str,
        results: Sequence[str | ToolResult | BaseException] | FakeToolFn = (),
        *,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        delay_s: float = 0.0,
        timeout_s: float | None = None,
    ) -> None:
        _check_name(name, what="tool name")
        if isinstance(results, str):
            raise ConfigurationError(f"results must be a sequence, not one string (did you mean [{results!r}]?)")
        self._delay = _finite("delay_s", delay_s, minimum=0.0)
        self._timeout_s = None if timeout_s is None else _finite("timeout_s", timeout_s, minimum=0.0)
        if self._timeout_s == 0:
            raise ConfigurationError("timeout_s must be > 0 (or None for no timeout)")
        self._fn: FakeToolFn | None = None
        self._script: tuple[Any, ...] = ()
        if callable(results):
            self._fn = results
        else:
            self._script = tuple(results)
            for item in self._script:
                if not (isinstance(item, str | BaseException) or hasattr(item, "is_error")):
                    raise ConfigurationError(f"a FakeTool result must be a str, ToolResult or exception, got {item!r}")
        self._schema = ToolSchema(
            name=name,
            description=description,
            parameters=dict(parameters) if parameters is not None else {"type": "object", "properties": {}},
        )
        self.calls: list[Mapping[str, Any]] = []
        """The arguments of every call, in order (the mappings the loop passed)."""
        self.contexts: list[RunContext[Any]] = []
        """The ``RunContext`` of every call, in order (to check lineage and injected handles)."""

    @property
    def name(self) -> str:
        return self._schema.name

    @property
    def description(self) -> str:
        return self._schema.description

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    @property
    def timeout_s(self) -> float | None:
        return self._timeout_s

    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult:
        from .._tools import ToolResult

        index = len(self.calls)
        self.calls.append(arguments)
        self.contexts.append(ctx)
        if self._delay:
            await anyio.sleep(self._delay)
        if self._fn is not None:
            value = self._fn(arguments)
            if inspect.isawaitable(value):
                value = await value
        elif self._script:
            value = self._script[min(index, len(self._script) - 1)]
        else:
            value = "ok"
        if isinstance(value, BaseException):
            raise value
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, str):
            return ToolResult.ok(value)
        if value is None:
            return ToolResult.ok("")
        return ToolResult.ok(json.dumps(value, default=str), data=value)

    def __repr__(self) -> str:
        return f"FakeTool({self.name!r}, calls={len(self.calls)})"


# ------------------------------------------------------------------------------------------ clock and ids
class DeterministicClock:
    """A fake ``Clock``: every reading advances time by ``step``, and ``advance`` jumps ahead.

    ``time()`` returns ``start`` plus the elapsed fake time, ``monotonic()`` the elapsed fake time
    itself (starting at 0). Both read *then* advance the same counter, so the first ``time()`` is
    exactly ``start`` and durations measured with either are reproducible. Thread-safe.
    """

    __slots__ = ("_lock", "_offset", "_start", "_step", "_ticks")

    def __init__(self, start: float = 1_700_000_000.0, step: float = 0.001) -> None:
        self._start = _finite("start", start)
        self._step = _finite("step", step, minimum=0.0)
        self._ticks = 0
        self._offset = 0.0
        self._lock = threading.Lock()

    @property
    def elapsed(self) -> float:
        """The fake time passed so far, without advancing it."""
        return self._offset + self._ticks * self._step

    def _read(self) -> float:
        with self._lock:
            elapsed = self._offset + self._ticks * self._step
            self._ticks += 1
        return elapsed

    def time(self) -> float:
        return self._start + self._read()

    def monotonic(self) -> float:
        return self._read()

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (never backwards: monotonic time must not decrease)."""
        seconds = _finite("seconds", seconds, minimum=0.0)
        with self._lock:
            self._offset += seconds

    def __repr__(self) -> str:
        return f"DeterministicClock(start={self._start}, step={self._step}, elapsed={self.elapsed})"


def _finite(name: str, value: object, *, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value!r}")
    return float(value)


class DeterministicIds:
    """A fake ``IdSource`` counting from 1: ``run-1``, ``run-2``, …, ``call-1``, … (``<prefix>-run-1`` with a prefix)."""

    __slots__ = ("_calls", "_prefix", "_runs")

    def __init__(self, prefix: str = "") -> None:
        if not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
        self._prefix = f"{prefix}-" if prefix else ""
        RunId(f"{self._prefix}run-1")  # validate once (InvalidIdError is a ConfigurationError)
        self._runs = itertools.count(1)  # next() on a count is atomic under the GIL
        self._calls = itertools.count(1)

    def run_id(self) -> RunId:
        return RunId(f"{self._prefix}run-{next(self._runs)}")

    def call_id(self) -> CallId:
        return CallId(f"{self._prefix}call-{next(self._calls)}")

    def __repr__(self) -> str:
        return f"DeterministicIds(prefix={self._prefix[:-1]!r})"


# ------------------------------------------------------------------------------------------ recorder
class EventRecorder:
    """Collects every event emitted on one or more sinks, for asserts after (or during) a run.

    ``EventRecorder(sink)`` starts recording at once; ``EventRecorder().attach(sink)`` does the same
    and returns the recorder, so ``with EventRecorder().attach(ctx.events) as rec:`` detaches on exit.
    """

    def __init__(self, sink: EventSink | None = None) -> None:
        self.events: list[AgentEvent] = []
        """Recorded events in delivery (offset) order."""
        self._detachers: list[Callable[[], None]] = []
        if sink is not None:
            self.attach(sink)

    def _listen(self, offset: int, event: AgentEvent) -> None:
        self.events.append(event)

    def attach(self, sink: EventSink) -> Self:
        """Start recording ``sink``'s events (from now on); returns the recorder."""
        if not isinstance(sink, EventSink):
            raise ConfigurationError(f"EventRecorder attaches to an EventSink, got {type(sink).__name__}")
        self._detachers.append(sink.add_listener(self._listen))
        return self

    def detach(self) -> None:
        """Stop recording every attached sink; the events recorded so far stay."""
        detachers, self._detachers = self._detachers, []
        for detach in detachers:
            detach()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.detach()

    def kinds(self) -> list[str]:
        return [event.kind for event in self.events]

    def of_kind(self, kind: str) -> list[AgentEvent]:
        return [event for event in self.events if event.kind == kind]

    def of_type(self, event_type: type[EventT]) -> list[EventT]:
        """The events of one class, typed (e.g. ``rec.of_type(ToolCompleted)``)."""
        return [event for event in self.events if isinstance(event, event_type)]

    def for_run(self, run_id: str) -> list[AgentEvent]:
        """The events emitted by one run (not its children)."""
        return [event for event in self.events if event.run_id == run_id]

    def clear(self) -> None:
        self.events.clear()

    def trajectory(self) -> Trajectory:
        """A ``Trajectory`` over the events recorded so far."""
        return Trajectory.from_events(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        return f"EventRecorder(events={len(self.events)}, sinks={len(self._detachers)})"


# ------------------------------------------------------------------------------------------ trajectory
_SUBJECT_FIELDS: Final = ("tool_name", "name", "model", "limit", "action", "command")
_LABELLED_PREFIXES: Final = ("tool.", "subagent.")
_TERMINAL: Final = ("run.completed", "run.failed", "run.cancelled")
_MAX_SHOWN: Final = 80


def _subject(event: AgentEvent) -> str | None:
    """What an event is about, for ``kind:subject`` matchers: a tool, sub-agent, model, limit, ..."""
    for name in _SUBJECT_FIELDS:
        value = getattr(event, name, None)
        if isinstance(value, str):
            return value
    return None


def _label(event: AgentEvent) -> str:
    if event.kind.startswith(_LABELLED_PREFIXES):
        subject = _subject(event)
        if subject is not None:
            return f"{event.kind}:{subject}"
    return event.kind


class Trajectory:
    """The shape of a recorded run, with chainable asserts that explain their failures.

    Counts cover the whole recursion tree unless a ``run_id`` narrows them. The *root run* is the
    ``root_run_id`` of the first event. Every ``assert_*`` returns the trajectory, so checks chain:
    ``Trajectory.from_events(rec.events).assert_tool_called("lookup").assert_completed()``.
    """

    __slots__ = ("events",)

    def __init__(self, events: Iterable[AgentEvent]) -> None:
        self.events: tuple[AgentEvent, ...] = tuple(events)

    @classmethod
    def from_events(cls, events: Iterable[AgentEvent]) -> Trajectory:
        return cls(events)

    # ---------------------------------------------------------------------------- queries
    @property
    def root_run_id(self) -> str | None:
        return self.events[0].root_run_id if self.events else None

    def kinds(self) -> list[str]:
        return [event.kind for event in self.events]

    def runs(self) -> list[str]:
        """Run ids in order of first appearance."""
        return list(dict.fromkeys(event.run_id for event in self.events))

    def children_of(self, run_id: str) -> list[str]:
        """The runs whose parent is ``run_id``, in order of first appearance."""
        return list(dict.fromkeys(event.run_id for event in self.events if event.parent_run_id == run_id))

    def tool_calls(self, name: str | None = None) -> list[Any]:
        """The arguments of each ``tool.started`` (of tool ``name``, or of every tool)."""
        return [
            getattr(event, "arguments", None)
            for event in self.events
            if event.kind == "tool.started" and (name is None or getattr(event, "tool_name", None) == name)
        ]

    def model_call_count(self, *, run_id: str | None = None) -> int:
        """How many ``model.started`` events (in ``run_id``, or in the whole tree)."""
        return sum(1 for e in self.events if e.kind == "model.started" and (run_id is None or e.run_id == run_id))

    def describe(self) -> str:
        """The event sequence as one line of labels, repeats folded (``model.delta x12``)."""
        if not self.events:
            return "(no events)"
        parts: list[str] = []
        for label, group in itertools.groupby(_label(event) for event in self.events):
            count = sum(1 for _ in group)
            parts.append(label if count == 1 else f"{label} x{count}")
        if len(parts) > _MAX_SHOWN:
            parts = [*parts[: _MAX_SHOWN // 2], f"… {len(parts) - _MAX_SHOWN} more …", *parts[-_MAX_SHOWN // 2 :]]
        return " → ".join(parts)

    def _fail(self, message: str) -> AssertionError:
        return AssertionError(f"{message}\n  trajectory ({len(self.events)} events): {self.describe()}")

    # ---------------------------------------------------------------------------- asserts
    def assert_tool_called(
        self, name: str, *, times: int | None = None, with_args: Mapping[str, Any] | None = None
    ) -> Self:
        """The tool ran (``times`` exactly, if given); ``with_args`` keeps only calls whose arguments contain those items."""
        calls = self.tool_calls(name)
        matching = calls if with_args is None else [args for args in calls if _contains(args, with_args)]
        what = f"tool {name!r}" + ("" if with_args is None else f" with arguments containing {dict(with_args)!r}")
        if (times is None and not matching) or (times is not None and len(matching) != times):
            expected = "at least once" if times is None else f"{times} time(s)"
            seen = "; ".join(repr(args) for args in calls) or "none"
            raise self._fail(
                f"expected {what} to be called {expected}, but it was called {len(matching)} time(s)\n"
                f"  arguments of calls to {name!r}: {seen}"
            )
        return self

    def assert_tool_not_called(self, name: str) -> Self:
        calls = self.tool_calls(name)
        if calls:
            raise self._fail(f"expected tool {name!r} not to be called, but it was called {len(calls)} time(s)")
        return self

    def assert_model_called_times(self, n: int, *, run_id: str | None = None) -> Self:
        """Exactly ``n`` model calls (``model.started``; retries of one call count once)."""
        count = self.model_call_count(run_id=run_id)
        if count != n:
            where = "" if run_id is None else f" in run {run_id!r}"
            raise self._fail(f"expected the model to be called {n} time(s){where}, but it was called {count} time(s)")
        return self

    def assert_order(self, kinds_or_matchers: Sequence[str]) -> Self:
        """The matchers match events in this relative order (other events may come between).

        A matcher is an event kind (``"tool.completed"``) or a kind and a subject
        (``"tool.completed:lookup"``): the tool name for ``tool.*``, the sub-agent name for
        ``subagent.*``, the model for ``model.*``.
        """
        if isinstance(kinds_or_matchers, str):
            raise ConfigurationError("assert_order takes a sequence of matchers, not one string")
        matchers = [_parse_matcher(item) for item in kinds_or_matchers]
        position = 0
        for event in self.events:
            if position == len(matchers):
                break
            kind, subject = matchers[position]
            if event.kind == kind and (subject is None or _subject(event) == subject):
                position += 1
        if position < len(matchers):
            after = f" after {kinds_or_matchers[position - 1]!r}" if position else ""
            raise self._fail(
                f"expected events in order {list(kinds_or_matchers)!r}, but found no {kinds_or_matchers[position]!r}"
                f"{after} (matched {position} of {len(matchers)})"
            )
        return self

    def _terminal(self, run_id: str | None) -> tuple[str, list[AgentEvent]]:
        target = run_id if run_id is not None else self.root_run_id
        if target is None:
            raise self._fail("expected a finished run, but no events were recorded")
        return target, [e for e in self.events if e.run_id == target and e.kind in _TERMINAL]

    def assert_completed(self, *, run_id: str | None = None) -> Self:
        """The run (default: the root run) emitted ``run.completed`` and neither ``run.failed`` nor ``run.cancelled``."""
        target, ends = self._terminal(run_id)
        kinds = [e.kind for e in ends]
        if "run.completed" not in kinds or len(set(kinds)) > 1:
            raise self._fail(f"expected run {target!r} to complete, but it ended with: {_ending(ends)}")
        return self

    def assert_cancelled(self, *, run_id: str | None = None) -> Self:
        target, ends = self._terminal(run_id)
        if not any(e.kind == "run.cancelled" for e in ends):
            raise self._fail(f"expected run {target!r} to be cancelled, but it ended with: {_ending(ends)}")
        return self

    def assert_failed(self, error_type: str | type[BaseException] | None = None, *, run_id: str | None = None) -> Self:
        """The run failed; ``error_type`` (a class or its name) must equal the event's ``error_type``."""
        target, ends = self._terminal(run_id)
        failures = [e for e in ends if e.kind == "run.failed"]
        if not failures:
            raise self._fail(f"expected run {target!r} to fail, but it ended with: {_ending(ends)}")
        if error_type is not None:
            wanted = error_type if isinstance(error_type, str) else error_type.__name__
            actual = [getattr(e, "error_type", None) for e in failures]
            if wanted not in actual:
                raise self._fail(f"expected run {target!r} to fail with {wanted}, but it failed with: {_ending(ends)}")
        return self

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        return f"Trajectory({len(self.events)} events, runs={len(self.runs())})"


def _parse_matcher(item: object) -> tuple[str, str | None]:
    if not isinstance(item, str) or not item or item.startswith(":"):
        raise ConfigurationError(f"an order matcher is 'kind' or 'kind:subject', got {item!r}")
    kind, sep, subject = item.partition(":")
    return kind, (subject if sep else None)


def _contains(arguments: object, expected: Mapping[str, Any]) -> bool:
    if not isinstance(arguments, Mapping):
        return False
    return all(key in arguments and arguments[key] == value for key, value in expected.items())


def _ending(ends: Sequence[AgentEvent]) -> str:
    if not ends:
        return "no terminal event (run.completed / run.failed / run.cancelled)"
    parts = []
    for event in ends:
        error = getattr(event, "error", None)
        if event.kind == "run.failed":
            parts.append(f"run.failed ({getattr(event, 'error_type', '?')}: {error})")
        elif event.kind == "run.cancelled":
            reason = getattr(event, "reason", None)
            parts.append("run.cancelled" + (f" ({reason})" if reason else ""))
        else:
            parts.append(event.kind)
    return ", ".join(parts)
