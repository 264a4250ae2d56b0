"""``MapProgress``: the live counters of one map, read by dashboards while the executor writes them.

The executor updates plain fields on the event loop's thread; a view polls ``snapshot()`` at its
own pace (about 10 Hz) from any thread, so a map of 100,000 rows costs the front end a few hundred
updates, never one message per row.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = ["MapProgress", "MapSnapshot", "MapState"]

MapState: TypeAlias = Literal["starting", "running", "completed", "stopped", "budget", "failed"]
"""``stopped``: Stop was pressed; ``budget``: a budget would have been passed, so the rest waits."""

_KEEP_OUTPUTS = 5
_KEEP_ERRORS = 50


@dataclass(frozen=True, kw_only=True, slots=True)
class MapSnapshot:
    """A consistent copy of the counters at one moment (what a view renders)."""

    name: str
    executor: str
    state: MapState
    total: int
    skipped: int
    done: int
    failed: int
    pending: int
    in_flight: int
    tokens: int
    cost_usd: float
    cost_unknown: bool
    elapsed_s: float
    rows_per_s: float
    eta_s: float | None
    max_cost_usd: float | None
    max_total_tokens: int | None
    last_outputs: tuple[tuple[str, str], ...]
    errors: tuple[tuple[str, str], ...]
    message: str | None

    def line(self) -> str:
        """One line: the counts, speed and spend, e.g. for a static record or a log."""
        cost = "cost unknown" if self.cost_unknown else f"${self.cost_usd:,.6f}"
        if self.max_cost_usd is not None:
            cost += f" of ${self.max_cost_usd:,.6f}"
        parts = [
            f"{self.name}: {self.state}",
            f"{self.done:,} done",
            f"{self.failed:,} failed",
            f"{self.pending:,} pending",
        ]
        if self.skipped:
            parts.append(f"{self.skipped:,} skipped (already done)")
        parts += [f"{self.rows_per_s:,.0f} rows/s", f"{self.tokens:,} tokens", cost]
        return " · ".join(parts)


class MapProgress:
    """Counters of a running map; pass one to ``agent_map_async(progress=...)`` to watch it.

    Attributes:
        name: The map's label (its checkpoint key unless named).
        total: Rows in the input.
        skipped: Rows taken from the checkpoint instead of being run again.
    """

    def __init__(self, name: str = "agent_map") -> None:
        self.name = name
        self.executor = "local"
        self.state: MapState = "starting"
        self.total = 0
        self.skipped = 0
        self.done = 0
        self.failed = 0
        self.in_flight = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.cost_unknown = False
        self.max_cost_usd: float | None = None
        self.max_total_tokens: int | None = None
        self.message: str | None = None
        self.last_outputs: deque[tuple[object, object]] = deque(maxlen=_KEEP_OUTPUTS)  # shown at snapshot
        self.errors: deque[tuple[str, str]] = deque(maxlen=_KEEP_ERRORS)
        self._started = time.monotonic()
        self._ended: float | None = None
        self._ran = 0  # rows finished in this session (not skipped), for the speed

    def start(self, *, total: int, skipped: int) -> None:
        self.total, self.skipped = total, skipped
        self.done = self.failed = 0
        self._started = time.monotonic()
        self.state = "running"

    def row_ended(self, label: object, *, ok: bool, text: object, tokens: int, cost: float | None) -> None:
        """Count one finished row: ``text`` is a done row's output (any value) or a failed row's error.

        An output is kept as it is and written out only when a snapshot shows it (the last five),
        not once per row.
        """
        if ok:
            self.done += 1
            self.last_outputs.append((label, text))
        else:
            self.failed += 1
            self.errors.append((str(label), str(text)[:300]))
        self._ran += 1
        self.add_spend(tokens, cost)

    def add_spend(self, tokens: int, cost: float | None) -> None:
        self.tokens += tokens
        if cost is None:
            self.cost_unknown = self.cost_unknown or tokens > 0
        else:
            self.cost_usd += cost

    def restored(self, *, ok: bool) -> None:
        """Count a row taken from the checkpoint."""
        if ok:
            self.done += 1
        else:
            self.failed += 1

    def finish(self, state: MapState, message: str | None = None) -> None:
        self.state = state
        self.message = message
        self._ended = time.monotonic()

    @property
    def pending(self) -> int:
        return max(self.total - self.done - self.failed, 0)

    def snapshot(self) -> MapSnapshot:
        end = self._ended if self._ended is not None else time.monotonic()
        elapsed = max(end - self._started, 1e-9)
        speed = self._ran / elapsed
        pending = self.pending
        eta = pending / speed if speed > 0 and self.state == "running" else None
        return MapSnapshot(
            name=self.name,
            executor=self.executor,
            state=self.state,
            total=self.total,
            skipped=self.skipped,
            done=self.done,
            failed=self.failed,
            pending=pending,
            in_flight=self.in_flight,
            tokens=self.tokens,
            cost_usd=self.cost_usd,
            cost_unknown=self.cost_unknown,
            elapsed_s=elapsed,
            rows_per_s=speed,
            eta_s=eta,
            max_cost_usd=self.max_cost_usd,
            max_total_tokens=self.max_total_tokens,
            last_outputs=tuple((str(label), show(value)[:200]) for label, value in tuple(self.last_outputs)),
            errors=tuple(self.errors),
            message=self.message,
        )

    def summary(self) -> dict[str, Any]:
        """The counters as plain data (stored in the result's ``attrs``)."""
        snap = self.snapshot()
        return {
            "name": snap.name,
            "executor": snap.executor,
            "state": snap.state,
            "total": snap.total,
            "skipped": snap.skipped,
            "done": snap.done,
            "failed": snap.failed,
            "pending": snap.pending,
            "tokens": snap.tokens,
            "cost_usd": None if snap.cost_unknown else snap.cost_usd,
            "elapsed_s": snap.elapsed_s,
            "rows_per_s": snap.rows_per_s,
            "message": snap.message,
        }

    def __repr__(self) -> str:
        return f"MapProgress({self.snapshot().line()})"


def show(value: object) -> str:
    """A row's output as one line of text: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)
