"""Durable observability, part 3: sinks that compose over an ``EventSink``.

Each sink is an ``EventSink`` listener, a callable taking ``(offset, event)``; attach one with
``ctx.events.add_listener(sink)``. Compose redaction *outside* anything that persists or displays::

    ctx.events.add_listener(RedactingSink(FanOutSink(JournalSink(journal), JsonlSink(path)), secrets=[key]))

Persisting sinks are synchronous (a SQLite append costs tens of microseconds) and never raise into
the run: a failing backend is counted and logged at a limited rate instead of once per event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, Final

from .._errors import ConfigurationError
from .._events import AgentEvent, ModelDelta
from .._sink import EventListener
from ._credentials import _KEY_NAMES, DEFAULT_PATTERNS, _triggered
from ._journal import EventJournal
from ._jsonl import _JsonlFile, _read_json_lines
from ._observability import AgentObservation, _event_dict, event_from_dict
from ._redact_stream import DeltaHold, delta_channel, delta_text, forget_ended, merge_spans, with_text

__all__ = [
    "DEFAULT_SENSITIVE_KEYS",
    "FanOutSink",
    "JournalSink",
    "JsonlSink",
    "RedactingSink",
]

_log = logging.getLogger("tinyagents_nb")

DEFAULT_SENSITIVE_KEYS: Final[re.Pattern[str]] = re.compile(
    rf"(?i)^(?:.*[_-])?(?:{_KEY_NAMES}|token|secret|authorization|proxy-authorization|cookie|set-cookie)$"
)
"""Mapping keys (e.g. a tool argument named ``api_key``) whose whole value is replaced, whatever it looks like."""


class _FailureLog:
    """Counts backend failures; logs the first, then at most one summary per ``every_s``, and a recovery.

    A flapping backend therefore costs about two log lines per window, not two per event.
    """

    def __init__(self, owner: str, every_s: float = 60.0) -> None:
        self.owner, self.every_s = owner, every_s
        self.failed = 0
        self.last_error: str | None = None
        self._failing = False
        self._unlogged = 0
        self._next_log = 0.0

    def failure(self, exc: BaseException) -> None:
        self.failed += 1
        self._unlogged += 1
        self._failing = True
        self.last_error = f"{type(exc).__name__}: {exc}"
        now = time.monotonic()
        if now >= self._next_log:
            _log.error("%s failed %d time(s); latest: %s", self.owner, self._unlogged, self.last_error)
            self._unlogged = 0
            self._next_log = now + self.every_s

    def success(self) -> None:
        if self._failing:
            self._failing = False
            if not self._unlogged:  # otherwise the next summary tells the story
                _log.warning("%s recovered (%d failure(s) so far)", self.owner, self.failed)


# ------------------------------------------------------------------------------------------ fan-out
class FanOutSink:
    """Forwards each event to several listeners in order; one failing listener never starves the others."""

    def __init__(self, *listeners: EventListener) -> None:
        for listener in listeners:
            if not callable(listener):
                raise ConfigurationError(f"FanOutSink takes callables (offset, event), got {listener!r}")
        self._listeners: tuple[EventListener, ...] = listeners
        self.errors = 0
        """How many times an inner listener raised (each is logged)."""

    def add(self, listener: EventListener) -> None:
        if not callable(listener):
            raise ConfigurationError(f"FanOutSink takes callables (offset, event), got {listener!r}")
        self._listeners = (*self._listeners, listener)

    def __call__(self, offset: int, event: AgentEvent) -> None:
        for listener in self._listeners:
            try:
                listener(offset, event)
            except Exception:
                self.errors += 1
                _log.exception("fan-out listener %r failed on %s #%d", listener, event.kind, offset)

    def __repr__(self) -> str:
        return f"FanOutSink(listeners={len(self._listeners)}, errors={self.errors})"


# ------------------------------------------------------------------------------------------ redaction
class _Unredactable(ValueError):
    pass


_PLAIN_SEQUENCES: Final = (list, tuple, set, frozenset)
_PATTERN_WINDOW: Final = 64  # how far back a delta may still start a key-shaped match


class RedactingSink:
    """Scrubs secrets from every string of every event before handing it on; fails closed.

    Strings are scrubbed wherever they sit: event fields, tool-argument dicts (keys and values), lists,
    nested dataclasses such as deltas. A mapping value under a sensitive key (``api_key``, ``token``,
    ``authorization``, ...) is replaced whole. An unrecognised object is replaced by its scrubbed
    ``repr``. If an event cannot be rebuilt it is dropped and counted, never passed on unredacted.
    Configured secrets match in any case.

    Stream deltas are redacted on their joined text, so a secret split across two deltas is caught:
    a delta is held back while its text could still be the start of a secret (it is within the
    last ``len(longest secret) - 1`` characters, or 64 with patterns, or inside a pattern match that
    reaches the end of the text so far) and released, in order and with its own offset, once later
    deltas show it is safe, or at the next event of another kind, or at ``flush()``.

    Args:
        inner: The listener that receives redacted events.
        secrets: Literal values to scrub (e.g. the API keys in use); each at least 4 characters.
        patterns: Regexes for secret-shaped text; a ``secret`` group limits what is replaced.
        sensitive_keys: Mapping keys whose values are replaced whole; ``None`` disables it.
        replacement: What replaces a secret.
        hold_deltas: Redact stream deltas across delta boundaries (holding them back as above);
            ``False`` passes each delta on at once, scrubbed on its own.

    Raises:
        ConfigurationError: A secret is not a str or is shorter than 4 characters.
    """

    def __init__(
        self,
        inner: EventListener,
        *,
        secrets: Iterable[str] = (),
        patterns: Iterable[re.Pattern[str]] = DEFAULT_PATTERNS,
        sensitive_keys: re.Pattern[str] | None = DEFAULT_SENSITIVE_KEYS,
        replacement: str = "[REDACTED]",
        hold_deltas: bool = True,
    ) -> None:
        if not callable(inner):
            raise ConfigurationError(f"RedactingSink wraps a callable (offset, event), got {inner!r}")
        values: list[str] = []
        for secret in [secrets] if isinstance(secrets, str) else list(secrets):
            checked: object = secret
            if not isinstance(checked, str) or len(checked) < 4:
                shown = f"{len(checked)} characters" if isinstance(checked, str) else type(checked).__name__
                raise ConfigurationError(f"each secret must be a str of at least 4 characters, got {shown}")
            values.append(checked)
        ordered = sorted({value.lower() for value in values}, key=len, reverse=True)
        literal = "|".join(map(re.escape, ordered))
        self._secrets = re.compile(literal, re.IGNORECASE) if literal else None
        self._lowered = tuple(ordered)
        self._patterns = tuple(patterns)
        self._default_patterns = self._patterns == DEFAULT_PATTERNS
        self._fields: dict[type, tuple[tuple[str, bool], ...]] = {}
        self._keys = sensitive_keys
        self._replacement = replacement
        self._inner = inner
        window = max(len(ordered[0]) - 1 if ordered else 0, _PATTERN_WINDOW if self._patterns else 0)
        self._hold: DeltaHold[ModelDelta] | None = None
        if hold_deltas and window:
            self._hold = DeltaHold(self._spans, self._partial, window=window, replacement=replacement)
        self._lock = threading.Lock()
        self.dropped = 0
        """Events dropped because they could not be redacted."""

    def scrub_text(self, text: str) -> str:
        """``text`` with every configured secret and secret-shaped substring replaced."""
        out = text
        if self._secrets is not None:
            out = self._secrets.sub(self._replacement, out)
        if not self._default_patterns or _triggered(out):
            for pattern in self._patterns:
                out = pattern.sub(self._replace, out)
        return text if out == text else out

    def _replace(self, match: re.Match[str]) -> str:
        if "secret" not in match.re.groupindex or match.group("secret") is None:
            return self._replacement
        start, end = match.span()
        s_start, s_end = match.span("secret")
        whole = match.string
        return whole[start:s_start] + self._replacement + whole[s_end:end]

    def redact(self, event: AgentEvent) -> AgentEvent:
        """The event with every string scrubbed (the same object when nothing needed scrubbing).

        Raises:
            ValueError: The event cannot be rebuilt (the sink drops such events).
        """
        redacted = self._scrub(event, 0)
        if not isinstance(redacted, AgentEvent):
            raise _Unredactable(f"rebuilding {type(event).__name__} did not give an event")
        return redacted

    def _scrub(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.scrub_text(value)
        if value is None or isinstance(value, bool | int | float | Decimal):
            return value
        if depth > 64:
            raise _Unredactable("value nested too deeply to redact")
        cls = type(value)
        names = self._fields.get(cls)
        if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = self._fields[cls] = tuple((f.name, f.init) for f in dataclasses.fields(value))
        if names is not None:
            changes: dict[str, Any] = {}
            for name, init in names:
                old = getattr(value, name)
                new = self._scrub(old, depth + 1)
                if new is not old:
                    if not init:
                        raise _Unredactable(f"field {name!r} needs scrubbing but cannot be set")
                    changes[name] = new
            return dataclasses.replace(value, **changes) if changes else value
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            changed = not isinstance(value, dict)
            for key, item in value.items():
                new_key = self._scrub(key, depth + 1)
                if self._keys is not None and isinstance(key, str) and item is not None and self._keys.search(key):
                    new_item: Any = self._replacement
                else:
                    new_item = self._scrub(item, depth + 1)
                changed = changed or new_key is not key or new_item is not item
                out[new_key] = new_item
            return out if changed else value
        if isinstance(value, list | tuple | set | frozenset):
            items = [self._scrub(item, depth + 1) for item in value]
            if type(value) in _PLAIN_SEQUENCES and all(new is old for new, old in zip(items, value, strict=True)):
                return value
            if isinstance(value, list):
                return items
            return tuple(items) if isinstance(value, tuple) else frozenset(items)
        return self.scrub_text(repr(value))  # an object we cannot walk: keep only its (scrubbed) repr

    # ------------------------------------------------------------------------------- streams
    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``scrub_text`` would replace something in ``text``, as merged ranges."""
        found = [m.span() for m in self._secrets.finditer(text)] if self._secrets is not None else []
        if not self._default_patterns or _triggered(text):
            for pattern in self._patterns:
                grouped = "secret" in pattern.groupindex
                for m in pattern.finditer(text):
                    found.append(m.span("secret") if grouped and m.group("secret") is not None else m.span())
        return merge_spans(found)

    def _partial(self, text: str) -> int | None:
        """Where a trailing prefix (4+ characters) of a configured secret starts in ``text``, if one ends it."""
        best = 0
        lowered = text[-len(self._lowered[0]) :].lower() if self._lowered else ""
        for secret in self._lowered:
            for size in range(min(len(secret) - 1, len(lowered)), max(best, 3), -1):
                if lowered.endswith(secret[:size]):
                    best = size
                    break
        return len(text) - best if best else None

    def _rebuilt(self, event: ModelDelta, text: str) -> AgentEvent:
        if text == delta_text(event.delta):  # nothing to redact across deltas: scrub it as any event
            return self.redact(event)
        blank = dataclasses.replace(event, delta=with_text(event.delta, ""))
        base = self.redact(blank)  # every other field, scrubbed as usual
        assert isinstance(base, ModelDelta)
        return dataclasses.replace(base, delta=with_text(base.delta, text))

    def _release(self, released: list[tuple[int, ModelDelta, str]]) -> None:
        for offset, event, text in released:
            self._forward(offset, event, functools.partial(self._rebuilt, event, text))

    def _forward(self, offset: int, event: AgentEvent, build: Callable[[], AgentEvent]) -> None:
        try:
            redacted = build()
        except Exception as exc:
            self.dropped += 1
            # Never log the event's content: it is exactly what failed to be redacted.
            _log.warning("redaction failed on %s #%d (%s); event dropped", event.kind, offset, type(exc).__name__)
            return
        self._inner(offset, redacted)

    def __call__(self, offset: int, event: AgentEvent) -> None:
        with self._lock:
            hold = self._hold
            if hold is not None:
                if isinstance(event, ModelDelta):
                    self._release(hold.add(offset, event, *delta_channel(event)))
                    return
                self._release(hold.flush())
                forget_ended(hold, event)
            self._forward(offset, event, lambda: self.redact(event))

    def flush(self) -> None:
        """Pass on every held delta (redacted as the end of its stream), then flush ``inner`` if it can."""
        with self._lock:
            if self._hold is not None:
                self._release(self._hold.flush())
        flush = getattr(self._inner, "flush", None)
        if callable(flush):
            flush()

    def __repr__(self) -> str:
        held = 0 if self._hold is None else self._hold.held
        return (
            f"RedactingSink(secrets={len(self._lowered)}, patterns={len(self._patterns)}, "
            f"held={held}, dropped={self.dropped})"
        )


# ------------------------------------------------------------------------------------------ persistence
class JournalSink:
    """Writes each event through to an ``EventJournal`` as an ``AgentObservation``.

    Appends are synchronous (the backends are fast and a run should see its journal complete when it
    ends); an append that fails is counted in ``failed`` and logged at a limited rate, never raised.

    Args:
        journal: Where observations go.
        exclude_kinds: Kinds not to journal, e.g. ``{"model.delta"}``: token deltas are most of a
            stream's events and each costs a durable write, while ``model.completed`` and
            ``run.completed`` already record each call and the final text.

    Raises:
        ConfigurationError: ``journal`` is not an ``EventJournal``.
    """

    def __init__(self, journal: EventJournal, *, exclude_kinds: Iterable[str] = ()) -> None:
        if not isinstance(journal, EventJournal):
            raise ConfigurationError(f"JournalSink needs an EventJournal, got {type(journal).__name__}")
        self.journal = journal
        self.exclude_kinds = frozenset(exclude_kinds)
        self.written = 0
        self._failures = _FailureLog(f"JournalSink({journal!r})")

    @property
    def failed(self) -> int:
        return self._failures.failed

    @property
    def last_error(self) -> str | None:
        return self._failures.last_error

    def __call__(self, offset: int, event: AgentEvent) -> None:
        if event.kind in self.exclude_kinds:
            return
        try:
            self.journal.append(AgentObservation.from_event(offset, event))
        except Exception as exc:
            self._failures.failure(exc)
            return
        self.written += 1
        self._failures.success()

    def flush(self) -> None:
        """Make every event written so far durable."""
        self.journal.flush()

    def __repr__(self) -> str:
        return f"JournalSink({self.journal!r}, written={self.written}, failed={self.failed})"


class JsonlSink:
    """Appends each event as one JSON line: ``{"offset": n, **event_to_dict(event)}`` (for ``jq`` and friends).

    Args:
        path: The file; created with its parent directories, appended to if it exists.

    Raises:
        ConfigurationError: The file cannot be opened for appending.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file = _JsonlFile(path)
        self.written = 0
        self._failures = _FailureLog(f"JsonlSink({self._file.path!r})")
        self._closed = False

    @property
    def path(self) -> str:
        return self._file.path

    @property
    def failed(self) -> int:
        return self._failures.failed

    def __call__(self, offset: int, event: AgentEvent) -> None:
        try:
            if self._closed:
                raise OSError("sink is closed")
            self._file.append({"offset": offset, **_event_dict(event)})
        except Exception as exc:
            self._failures.failure(exc)
            return
        self.written += 1
        self._failures.success()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._file.close()

    @staticmethod
    def read(path: str | os.PathLike[str]) -> list[tuple[int, AgentEvent]]:
        """The ``(offset, event)`` pairs of a file written by ``JsonlSink``; torn lines are skipped."""
        lines, _ = _read_json_lines(os.fspath(path))
        out: list[tuple[int, AgentEvent]] = []
        for data in lines:
            if isinstance(data, dict) and isinstance(data.get("offset"), int):
                offset = data.pop("offset")
                with contextlib.suppress(ConfigurationError):  # not an event line: skip it like a torn one
                    out.append((offset, event_from_dict(data, lenient=True)))
        return out

    def __repr__(self) -> str:
        return f"JsonlSink({self.path!r}, written={self.written}, failed={self.failed})"
