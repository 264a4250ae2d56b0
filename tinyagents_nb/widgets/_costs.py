"""The cost table: tokens and USD per (agent, model), rendered from plain rows (a DataFrame on request).

Cost records are appended to the shared ``CostTracker`` for the whole session, so the table folds
in only records it has not seen (and only this run's tree) and re-renders at most every 250 ms.
USD is kept as ``Decimal`` (``None`` when any call in a group had no known price): an unknown price
is shown as "unknown", never as a partial sum or 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from tinyagents_nb.harness import CostTracker
from tinyagents_nb.harness.runtime import CostRecord

from ._format import esc, format_int, format_usd

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COST_COLUMNS", "CostTable"]

COST_COLUMNS: Final = ("agent", "model", "calls", "input", "cached", "cache_write", "output", "reasoning", "usd")
_INT_COLUMNS: Final = ("calls", "input", "cached", "cache_write", "output", "reasoning")
_REFRESH_S: Final = 0.25
_EMPTY: Final = '<div class="ta-dim">no billed model call yet</div>'
_NONE_BILLED: Final = '<div class="ta-dim">no model call reported usage, so nothing was billed</div>'
_NUMERIC: Final = frozenset({*_INT_COLUMNS, "usd"})


@dataclass(slots=True)
class _Group:
    calls: int = 0
    input: int = 0
    cached: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    known_usd: Decimal = Decimal(0)
    unpriced: int = 0

    def add(self, record: CostRecord) -> None:
        usage = record.usage
        self.calls += 1
        self.input += usage.input_tokens
        self.cached += usage.cached_input_tokens
        self.cache_write += usage.cache_write_tokens
        self.output += usage.output_tokens
        self.reasoning += usage.reasoning_tokens
        if record.cost is None:
            self.unpriced += 1
        else:
            self.known_usd += record.cost.total_usd

    def merge(self, other: _Group) -> None:
        for name in ("calls", "input", "cached", "cache_write", "output", "reasoning", "known_usd", "unpriced"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def usd(self) -> Decimal | None:
        return None if self.unpriced else self.known_usd


class CostTable:
    """An ``HTML`` widget holding ``dataframe().to_html()``, refreshed when usage changes."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.widget: Any = widgets.HTML(value=_EMPTY)
        self._groups: dict[tuple[str, str], _Group] = {}
        self._seen = 0
        self._last = float("-inf")

    def update(self, costs: CostTracker, belongs: Callable[[CostRecord], bool], label: Callable[[str], str]) -> bool:
        """Fold in records added since the last call; returns whether any belonged to this run."""
        if len(costs) == self._seen:
            return False
        records = costs.records
        fresh = records[self._seen :]
        self._seen = len(records)
        changed = False
        for record in fresh:
            if belongs(record):
                name = label(str(record.run_id))
                key = (f"{name} (depth {record.depth})" if record.depth > 1 else name, record.model)
                self._groups.setdefault(key, _Group()).add(record)
                changed = True
        return changed

    def rows(self) -> list[dict[str, Any]]:
        """One row per (agent, model) plus a ``total`` row when there are several; USD is ``Decimal | None``.

        Plain dicts: the table and a run's record need no pandas (a first import of it can take
        seconds, which a record written while the kernel shuts down does not have).
        """
        rows: list[dict[str, Any]] = [_row(agent, model, group) for (agent, model), group in self._groups.items()]
        if len(self._groups) > 1:
            total = _Group()
            for group in self._groups.values():
                total.merge(group)
            rows.append(_row("total", "", total))
        return rows

    def dataframe(self) -> pd.DataFrame:
        """``rows()`` as a DataFrame (integer token columns, USD as objects)."""
        import pandas as pd

        frame = pd.DataFrame(self.rows(), columns=list(COST_COLUMNS))
        return frame.astype(dict.fromkeys(_INT_COLUMNS, "int64")).astype({"usd": "object"})

    def render(
        self,
        costs: CostTracker,
        belongs: Callable[[CostRecord], bool],
        label: Callable[[str], str],
        *,
        now: float,
        force: bool,
        ended: bool = False,
    ) -> None:
        """Refresh at most every 250 ms (or now, with ``force``) when this run's usage changed."""
        if not force and now - self._last < _REFRESH_S:
            return
        if not self.update(costs, belongs, label) and not force:
            return
        self._last = now
        if not self._groups:
            if ended and self.widget.value == _EMPTY:
                self.widget.value = _NONE_BILLED
            return
        html = _table_html(self.rows())
        if html != self.widget.value:
            self.widget.value = html


def _table_html(records: list[dict[str, Any]]) -> str:
    """A padded table: text columns left-aligned, numbers right-aligned under right-aligned headers."""
    head = "".join(
        f'<th class="num">{"USD" if name == "usd" else name}</th>' if name in _NUMERIC else f"<th>{name}</th>"
        for name in COST_COLUMNS
    )
    rows = []
    for record in records:
        cells = []
        for name in COST_COLUMNS:
            value = record[name]
            if name == "usd":
                cells.append(f'<td class="num">{esc(format_usd(value))}</td>')
            elif name in _NUMERIC:
                cells.append(f'<td class="num">{format_int(int(value))}</td>')
            else:
                cells.append(f"<td>{esc(value)}</td>")
        total = ' class="ta-total"' if record["agent"] == "total" and not record["model"] else ""
        rows.append(f"<tr{total}>{''.join(cells)}</tr>")
    table = f'<table class="ta-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return f'<div class="ta-scroll-x">{table}</div>'  # a narrow notebook scrolls the table, not the page


def _row(agent: str, model: str, group: _Group) -> dict[str, Any]:
    return {
        "agent": agent,
        "model": model,
        "calls": group.calls,
        "input": group.input,
        "cached": group.cached,
        "cache_write": group.cache_write,
        "output": group.output,
        "reasoning": group.reasoning,
        "usd": group.usd,
    }
