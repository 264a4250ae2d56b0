"""Fail-closed run limits: the harness policy (``RunLimits``) and the per-run counter (``LimitTracker``).

Two sources set a run's caps: the harness-wide ``RunLimits`` policy and the per-call ``RunConfig``.
The stricter one always wins, so a caller can tighten a run but never loosen the operator's policy.
A child run also inherits its parent's absolute deadline: a sub-agent must not outlive the run
that is waiting for it.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ._errors import ConfigurationError, LimitExceeded, RunTimeout

if TYPE_CHECKING:
    from ._config import RunConfig

__all__ = ["LimitKind", "LimitTracker", "RunLimits", "UnknownPrice", "tighter"]

UnknownPrice: TypeAlias = Literal["refuse", "allow", "warn"]


class LimitKind(enum.StrEnum):
    """Which limit a ``limit.reached`` event (and a ``LimitExceeded``) names.

    A ``StrEnum``, so each member equals its stable string (``LimitKind.WALL_CLOCK == "wall_clock"``)
    and old filters on the strings keep working.
    """

    MODEL_CALLS = "model_calls"
    TOOL_CALLS = "tool_calls"
    WALL_CLOCK = "wall_clock"
    DEPTH = "depth"
    COST_USD = "cost_usd"
    TOTAL_TOKENS = "total_tokens"
    INPUT_TOKENS_PER_REQUEST = "input_tokens_per_request"

    @classmethod
    def of(cls, limit: str) -> LimitKind | str:
        """The member for ``limit``, or the string itself for a limit this enum does not name yet."""
        try:
            return cls(limit)
        except ValueError:
            return limit


def _check_int(name: str, value: object, *, minimum: int, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value}")


def _check_seconds(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{name} must be a finite number > 0, got {value!r}")


def _check_instant(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(f"deadline must be a finite clock() time, got {value!r}")


def _stricter(explicit: int | None, policy: int) -> int:
    return policy if explicit is None else min(explicit, policy)


def tighter(a: float | None, b: float | None) -> Any:
    """The tighter of two optional caps (``None``: no cap); ``int`` caps stay ``int``."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunLimits:
    """The harness's caps on every run; a ``RunConfig`` may only tighten them.

    Caps are inclusive: ``max_model_calls=N`` allows N calls and the (N+1)-th fails the run.

    Attributes:
        max_model_calls: Model calls per run (each retry and fallback attempt is one loop call's
            budget, not a new call).
        max_tool_calls: Tool calls per run.
        max_wall_clock_s: Wall-clock budget per run; ``None`` leaves it to ``RunConfig.timeout_s``.
        max_retries_per_call: Caps retries of one model call below ``RetryPolicy.max_attempts``
            (attempts = ``min(max_attempts, max_retries_per_call + 1)``); ``None`` = the policy's.
        max_concurrency: Parallel tool calls / sub-agents at once; ``None`` = unbounded.
        max_depth: How deep nested sub-agents may recurse.
        max_cost_usd: Dollars the whole run tree may spend (this run, its sub-agents, their
            sub-queries), checked before each request against the spend so far plus the request's
            estimated price; ``LimitExceeded.limit`` is ``"cost_usd"``.
        max_total_tokens: Tokens (input + output) the whole run tree may use, checked the same way
            (``"total_tokens"``).
        max_input_tokens_per_request: The largest prompt (estimated) any request of the tree may
            send (``"input_tokens_per_request"``).
        unknown_price: Under ``max_cost_usd``, what a model without a known price means:
            ``refuse`` the request (the default: a budget that cannot be kept fails closed),
            ``allow`` it counting $0, or ``warn`` (allow, with a ``CostUnknownWarning``).
    """

    max_model_calls: int = 25
    max_tool_calls: int = 50
    max_wall_clock_s: float | None = None
    max_retries_per_call: int | None = None
    max_concurrency: int | None = None
    max_depth: int = 8
    max_cost_usd: Decimal | float | None = None
    max_total_tokens: int | None = None
    max_input_tokens_per_request: int | None = None
    unknown_price: UnknownPrice = "refuse"

    def __post_init__(self) -> None:
        _check_int("max_model_calls", self.max_model_calls, minimum=0)
        _check_int("max_tool_calls", self.max_tool_calls, minimum=0)
        _check_seconds("max_wall_clock_s", self.max_wall_clock_s)
        _check_int("max_retries_per_call", self.max_retries_per_call, minimum=0, allow_none=True)
        _check_int("max_concurrency", self.max_concurrency, minimum=1, allow_none=True)
        _check_int("max_depth", self.max_depth, minimum=0)
        _check_int("max_total_tokens", self.max_total_tokens, minimum=1, allow_none=True)
        _check_int("max_input_tokens_per_request", self.max_input_tokens_per_request, minimum=1, allow_none=True)
        if self.max_cost_usd is not None:
            object.__setattr__(self, "max_cost_usd", _dollars(self.max_cost_usd))
        if self.unknown_price not in ("refuse", "allow", "warn"):
            raise ConfigurationError(f"unknown_price must be 'refuse', 'allow' or 'warn', got {self.unknown_price!r}")

    @property
    def has_budget(self) -> bool:
        """Whether any tree-wide spending limit is set."""
        return not (
            self.max_cost_usd is None and self.max_total_tokens is None and self.max_input_tokens_per_request is None
        )


def _dollars(value: object) -> Decimal:
    """A dollar amount as a ``Decimal`` (ints, floats and strings accepted; floats via their ``str``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ConfigurationError(f"max_cost_usd must be a number of dollars, got {type(value).__name__}")
    try:
        amount = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise ConfigurationError(f"max_cost_usd must be a number of dollars, got {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ConfigurationError(f"max_cost_usd must be a finite amount >= 0, got {value!r}")
    return amount


class LimitTracker:
    """Counts one run's model and tool calls and watches its deadline.

    Built once per run with ``for_run``. The methods are a few integer operations (called on every
    step, so no locks): use the tracker from the loop's event loop only. Concurrent tool tasks on
    that loop are fine, since nothing here awaits between reading and writing a counter.

    Args:
        max_model_calls: The effective model-call cap.
        max_tool_calls: The effective tool-call cap.
        timeout_s: Wall-clock budget measured from construction, or ``None``.
        deadline: An absolute ``clock()`` time that may only tighten the budget (a parent's).
        clock: Monotonic seconds; injectable for tests.
        max_depth: The effective sub-agent depth cap.
    """

    __slots__ = (
        "_clock",
        "_deadline",
        "_max_depth",
        "_max_model_calls",
        "_max_tool_calls",
        "_model_calls",
        "_started",
        "_tool_calls",
    )

    def __init__(
        self,
        *,
        max_model_calls: int,
        max_tool_calls: int,
        timeout_s: float | None = None,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_depth: int = 8,
    ) -> None:
        _check_int("max_model_calls", max_model_calls, minimum=0)
        _check_int("max_tool_calls", max_tool_calls, minimum=0)
        _check_int("max_depth", max_depth, minimum=0)
        _check_seconds("timeout_s", timeout_s)
        _check_instant(deadline)
        if not callable(clock):
            raise ConfigurationError("clock must be a callable returning monotonic seconds")
        self._clock = clock
        self._started = started = clock()
        own = None if timeout_s is None else started + timeout_s
        if own is not None and deadline is not None:
            self._deadline: float | None = min(own, float(deadline))
        else:
            self._deadline = own if deadline is None else float(deadline)
        self._max_model_calls = max_model_calls
        self._max_tool_calls = max_tool_calls
        self._max_depth = max_depth
        self._model_calls = 0
        self._tool_calls = 0

    @classmethod
    def for_run(
        cls,
        limits: RunLimits,
        config: RunConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        deadline: float | None = None,
    ) -> LimitTracker:
        """A tracker with the stricter of ``config`` and ``limits`` for every cap.

        The wall clock starts now: its budget is the smaller of ``config.timeout_s`` and
        ``limits.max_wall_clock_s``; an inherited absolute ``deadline`` (the parent's) can only
        bring it closer.
        """
        budgets = [s for s in (config.timeout_s, limits.max_wall_clock_s) if s is not None]
        return cls(
            max_model_calls=_stricter(config.max_model_calls, limits.max_model_calls),
            max_tool_calls=_stricter(config.max_tool_calls, limits.max_tool_calls),
            timeout_s=min(budgets) if budgets else None,
            deadline=deadline,
            clock=clock,
            max_depth=min(config.max_depth, limits.max_depth),
        )

    # ------------------------------------------------------------------------------------- counters
    def record_model_call(self) -> None:
        """Count a model call; raises ``LimitExceeded`` when it is one past the cap."""
        self._model_calls += 1
        if self._model_calls > self._max_model_calls:
            cap = self._max_model_calls
            raise LimitExceeded("model_calls", f"max model calls ({cap}) exceeded", maximum=cap)

    def record_tool_call(self) -> None:
        """Count a tool call; raises ``LimitExceeded`` when it is one past the cap."""
        self._tool_calls += 1
        if self._tool_calls > self._max_tool_calls:
            cap = self._max_tool_calls
            raise LimitExceeded("tool_calls", f"max tool calls ({cap}) exceeded", maximum=cap)

    def check_deadline(self) -> None:
        """Raise ``RunTimeout`` once the deadline has been reached."""
        if self._deadline is None:
            return
        now = self._clock()
        if now >= self._deadline:
            budget = self._deadline - self._started  # == wall_clock_s
            raise RunTimeout(
                f"wall-clock limit ({budget:.3f} s) exceeded after {now - self._started:.3f} s",
                timeout_s=budget,
            )

    def remaining_s(self) -> float | None:
        """Seconds until the deadline (0 once passed), or ``None`` without one."""
        if self._deadline is None:
            return None
        return max(self._deadline - self._clock(), 0.0)

    # ------------------------------------------------------------------------------------- state
    @property
    def deadline(self) -> float | None:
        """Absolute ``clock()`` time of the deadline; hand it to a child's ``for_run``."""
        return self._deadline

    @property
    def wall_clock_s(self) -> float | None:
        """The effective wall-clock budget in seconds (deadline minus start), or ``None``."""
        return None if self._deadline is None else self._deadline - self._started

    @property
    def model_calls(self) -> int:
        return self._model_calls

    @property
    def tool_calls(self) -> int:
        return self._tool_calls

    @property
    def max_model_calls(self) -> int:
        return self._max_model_calls

    @property
    def max_tool_calls(self) -> int:
        return self._max_tool_calls

    @property
    def max_depth(self) -> int:
        return self._max_depth

    @property
    def remaining_model_calls(self) -> int:
        return max(self._max_model_calls - self._model_calls, 0)

    @property
    def remaining_tool_calls(self) -> int:
        return max(self._max_tool_calls - self._tool_calls, 0)

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def __repr__(self) -> str:
        return (
            f"LimitTracker(model_calls={self._model_calls}/{self._max_model_calls}, "
            f"tool_calls={self._tool_calls}/{self._max_tool_calls}, remaining_s={self.remaining_s()})"
        )
