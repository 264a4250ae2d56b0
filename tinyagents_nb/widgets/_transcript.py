"""The streaming transcript: model text split into segments, rendered as Markdown.

Deltas are appended to plain buffers by the listener; the flusher renders only the segments that
changed since the last flush (normally the one being streamed). A segment is one model call's text
(or its reasoning, shown in a collapsed block, or a short note such as a steering command). A long
answer is cut into further segments at paragraph breaks outside code fences, so an update never
resends more than a few kilobytes however long the answer grows.

Text goes to the frontend's Markdown renderer (``Markdown`` rows, made safe first); reasoning and
notes are HTML from the safe built-in renderer. The pane has no height of its own: it grows with
the page, so the live end of a streaming answer is where the notebook scrolls, not hidden at the
bottom of an inner box. Sub-agent text is indented under its agent's name; once the run completed,
the root run's last answer is framed as *the* answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ._format import esc
from ._markdown import render_markdown
from ._rows import HtmlRows, Markdown
from ._runlog import CodeStep
from ._safe_markdown import safe_markdown, strip_controls

__all__ = ["Segment", "SegmentKind", "TranscriptPane"]

SegmentKind = Literal["text", "thinking", "note", "step"]

_SPLIT_CHARS: Final = 4_000
_STEP_OUTPUT_CHARS: Final = 8_000  # the RLM already cut it to what the model saw (4,000 by default)
_FENCE_LINE: Final = re.compile(r"^\s{0,3}(```|~~~)", re.MULTILINE)
_WAITING_KEY: Final = -1
_WAITING_HTML: Final = '<div class="ta-note ta-dim">waiting for the model\'s first words…</div>'


@dataclass(slots=True, kw_only=True)
class Segment:
    """One transcript block; ``parts`` are the raw deltas (joined only when rendered)."""

    kind: SegmentKind
    caption: str = ""
    run_id: str = ""
    call_id: str = ""
    css: str = "ta-note"
    """The class of a note (``ta-note``, or ``ta-stopped`` for the end mark)."""
    answer: bool = False
    """Part of the run's final answer (framed once the run completed)."""
    parts: list[str] = field(default_factory=list)
    size: int = 0
    active: bool = True
    checked_at: int = 0
    glue: str = "\n\n"
    """What separated this segment from the previous one when a long answer was cut."""
    discarded: bool = False
    """A failed stream attempt's text (``model.discarded``): shown struck through, never part of the answer."""
    retracted: str | None = None
    """Why a guardrail withdrew this text (``model.retracted``): the text is no longer shown at all."""
    step: CodeStep | None = None
    """An RLM code step (kind ``step``): rendered from it, so its output shows once it arrives."""

    @property
    def text(self) -> str:
        return "".join(self.parts)


class TranscriptPane:
    """Segments in a scrolling column, at most ``max_segments`` kept (older ones summarised).

    Args:
        max_segments: The memory bound for a long run.
    """

    def __init__(self, *, max_segments: int) -> None:
        self._rows = HtmlRows(noun="segment", classes=("ta-transcript",))
        self.widget: Any = self._rows.box
        self.segments: dict[int, Segment] = {}
        """Kept segments by key, oldest first (plain state: read it under the dashboard's lock)."""
        self.dropped = 0
        self._open: dict[tuple[str, str, str], int] = {}
        self._dirty: set[int] = set()
        self._next = 0
        self._max = max_segments
        self._waiting = False
        self._cut: dict[tuple[str, str], str] = {}

    # ------------------------------------------------------------------ listener side (plain state)
    def add_delta(self, run_id: str, call_id: str, kind: SegmentKind, text: str, caption: Callable[[str], str]) -> None:
        """Append a fragment of model call ``call_id``; ``caption(run_id)`` labels a new segment."""
        if not text:
            return
        slot = (run_id, call_id, kind)
        key = self._open.get(slot)
        if key is None:
            self.end_call(run_id, call_id)  # reasoning ends when the answer starts
            key = self._add(Segment(kind=kind, caption=caption(run_id), run_id=run_id, call_id=call_id))
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
            if (segment.run_id, segment.call_id) == (run_id, call_id) and not segment.discarded:
                segment.discarded = True
                self._dirty.add(key)

    def retract_call(self, run_id: str, call_id: str, why: str) -> None:
        """A guardrail blocked model call ``call_id``'s answer: hide what streamed (it was blocked for its content)."""
        self.end_call(run_id, call_id)
        for key, segment in self.segments.items():
            if (segment.run_id, segment.call_id) == (run_id, call_id) and segment.kind in ("text", "thinking"):
                segment.discarded = True
                segment.retracted = why
                segment.answer = False
                segment.parts = []
                segment.size = 0
                self._dirty.add(key)

    def add_note(self, text: str, caption: str = "", *, css: str = "ta-note") -> None:
        """A one-line event in the flow of the conversation (steering, retry, fallback, the stop mark)."""
        self._add(Segment(kind="note", caption=caption, parts=[text], size=len(text), active=False, css=css))

    def add_step(self, step: CodeStep) -> int:
        """An RLM code step in the flow, after the reply that carried it; ``touch`` it when its output arrives."""
        return self._add(Segment(kind="step", caption=step.caption, run_id=step.run_id, step=step, active=False))

    def touch(self, key: int) -> None:
        """Segment ``key`` changed outside the pane (a step's output): render it again."""
        if key in self.segments:
            self._dirty.add(key)

    def mark_answer(self, root_run_id: str) -> None:
        """Frame the root run's last model call's text as the answer (call once the run completed)."""
        last = next(
            (
                s
                for s in reversed(self.segments.values())
                if s.kind == "text" and s.run_id == root_run_id and not s.discarded
            ),
            None,
        )
        if last is None:
            return
        for key, segment in self.segments.items():
            same_call = (segment.run_id, segment.call_id) == (last.run_id, last.call_id)
            if segment.kind == "text" and same_call and not segment.answer:
                segment.answer = True
                self._dirty.add(key)

    def fail_call(self, run_id: str, call_id: str) -> None:
        """Model call ``call_id`` failed mid-stream (a timeout, a dropped connection): keep what it streamed.

        No provider reported usage for that text, exactly as for a stopped call, so it counts as
        interrupted (``streamed_text``) rather than vanishing from the counts.
        """
        text = self.streamed_text().get((run_id, call_id))
        if text:
            self._cut[(run_id, call_id)] = text
        self.end_call(run_id, call_id)

    def streamed_text(self) -> dict[tuple[str, str], str]:
        """Text and reasoning of the calls still streaming (or cut by a failure), by (run id, call id)."""
        out: dict[tuple[str, str], str] = dict(self._cut)
        for (run_id, call_id, _kind), key in self._open.items():
            segment = self.segments.get(key)
            if segment is not None:
                out[(run_id, call_id)] = out.get((run_id, call_id), "") + segment.text
        return out

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
            kind=segment.kind,
            parts=[tail] if tail else [],
            size=len(tail),
            glue=glue,
            caption=segment.caption,
            run_id=segment.run_id,
            call_id=segment.call_id,
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
    def render(self, *, waiting: bool = False) -> None:
        """Resend the segments that changed since the last flush (loop thread only).

        ``waiting``: the run is live and nothing arrived yet, so a placeholder says so.
        """
        changed: dict[int, str | Markdown] = {}
        previous: Segment | None = None
        for key, segment in self.segments.items():  # a continued segment repeats no caption
            if key in self._dirty:
                changed[key] = _segment_row(segment, previous)
            previous = segment
        self._dirty.clear()
        keys = list(self.segments)
        waiting = waiting and not keys
        if waiting:
            keys = [_WAITING_KEY]
            if not self._waiting:
                changed[_WAITING_KEY] = _WAITING_HTML
        self._waiting = waiting
        self._rows.sync(keys, changed, self.dropped)

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


def _segment_row(segment: Segment, previous: Segment | None) -> str | Markdown:
    who = f"{esc(segment.caption)} · " if segment.caption else ""
    if segment.step is not None:
        step = segment.step
        return Markdown(
            step.markdown(output_chars=_STEP_OUTPUT_CHARS, timing=True),
            step.plain(output_chars=_STEP_OUTPUT_CHARS),
            ("ta-step-row",) + (("ta-sub",) if segment.caption else ()),
        )
    if segment.kind == "note":
        return f'<div class="{segment.css}">{who}{esc(segment.text)}</div>'
    if segment.retracted is not None:
        return f'<div class="ta-note">{who}answer withdrawn: {esc(segment.retracted)}</div>'
    if segment.discarded:
        return f'<div class="ta-dim" style="text-decoration:line-through">{who}{esc(segment.text)}</div>'
    if segment.kind == "thinking":
        live = " (streaming…)" if segment.active else ""
        return (
            f'<details class="ta-dim" style="font-size:92%"><summary style="cursor:pointer">'
            f"{who}reasoning · {len(segment.text):,} characters{live}</summary>{render_markdown(segment.text)}</details>"
        )
    source = safe_markdown(segment.text)
    continued = (
        previous is not None
        and previous.kind == "text"
        and (previous.run_id, previous.call_id) == (segment.run_id, segment.call_id)
    )
    if segment.caption and not continued:
        source = f'<div class="ta-caption">▸ {esc(segment.caption)}</div>\n\n{source}'
    classes = ("ta-text", "ta-sub") if segment.caption else ("ta-text", "ta-answer") if segment.answer else ("ta-text",)
    return Markdown(source, strip_controls(segment.text), classes)
