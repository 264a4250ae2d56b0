"""Trajectory: assert the shape of a (recursive) run from its events, with a readable diff on failure."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Self

from .._errors import ConfigurationError
from .._events import AgentEvent

__all__ = ["Trajectory"]


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
