"""The streaming transcript: model text split into segments, rendered as Markdown.

Deltas are appended to plain buffers by the listener; the flusher renders only the segments that
changed since the last flush (normally the one being streamed). A segment is one model call's text
(or its reasoning, shown dimmed in a collapsible block, or a short note such as a steering
command). A long answer is cut into further segments at paragraph breaks outside code fences, so
an update never resends more than a few kilobytes however long the answer grows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ._format import esc
from ._markdown import render_markdown
from ._rows import HtmlRows

__all__ = ["Segment", "SegmentKind", "TranscriptPane"]

SegmentKind = Literal["text", "thinking", "note"]

_SPLIT_CHARS: Final = 4_000
_FENCE_LINE: Final = re.compile(r"^\s{0,3}(```|~~~)", re.MULTILINE)
_CAPTION_STYLE: Final = "font-size:85%;opacity:.7;margin-bottom:2px"


@dataclass(slots=True, kw_only=True)
class Segment:
    """One transcript block; ``parts`` are the raw deltas (joined only when rendered)."""

    kind: SegmentKind
    caption: str = ""
    parts: list[str] = field(default_factory=list)
    size: int = 0
    active: bool = True
    checked_at: int = 0
    glue: str = "\n\n"
    """What separated this segment from the previous one when a long answer was cut."""
    source: tuple[str, str] = ("", "")
    """The (run id, model call id) whose deltas it holds."""
    discarded: bool = False
    """A failed stream attempt's text (``model.discarded``): shown struck through, never part of the answer."""

    @property
    def text(self) -> str:
        return "".join(self.parts)


class TranscriptPane:
    """Segments in a scrolling column, at most ``max_segments`` kept (older ones summarised).

    Args:
        max_segments: The memory bound for a long run.
    """

    def __init__(self, *, max_segments: int) -> None:
        self._rows = HtmlRows(noun="segment", layout={"max_height": "420px", "overflow": "auto"})
        self.widget: Any = self._rows.box
        self.segments: dict[int, Segment] = {}
        """Kept segments by key, oldest first (plain state: read it under the dashboard's lock)."""
        self.dropped = 0
        self._open: dict[tuple[str, str, str], int] = {}
        self._dirty: set[int] = set()
        self._next = 0
        self._max = max_segments

    # ------------------------------------------------------------------ listener side (plain state)
    def add_delta(self, run_id: str, call_id: str, kind: SegmentKind, text: str, caption: Callable[[str], str]) -> None:
        """Append a fragment of model call ``call_id``; ``caption(run_id)`` labels a new segment."""
        if not text:
            return
        slot = (run_id, call_id, kind)
        key = self._open.get(slot)
        if key is None:
            self.end_call(run_id, call_id)  # reasoning ends when the answer starts
            key = self._add(Segment(kind=kind, caption=caption(run_id), source=(run_id, call_id)))
            self._open[slot] = key
        segment = self.segments[key]
        segment.parts.append(text)
        segment.size += len(text)
        self._dirty.add(key)
        if segment.size - segment.checked_at >= _SPLIT_CHARS and "\n" in text:
            self._maybe_split(slot, key, segment)

    def end_call(self, run_id: str, call_id: str) -> None:
        """The model call finished (or failed): its segments stop being live."""
        for kind in ("thinking", "text"):
            key = self._open.pop((run_id, call_id, kind), None)
            if key is not None and key in self.segments:
                self.segments[key].active = False
                self._dirty.add(key)

    def discard_call(self, run_id: str, call_id: str) -> None:
        """A failed attempt of model call ``call_id`` is being retried: its text so far is not the answer."""
        self.end_call(run_id, call_id)
        for key, segment in self.segments.items():
            if segment.source == (run_id, call_id) and not segment.discarded:
                segment.discarded = True
                self._dirty.add(key)

    def add_note(self, text: str, caption: str = "") -> None:
        """A one-line event in the flow of the conversation (steering, retry, fallback)."""
        self._add(Segment(kind="note", caption=caption, parts=[text], size=len(text), active=False))

    def _add(self, segment: Segment) -> int:
        key = self._next
        self._next += 1
        self.segments[key] = segment
        self._dirty.add(key)
        while len(self.segments) > self._max:
            oldest = next(iter(self.segments))
            del self.segments[oldest]
            self._dirty.discard(oldest)
            self.dropped += 1
            for slot in [slot for slot, value in self._open.items() if value == oldest]:
                del self._open[slot]
        return key

    def _maybe_split(self, slot: tuple[str, str, str], key: int, segment: Segment) -> None:
        segment.checked_at = segment.size
        text = segment.text
        found = _cut_point(text)
        if found is None:
            return
        cut, glue = found
        head, tail = text[:cut], text[cut + len(glue) :]
        segment.parts, segment.size, segment.active = [head], len(head), False
        self._dirty.add(key)
        rest = Segment(
            kind=segment.kind, parts=[tail] if tail else [], size=len(tail), glue=glue, source=segment.source
        )
        self._open[slot] = self._add(rest)

    # ------------------------------------------------------------------ accessors
    def text(self) -> str:
        """The kept answer text (reasoning and notes excluded); a cut answer is joined back exactly."""
        parts: list[str] = []
        for segment in self.segments.values():
            if segment.kind == "text" and not segment.discarded:
                if parts:
                    parts.append(segment.glue)
                parts.append(segment.text)
        return "".join(parts)

    # ------------------------------------------------------------------ flusher side (widgets)
    def render(self) -> None:
        """Resend the segments that changed since the last flush (loop thread only)."""
        changed = {key: _segment_html(self.segments[key]) for key in sorted(self._dirty) if key in self.segments}
        self._dirty.clear()
        self._rows.sync(list(self.segments), changed, self.dropped)

    def close(self) -> None:
        self._rows.close()


def _cut_point(text: str) -> tuple[int, str] | None:
    """Where to cut a long segment: the last paragraph break, else (when very long) the last line break.

    Never inside a code fence: the text after the cut would render as prose.
    """
    fences = [match.start() for match in _FENCE_LINE.finditer(text)]
    end = fences[-1] if len(fences) % 2 else len(text)  # an open fence at the end stays whole
    for glue, floor in (("\n\n", _SPLIT_CHARS // 2), ("\n", _SPLIT_CHARS)):
        if glue == "\n" and len(text) < 2 * _SPLIT_CHARS:
            break
        cut = text.rfind(glue, floor, end)
        if cut >= 0 and sum(1 for start in fences if start < cut) % 2 == 0:
            return cut, glue
    return None


def _segment_html(segment: Segment) -> str:
    caption = f'<div style="{_CAPTION_STYLE}">▸ {esc(segment.caption)}</div>' if segment.caption else ""
    if segment.kind == "note":
        return f'<div style="opacity:.75;font-size:90%">{caption}{esc(segment.text)}</div>'
    if segment.discarded:
        return f'<div style="opacity:.5;text-decoration:line-through">{caption}{esc(segment.text)}</div>'
    body = render_markdown(segment.text)
    if segment.kind == "thinking":
        state = " open" if segment.active else ""
        return (
            f'<details{state} style="opacity:.65;font-size:92%">'
            f'<summary style="cursor:pointer">thinking{" · " + esc(segment.caption) if segment.caption else ""}'
            f"</summary>{body}</details>"
        )
    return f"{caption}<div>{body}</div>"
