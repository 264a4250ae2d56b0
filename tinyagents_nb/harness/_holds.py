"""What requests in flight have reserved on each budget, shared by every run that shares the ledgers.

A budget's scope is named by its anchor (the run whose subtree it binds, ``None`` for everything
the ledgers hold), so a reservation is added under the anchor of every budget binding the run
that makes it. Runs that share a ``UsageTracker`` (a run tree, a notebook session's runs) share
its ``Holds``: a session's cap then sees the reservations of all its concurrent runs, whichever
``TreeBudget`` object each run carries.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from decimal import Decimal

__all__ = ["Holds"]

_ZERO = Decimal(0)


class Holds:
    """Reserved tokens and dollars per budget anchor; ``lock`` makes check-then-reserve one step."""

    __slots__ = ("_tokens", "_usd", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._tokens: dict[str | None, int] = {}
        self._usd: dict[str | None, Decimal] = {}

    def tokens(self, anchor: str | None) -> int:
        """Tokens reserved under ``anchor`` by requests still in flight."""
        return self._tokens.get(anchor, 0)

    def usd(self, anchor: str | None) -> Decimal:
        """Dollars reserved under ``anchor`` by requests still in flight."""
        return self._usd.get(anchor, _ZERO)

    def add(self, anchors: Iterable[str | None], tokens: int, usd: Decimal) -> None:
        """Reserve (callers hold ``lock``, having checked the caps)."""
        for anchor in anchors:
            self._tokens[anchor] = self._tokens.get(anchor, 0) + tokens
            self._usd[anchor] = self._usd.get(anchor, _ZERO) + usd

    def remove(self, anchors: Iterable[str | None], tokens: int, usd: Decimal) -> None:
        """Give a reservation back."""
        with self.lock:
            for anchor in anchors:
                left = self._tokens.get(anchor, 0) - tokens
                spent = self._usd.get(anchor, _ZERO) - usd
                if left <= 0 and spent <= 0:
                    self._tokens.pop(anchor, None)
                    self._usd.pop(anchor, None)
                else:
                    self._tokens[anchor], self._usd[anchor] = max(left, 0), max(spent, _ZERO)

    def __repr__(self) -> str:
        return f"Holds(tokens={self._tokens!r}, usd={self._usd!r})"
