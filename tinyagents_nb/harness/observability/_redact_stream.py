"""Redaction across a stream's deltas, so a secret split over two deltas is still caught.

Scrubbing each event on its own lets a key streamed as ``"tk_Echo"`` + ``"Secret9f8e..."`` through
in two harmless-looking halves. ``DeltaHold`` joins the recent text of each delta channel (one
model call's text, its reasoning, each tool call's arguments) and holds a delta back while its
text could still belong to a secret: while it lies within the last ``window`` characters (the
longest configured secret minus one, or the pattern window), or inside a pattern match that
reaches the end of what has arrived. Held deltas are released in their original order, each with
its own offset, once later text makes them safe, and all at once by ``flush`` (the next event of
another kind, the end of the stream). A released delta carries its own part of the redacted joined
text: a secret's replacement sits in the delta where the secret began, and the other deltas it
spans lose its characters.

At a flush the text is complete as far as anyone knows, yet a stream cut off by another event may
go on later: a trailing prefix of a configured secret is redacted then too, and the channel keeps
its last ``window`` characters as context, so a continuation that completes a secret is caught.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from .._events import AgentEvent, ModelDelta
from .._messages import MessageDelta, ToolCallDelta

__all__ = ["DeltaHold", "Spans", "delta_channel", "delta_text", "forget_ended", "merge_spans", "with_text"]

Spans = Callable[[str], list[tuple[int, int]]]
"""Sorted, disjoint ``(start, end)`` ranges of ``text`` to redact."""

_E = TypeVar("_E")
_MAX_CHANNELS: Final = 1024


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, with empty ones dropped and overlapping ones joined (touching ones stay apart)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class _Channel:
    __slots__ = ("base", "context", "redacted_to", "text")

    def __init__(self) -> None:
        self.base = 0  # stream position of text[0]
        self.context = ""  # the released text just before ``text`` (for matches that start in it)
        self.text = ""  # held text
        self.redacted_to = 0  # end of the last range whose replacement was released


@dataclass(slots=True)
class _Pending(Generic[_E]):
    offset: int
    event: _E
    key: Hashable
    start: int  # stream positions in its channel
    end: int


class _View:
    """One channel's held text with its redaction ranges (stream positions), computed once per release."""

    __slots__ = ("channel", "cut", "released", "spans")

    def __init__(self, channel: _Channel, spans: list[tuple[int, int]], *, window: int, final: bool) -> None:
        origin = channel.base - len(channel.context)
        end_of_text = channel.base + len(channel.text)
        held = [(origin + s, origin + e) for s, e in spans if origin + e > channel.base]
        cut = end_of_text if final else max(end_of_text - window, channel.base)
        if not final:
            for start, end in held:
                if max(start, channel.base) < cut and (end > cut or end >= end_of_text):  # straddles or may grow
                    cut = max(start, channel.base)
        self.channel = channel
        self.spans = held
        self.cut = cut
        self.released = channel.base

    def render(self, start: int, end: int, replacement: str) -> str:
        """The redacted text of stream range ``[start, end)``; call in stream order.

        A range's replacement goes where it is first seen; a range that began in released text
        gets one only if nothing replaced it there.
        """
        channel = self.channel
        text, base = channel.text, channel.base
        out: list[str] = []
        pos = start
        for s, e in self.spans:
            if e <= start or s >= end:
                continue
            if s > pos:
                out.append(text[pos - base : s - base])
            if s >= channel.redacted_to:
                out.append(replacement)
                channel.redacted_to = e
            pos = max(pos, min(e, end))
        out.append(text[pos - base : end - base])
        return "".join(out)


class DeltaHold(Generic[_E]):
    """Holds stream deltas until their text can be redacted whole.

    Args:
        spans: Finds what to redact in a text.
        partial: Where a trailing prefix of a configured secret starts in a text, if one ends it.
        window: How many trailing characters of a channel may still be the start of a secret.
        replacement: What replaces a redacted range.
    """

    __slots__ = ("_channels", "_partial", "_queue", "_replacement", "_spans", "_window")

    def __init__(self, spans: Spans, partial: Callable[[str], int | None], *, window: int, replacement: str) -> None:
        self._spans = spans
        self._partial = partial
        self._window = window
        self._replacement = replacement
        self._channels: dict[Hashable, _Channel] = {}
        self._queue: deque[_Pending[_E]] = deque()

    @property
    def held(self) -> int:
        """Deltas waiting to be released."""
        return len(self._queue)

    def add(self, offset: int, event: _E, key: Hashable, piece: str) -> list[tuple[int, _E, str]]:
        """Take a delta with text ``piece`` on channel ``key``; returns the deltas now safe, with their redacted text."""
        channel = self._channels.get(key)
        if channel is None:
            if len(self._channels) >= _MAX_CHANNELS:
                self._forget_idle()
            channel = self._channels[key] = _Channel()
        start = channel.base + len(channel.text)
        channel.text += piece
        self._queue.append(_Pending(offset, event, key, start, start + len(piece)))
        return self._release(final=False)

    def flush(self) -> list[tuple[int, _E, str]]:
        """Release every held delta (the stream ended, or an event of another kind comes next)."""
        return self._release(final=True) if self._queue else []

    def forget(self, match: Callable[[Hashable], bool]) -> None:
        """Drop the context of channels whose key matches (their stream is over); call after ``flush``."""
        for key in [key for key in self._channels if match(key)]:
            if not any(p.key == key for p in self._queue):
                del self._channels[key]

    def _release(self, *, final: bool) -> list[tuple[int, _E, str]]:
        views: dict[Hashable, _View] = {}
        out: list[tuple[int, _E, str]] = []
        while self._queue:
            pending = self._queue[0]
            view = views.get(pending.key)
            if view is None:
                view = views[pending.key] = self._view(self._channels[pending.key], final=final)
            if pending.end > view.cut:
                break
            self._queue.popleft()
            out.append((pending.offset, pending.event, view.render(pending.start, pending.end, self._replacement)))
            view.released = pending.end
        for key, view in views.items():
            channel = self._channels[key]
            done = view.released - channel.base
            if done > 0:
                channel.context = (channel.context + channel.text[:done])[-self._window :] if self._window else ""
                channel.text = channel.text[done:]
                channel.base = view.released
        return out

    def _view(self, channel: _Channel, *, final: bool) -> _View:
        joined = channel.context + channel.text
        spans = self._spans(joined)
        if final:
            tail = self._partial(joined)
            if tail is not None:
                spans = merge_spans([*spans, (tail, len(joined))])
        return _View(channel, spans, window=self._window, final=final)

    def _forget_idle(self) -> None:
        busy = {p.key for p in self._queue}
        for key in [key for key in self._channels if key not in busy][: _MAX_CHANNELS // 2]:
            del self._channels[key]


# ------------------------------------------------------------------------------------------ model deltas
def delta_text(delta: MessageDelta) -> str:
    return delta.arguments if isinstance(delta, ToolCallDelta) else delta.text


def with_text(delta: MessageDelta, text: str) -> MessageDelta:
    if isinstance(delta, ToolCallDelta):
        return dataclasses.replace(delta, arguments=text)
    return dataclasses.replace(delta, text=text)


def delta_channel(event: ModelDelta) -> tuple[Hashable, str]:
    """The channel a delta's text continues (one per call and kind; one per tool call) and that text."""
    delta = event.delta
    if isinstance(delta, ToolCallDelta):
        return (event.run_id, event.call_id, "tool", delta.index), delta.arguments
    return (event.run_id, event.call_id, delta.type), delta.text


def forget_ended(hold: DeltaHold[ModelDelta], event: AgentEvent) -> None:
    """Drop the context of channels whose call or run just ended."""
    if event.kind in ("model.completed", "model.failed"):
        call = getattr(event, "call_id", None)
        hold.forget(lambda key: isinstance(key, tuple) and key[:2] == (event.run_id, call))
    elif event.kind in ("run.completed", "run.failed", "run.cancelled"):
        hold.forget(lambda key: isinstance(key, tuple) and key[0] == event.run_id)
