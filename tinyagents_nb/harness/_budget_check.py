"""The checks behind ``TreeBudget``: bind a run's spending limits to its subtree, refuse a request that would break one.

See ``_budget`` for what a tree budget is. The check compares the spend so far plus the next
request's estimate: its prompt tokens and, when the request caps its output, that cap at the
model's output price.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ._budget import BudgetExceeded, TreeBudget
from ._cost import CostUnknownWarning
from ._events import LimitReached
from ._limits import RunLimits
from ._messages import Message
from ._usage import Usage

if TYPE_CHECKING:
    from ._context import RunContext
    from ._model import ChatModel, ModelRequest

__all__ = ["bind_budgets", "check_request_budget"]


def bind_budgets(ctx: RunContext[Any], limits: RunLimits) -> tuple[TreeBudget, ...]:
    """``ctx``'s inherited budgets, plus one anchored at this run when ``limits`` sets any."""
    if not limits.has_budget:
        return ctx.budgets
    cost = limits.max_cost_usd
    own = TreeBudget(
        anchor_run_id=ctx.run_id,
        max_cost_usd=None if cost is None else Decimal(cost),
        max_total_tokens=limits.max_total_tokens,
        max_input_tokens_per_request=limits.max_input_tokens_per_request,
        unknown_price=limits.unknown_price,
    )
    return (*ctx.budgets, own)


def check_request_budget(
    ctx: RunContext[Any], model: ChatModel, request: ModelRequest, prompt_tokens: int, messages: Sequence[Message]
) -> None:
    """Emit ``limit.reached`` and raise ``BudgetExceeded`` when sending ``request`` could break a budget.

    ``prompt_tokens`` is the request's estimate (the one the loop made against the context window).
    """
    output_cap = request.max_output_tokens or 0
    try:
        for budget in ctx.budgets:
            _check(ctx, budget, model.model_name, model.provider, prompt_tokens, output_cap, messages)
    except BudgetExceeded as exc:
        ctx.emit(LimitReached, limit=exc.limit, maximum=exc.maximum)
        raise


def _check(
    ctx: RunContext[Any],
    budget: TreeBudget,
    model: str,
    provider: str | None,
    prompt_tokens: int,
    output_cap: int,
    messages: Sequence[Message],
) -> None:
    anchor = budget.anchor_run_id
    scope = "every run on these ledgers" if anchor is None else f"run {anchor}'s tree"

    def refuse(limit: str, maximum: float, text: str) -> BudgetExceeded:
        return BudgetExceeded(
            limit,
            text,
            maximum=maximum,
            anchor_run_id=anchor,
            usage=budget.usage_in(ctx),
            cost=budget.cost_in(ctx),
            messages=messages,
        )

    cap = budget.max_input_tokens_per_request
    if cap is not None and prompt_tokens > cap:
        raise refuse(
            "input_tokens_per_request", cap, f"the next request's prompt is ~{prompt_tokens} tokens, over {cap}"
        )
    cap = budget.max_total_tokens
    if cap is not None:
        used = budget.usage_in(ctx).total_tokens
        if used + prompt_tokens + output_cap > cap:
            raise refuse(
                "total_tokens",
                cap,
                f"{used} tokens used by {scope}; the next request (~{prompt_tokens + output_cap} "
                f"tokens) would pass its {cap}-token budget",
            )
    dollars = budget.max_cost_usd
    if dollars is None:
        return
    spent = budget.cost_in(ctx)
    estimate = Usage(input_tokens=prompt_tokens, output_tokens=output_cap)
    price, _ = ctx.costs.price(model, estimate, provider, warn=False)  # the policy below decides what unknown means
    unknown = price is None or not spent.is_complete
    if unknown and not _unknown_allowed(budget, model):
        raise refuse(
            "cost_usd",
            float(dollars),
            f"the price of model {model!r} is unknown, so the ${dollars} budget of {scope} cannot be kept "
            "(register a price with CostTracker.register_price, or set RunLimits(unknown_price='allow'|'warn'))",
        )
    total = spent.known_usd + (price.total_usd if price is not None else Decimal(0))
    if total > dollars:
        raise refuse(
            "cost_usd",
            float(dollars),
            f"${spent.known_usd:.6f} spent by {scope}; the next request (~${total - spent.known_usd:.6f}) "
            f"would pass its ${dollars} budget",
        )


def _unknown_allowed(budget: TreeBudget, model: str) -> bool:
    if budget.unknown_price == "refuse":
        return False
    if budget.unknown_price == "warn" and model not in budget._warned:
        budget._warned.add(model)
        warnings.warn(
            f"no price is known for model {model!r}: its calls count as $0 against a ${budget.max_cost_usd} budget",
            CostUnknownWarning,
            stacklevel=2,
        )
    return True
