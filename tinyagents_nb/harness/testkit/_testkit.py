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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio

from .._errors import ConfigurationError
from .._events import AgentEvent
from .._ids import CallId, RunId
from .._model import ToolSchema
from .._sink import EventSink
from ._testkit_models import EchoModel, FunctionModel, ScriptedModel, SlowModel, StreamingMock, _check_name
from ._trajectory import Trajectory

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
