"""Tree-wide spending limits that hold: a request is sent only once its estimated cost is reserved.

``RunLimits.max_cost_usd``, ``max_total_tokens`` and ``max_input_tokens_per_request`` bind the run
that sets them *and everything beneath it*: the run anchors a ``TreeBudget`` on ``ctx.budgets``,
children inherit the tuple through ``RunContext.child``, and each check sums the usage and cost
recorded over the anchor's subtree. A child's own, stricter limits add a budget anchored at the
child; every budget in the tuple must hold. A budget anchored at ``None`` binds everything the
shared trackers record: a notebook session puts one on each run's context to cap all its runs.

Before a request is sent its estimate (the prompt's estimated tokens plus the request's output
cap, priced by the model that will serve it) is *reserved* on every budget binding the run
(``budget.reserved``), and a request whose reservation would take spend plus the reservations
still in flight past a cap is refused. When the call ends (answer, error, Stop, timeout) the
reservation is replaced by what was recorded (``budget.reconciled``). Concurrent siblings
therefore cannot all pass before any of them has spent: the recorded spend of a budget stays
within its cap plus the amount by which answers exceeded their own reservations (a prompt larger
than its estimate, or output beyond the request's ``max_output_tokens`` when it sets none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal, Protocol

from ._cost import CostTotals, CostTracker
from ._errors import LimitExceeded
from ._events import AgentEvent
from ._limits import UnknownPrice
from ._messages import Message
from ._usage import Usage, UsageTracker

__all__ = ["BudgetExceeded", "BudgetReconciled", "BudgetReserved", "Ledgers", "TreeBudget"]


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
        spent: What the budget's runs had spent against it (dollars or tokens, as ``limit`` says).
        reserved: What requests still in flight held on it.
        requested: The refused request's estimate.
        anchor_run_id: The run that set the budget (the root of the subtree it binds); ``None`` for a
            budget over every run sharing the trackers (a session's).
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
        spent: float = 0.0,
        reserved: float = 0.0,
        requested: float = 0.0,
    ) -> None:
        super().__init__(limit, message, maximum=maximum)
        self.spent, self.reserved, self.requested = spent, reserved, requested
        self.anchor_run_id = anchor_run_id
        self.usage = usage
        self.cost = cost
        self.messages = messages


@dataclass(frozen=True, kw_only=True, slots=True)
class TreeBudget:
    """One set of spending limits and the run whose subtree they bind (``None``: every run on the trackers).

    Attributes:
        hint: How a person raises this budget, appended to a refusal's message (a notebook says
            which ``%config`` to set); empty means the ``RunLimits`` field. ``{needed}`` in it becomes
            a limit that would have let the refused request through (twice what it needed), so the
            suggestion is never one that refuses again.
    """

    anchor_run_id: str | None
    max_cost_usd: Decimal | None = None
    max_total_tokens: int | None = None
    max_input_tokens_per_request: int | None = None
    unknown_price: UnknownPrice = "refuse"
    hint: str = ""
    _warned: set[str] = field(default_factory=set, compare=False, repr=False)

    def usage_in(self, ledgers: Ledgers) -> Usage:
        """What the runs this budget binds have used so far (the anchor's subtree, or the whole ledger)."""
        anchor = self.anchor_run_id
        return ledgers.usage.total() if anchor is None else ledgers.usage.for_subtree(anchor)

    def cost_in(self, ledgers: Ledgers) -> CostTotals:
        """What they have cost so far."""
        anchor = self.anchor_run_id
        return ledgers.costs.total() if anchor is None else ledgers.costs.for_subtree(anchor)


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetReserved(AgentEvent):
    """A request's estimate was reserved on the run's budgets; it is being sent.

    ``usd`` is ``None`` when the serving model has no known price (reserved as $0 under
    ``unknown_price="allow"|"warn"``).
    """

    kind: Literal["budget.reserved"] = "budget.reserved"
    call_id: str | None = None
    model: str = ""
    tokens: int = 0
    usd: Decimal | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetReconciled(AgentEvent):
    """A reservation was replaced by what the call recorded (``outcome``: how it ended).

    ``tokens``/``usd`` are the recorded amounts (``usd`` ``None``: unknown price), ``estimated``
    when the harness had to estimate them (no usage reported, or the call was cut short).
    """

    kind: Literal["budget.reconciled"] = "budget.reconciled"
    call_id: str | None = None
    model: str = ""
    outcome: Literal["completed", "failed", "cancelled"] = "completed"
    reserved_tokens: int = 0
    reserved_usd: Decimal | None = None
    tokens: int = 0
    usd: Decimal | None = None
    estimated: bool = False
