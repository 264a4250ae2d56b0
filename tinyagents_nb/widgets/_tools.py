"""The tool-call list: one collapsible row per call with its arguments, result, duration and errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from ._format import esc, format_duration, json_preview, truncate
from ._rows import HtmlRows

__all__ = ["REPLAYED", "ToolCallRow", "ToolCallsPane"]

ToolStatus = Literal["running", "ok", "error"]

_ARGS_CHARS: Final = 300
_OUTPUT_CHARS: Final = 600
_CODE_CHARS: Final = 2_000
_TICKED: Final = re.compile(r"`([^`]+)`")
_PRE: Final = (
    "margin:2px 0 6px;padding:4px 6px;background:rgba(127,127,127,.1);white-space:pre-wrap;word-break:break-word"
)
_MARK: Final = {"running": ("⋯", "ta-tone-run"), "ok": ("✓", "ta-tone-ok"), "error": ("✗", "ta-tone-err")}


@dataclass(slots=True, kw_only=True)
class ToolCallRow:
    """One tool call as the pane knows it (``output`` holds the error text for a failed call)."""

    name: str
    arguments: str
    caption: str = ""
    summary: str = ""
    """What the call did, in words, when the tool says (a ``tool.delta`` marked as its summary)."""
    code: str = ""
    """The ``code`` argument of a code-running call, shown as code rather than JSON."""
    status: ToolStatus = "running"
    output: str = ""
    error_type: str = ""
    duration_s: float | None = None
    replayed: bool = False
    """Answered before the run was interrupted: a resumed run shows it from its journal (not run again)."""


REPLAYED: Final = "from before the restart"
"""How a replayed call is marked, in the pane and in the record."""


class ToolCallsPane:
    """Rows in call order; at most ``max_rows`` kept.

    Args:
        max_rows: The memory bound for a long run.
    """

    def __init__(self, *, max_rows: int) -> None:
        self._rows = HtmlRows(noun="tool call", layout={"max_height": "360px", "overflow": "auto"})
        self.widget: Any = self._rows.box
        self.rows: dict[int, ToolCallRow] = {}
        """Kept rows by key, oldest first (plain state: read it under the dashboard's lock)."""
        self.dropped = 0
        self.count = 0
        """Every call seen, dropped ones included."""
        self._next = 0  # the next row's key (``count`` goes down when a row is dropped)
        self._by_call: dict[tuple[str, str], int] = {}
        self._dirty: set[int] = set()
        self._max = max_rows

    # ------------------------------------------------------------------ listener side (plain state)
    def started(self, run_id: str, call_id: str, name: str, arguments: Any, caption: str) -> int:
        """A call started: its row (running); returns the row's key."""
        key = self._next
        self._next += 1
        self.count += 1
        code = arguments.get("code") if isinstance(arguments, dict) else None
        self.rows[key] = ToolCallRow(
            name=name,
            arguments=json_preview(arguments, _ARGS_CHARS),
            caption=caption,
            code=truncate(code, _CODE_CHARS) if isinstance(code, str) else "",
        )
        self._by_call[(run_id, call_id)] = key
        self._dirty.add(key)
        while len(self.rows) > self._max:
            oldest = next(iter(self.rows))
            del self.rows[oldest]
            self._dirty.discard(oldest)
            self.dropped += 1
        if len(self._by_call) > 2 * self._max:  # forget finished calls whose rows are gone
            self._by_call = {slot: k for slot, k in self._by_call.items() if k in self.rows}
        return key

    def replayed(
        self, run_id: str, call_id: str, name: str, arguments: Any, caption: str, *, output: str, is_error: bool
    ) -> int:
        """A call answered before the interruption (``tool.replayed``): a finished row, marked; returns its key."""
        self.started(run_id, call_id, name, arguments, caption)
        key = self._by_call.pop((run_id, call_id))
        row = self.rows.get(key)
        if row is not None:
            row.status, row.output, row.replayed = ("error" if is_error else "ok"), output, True
        return key

    def drop(self, key: int) -> None:
        """Take a row out (a replayed RLM code step, which the run's steps count instead)."""
        if self.rows.pop(key, None) is not None:
            self.count -= 1
            self._dirty.discard(key)

    def summarised(self, run_id: str, call_id: str, text: str) -> None:
        """The tool said what the call did: the row's headline becomes that sentence."""
        key = self._by_call.get((run_id, call_id))
        row = self.rows.get(key) if key is not None else None
        if row is not None and key is not None:
            row.summary = text
            self._dirty.add(key)

    def finished(
        self,
        run_id: str,
        call_id: str,
        *,
        output: str,
        is_error: bool,
        duration_s: float,
        error_type: str = "",
    ) -> None:
        key = self._by_call.pop((run_id, call_id), None)
        row = self.rows.get(key) if key is not None else None
        if row is None or key is None:
            return
        row.status = "error" if is_error else "ok"
        row.output = output
        row.error_type = error_type
        row.duration_s = duration_s
        self._dirty.add(key)

    # ------------------------------------------------------------------ flusher side (widgets)
    def render(self) -> None:
        changed = {key: _row_html(self.rows[key]) for key in sorted(self._dirty) if key in self.rows}
        self._dirty.clear()
        self._rows.sync(list(self.rows), changed, self.dropped)

    def close(self) -> None:
        self._rows.close()


def _row_html(row: ToolCallRow) -> str:
    mark, tone = _MARK[row.status]
    facts = [f"by {esc(row.caption)}"] if row.caption else []
    if row.status == "running":
        facts.append("running")
    elif row.replayed:
        facts.append(REPLAYED)
    elif row.duration_s is not None:
        facts.append(format_duration(row.duration_s))
    if row.status == "error":
        facts.append(f'<span class="{tone}">{esc(row.error_type or "error")}</span>')
    if row.summary:  # the tool's own words: `name` spans become code, everything else is escaped
        headline = _TICKED.sub(r"<code>\1</code>", esc(row.summary))
        facts.insert(0, esc(row.name))
    else:
        headline = f"<code>{esc(row.name)}</code>"
    summary = (
        f'<summary style="cursor:pointer"><span class="{tone}" style="font-weight:600">{mark}</span> '
        f"{headline} "
        f'<span style="opacity:.7">{" · ".join(facts)}</span></summary>'
    )
    if row.code:
        body = f'<pre class="ta-code" style="{_PRE}"><code class="language-python">{esc(row.code)}</code></pre>'
    else:
        body = f'<div style="opacity:.75">arguments</div><pre style="{_PRE}">{esc(row.arguments)}</pre>'
    if row.status != "running":
        cls = f' class="{tone}"' if row.status == "error" else ""
        label = "error" if row.status == "error" else "result"
        output = esc(truncate(row.output, _OUTPUT_CHARS))
        body += f'<div style="opacity:.75">{label}</div><pre{cls} style="{_PRE}">{output}</pre>'
    return f'<details style="font-size:92%">{summary}{body}</details>'
