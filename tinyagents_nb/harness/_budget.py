"""Tree-wide spending limits, checked before each request so a request that would break one is never sent.

``RunLimits.max_cost_usd``, ``max_total_tokens`` and ``max_input_tokens_per_request`` bind the run
that sets them *and everything beneath it*: the run anchors a ``TreeBudget`` on ``ctx.budgets``,
children inherit the tuple through ``RunContext.child``, and each check sums the usage and cost
ledgers over the anchor's subtree. A child's own, stricter limits add a budget anchored at the
child; every budget in the tuple must hold. A budget anchored at ``None`` binds everything the
ledgers record: a notebook session puts one on each run's context to cap all its runs together.

The check compares the spend so far plus the next request's estimate: its prompt tokens (the
estimate the loop already makes against the context window) and, when the request caps its output,
that cap at the model's output price. A response may still take the spend past a cap by its own
output; the request after it is then refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from ._cost import CostTotals, CostTracker
from ._errors import LimitExceeded
from ._limits import UnknownPrice
from ._messages import Message
from ._usage import Usage, UsageTracker

__all__ = ["BudgetExceeded", "Ledgers", "TreeBudget"]


class Ledgers(Protocol):
    """Where spend is recorded: a ``RunContext`` (the tree's shared trackers) is one."""

    @property
    def usage(self) -> UsageTracker: ...

    @property
    def costs(self) -> CostTracker: ...


class BudgetExceeded(LimitExceeded):
    """A tree-wide budget would be broken by the next request, which was therefore not sent.

    Attributes:
        limit: ``"cost_usd"``, ``"total_tokens"`` or ``"input_tokens_per_request"``.
        maximum: The cap.
        anchor_run_id: The run that set the budget (the root of the subtree it binds); ``None`` for a
            budget over the whole ledger (a session's).
        usage: What the subtree had used when the request was refused.
        cost: What it had cost.
        messages: The refusing run's transcript so far.
    """

    def __init__(
        self,
        limit: str,
        message: str,
        *,
        maximum: float | None,
        anchor_run_id: str | None,
        usage: Usage,
        cost: CostTotals,
        messages: Sequence[Message],
    ) -> None:
        super().__init__(limit, message, maximum=maximum)
        self.anchor_run_id = anchor_run_id
        self.usage = usage
        self.cost = cost
        self.messages = messages


@dataclass(frozen=True, kw_only=True, slots=True)
class TreeBudget:
    """One set of spending limits and the run whose subtree they bind (``None``: all the ledgers hold)."""

    anchor_run_id: str | None
    max_cost_usd: Decimal | None = None
    max_total_tokens: int | None = None
    max_input_tokens_per_request: int | None = None
    unknown_price: UnknownPrice = "refuse"
    _warned: set[str] = field(default_factory=set, compare=False, repr=False)

    def usage_in(self, ledgers: Ledgers) -> Usage:
        """What the runs this budget binds have used so far (the anchor's subtree, or the whole ledger)."""
        anchor = self.anchor_run_id
        return ledgers.usage.total() if anchor is None else ledgers.usage.for_subtree(anchor)

    def cost_in(self, ledgers: Ledgers) -> CostTotals:
        """What they have cost so far."""
        anchor = self.anchor_run_id
        return ledgers.costs.total() if anchor is None else ledgers.costs.for_subtree(anchor)
