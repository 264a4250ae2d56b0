"""``MapView``: the live view of an ``agent_map`` over a DataFrame's rows.

It polls the map's ``MapProgress`` at a steady pace (5 Hz by default) from its own daemon thread and
sends one coalesced update per tick (``hold_sync``), so 100,000 rows cost a few hundred comm
messages, never one per row. The Stop button only *signals* (``on_stop``, which cancels a
thread-safe token): the rows in flight end as ``pending`` and the map returns what it has.
Row outputs and errors are untrusted model/provider text: every one is HTML-escaped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from tinyagents_nb.harness.batch import MapProgress, MapSnapshot

from ._format import esc, format_duration, format_int, format_usd, truncate

__all__ = ["MapView", "map_record"]


def _spend(snap: MapSnapshot) -> str:
    cost = "unknown" if snap.cost_unknown else format_usd(Decimal(str(round(snap.cost_usd, 6))))
    text = f"{format_int(snap.tokens)} tokens · {cost}"
    if snap.max_cost_usd is not None:
        text += f" of {format_usd(Decimal(str(snap.max_cost_usd)))} budget"
    if snap.max_total_tokens is not None:
        text += f" · token budget {format_int(snap.max_total_tokens)}"
    return text


def _stats_html(snap: MapSnapshot) -> str:
    eta = format_duration(snap.eta_s, precise=False) if snap.eta_s is not None else "-"
    parts = [
        f"<b>{esc(snap.name)}</b> · {esc(snap.state)} · {esc(snap.executor)}",
        f"{format_int(snap.done)} done · {format_int(snap.failed)} failed · {format_int(snap.pending)} pending"
        + (f" ({format_int(snap.skipped)} from the checkpoint)" if snap.skipped else ""),
        f"{snap.rows_per_s:,.0f} rows/s · ETA {eta} · {format_int(snap.in_flight)} in flight",
        esc(_spend(snap)),
    ]
    if snap.message:
        parts.append(f"<i>{esc(truncate(snap.message, 300))}</i>")
    return "<br>".join(parts)


def _table_html(title: str, rows: tuple[tuple[str, str], ...], limit: int) -> str:
    if not rows:
        return ""
    body = "".join(
        f"<tr><td>{esc(truncate(k, 40))}</td><td>{esc(truncate(v, 200))}</td></tr>" for k, v in rows[-limit:]
    )
    return f"<details open><summary>{esc(title)}</summary><table><tr><th>row</th><th>{esc(title)}</th></tr>{body}</table></details>"


class MapView:
    """A progress bar, counters, spend against budget, the last outputs, an errors table and Stop.

    Args:
        progress: The map's counters (written by the executor, read here).
        on_stop: Called (from a widget thread) when Stop is pressed; must be thread-safe.
        refresh_hz: Updates per second while the map runs.
    """

    def __init__(self, progress: MapProgress, *, on_stop: Callable[[], None], refresh_hz: float = 5.0) -> None:
        import ipywidgets as widgets

        self.progress = progress
        self._on_stop = on_stop
        self._period = 1.0 / refresh_hz
        self._ended = threading.Event()
        self.bar = widgets.IntProgress(value=0, min=0, max=1, description="rows", bar_style="info")
        self.stats = widgets.HTML()
        self.outputs = widgets.HTML()
        self.errors = widgets.HTML()
        self.stop = widgets.Button(description="Stop", button_style="danger", icon="stop")
        self.stop.on_click(lambda _button: self.press_stop())
        self.widget = widgets.VBox(
            [widgets.HBox([self.bar, self.stop]), self.stats, self.outputs, self.errors],
            layout=widgets.Layout(border="1px solid var(--jp-border-color2, #ddd)", padding="4px"),
        )
        self.stopping = False
        self._thread: threading.Thread | None = None
        self.refresh()

    def press_stop(self) -> None:
        """Signal Stop (idempotent); the next refresh shows it."""
        if not self.stopping:
            self.stopping = True
            self._on_stop()

    def start(self) -> None:
        """Refresh from a daemon thread until ``finish``."""
        self._thread = threading.Thread(target=self._run, name="tinyagents-map-view", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._ended.wait(self._period):
            self.refresh()

    def refresh(self) -> None:
        snap = self.progress.snapshot()
        with self.widget.hold_sync():
            self.bar.max = max(snap.total, 1)
            self.bar.value = snap.done + snap.failed
            self.bar.bar_style = "danger" if snap.failed and snap.state != "running" else "info"
            if snap.state in ("completed",):
                self.bar.bar_style = "success"
            self.stats.value = _stats_html(snap)
            self.outputs.value = _table_html("last outputs", snap.last_outputs, 5)
            self.errors.value = _table_html("errors", snap.errors, 10)
            running = snap.state in ("starting", "running")
            self.stop.disabled = not running or self.stopping
            if self.stopping and running:
                self.stop.description = "Stopping…"

    def finish(self) -> None:
        """Stop refreshing and show the final state (the Stop button greys out)."""
        self._ended.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.refresh()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def map_record(snap: MapSnapshot, *, into: str) -> dict[str, str]:
    """The static record a map leaves in its cell: plain text and escaped HTML (it survives a reopen)."""
    lines = [snap.line(), f"result: {into} ({snap.total:,} rows; status column done/failed/pending)"]
    if snap.message:
        lines.append(f"note: {snap.message}")
    if snap.errors:
        lines.append(f"errors (last {min(len(snap.errors), 10)}):")
        lines += [f"  {truncate(k, 40)}: {truncate(v, 200)}" for k, v in snap.errors[-10:]]
    html = "<pre>" + esc("\n".join(lines)) + "</pre>"
    return {"text/plain": "\n".join(lines), "text/html": html}
