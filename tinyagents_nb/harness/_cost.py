"""Money: model prices and the cost ledger a recursion tree shares.

Prices come from `genai-prices` (a maintained, offline price table that knows cached-read,
cache-write and reasoning rates) unless the user registers a `ModelPricing` override. A call
whose price nobody knows is recorded with ``cost=None`` and warned about once: an unknown price is
never counted as free, and a total that is missing calls is reported as unknown, not as a smaller
number. Amounts stay `Decimal` end to end; floats appear only in the DataFrame export.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Final, Literal

from ._errors import ConfigurationError
from ._ids import CallId, RunId
from ._usage import Usage, _frame, _Ledger, _lineage, _record_rows, _usage_dtypes

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CostBreakdown",
    "CostRecord",
    "CostTotals",
    "CostTracker",
    "CostUnknownWarning",
    "ModelPricing",
    "PriceSource",
]

PriceSource = Literal["genai-prices", "override", "free", "unknown"]
"""Where a price came from; ``free`` is the testkit's fake provider, whose calls are known to cost nothing."""
"""Where a call's price came from; ``"unknown"`` means nobody knew it."""

_MTOK: Final = Decimal(1_000_000)
# Our provider names → genai-prices ids where they differ; other names are passed through when
# the library knows them and dropped (so the model name picks the provider) when it does not.
_GENAI_PROVIDER_ALIASES: Final = {"xai": "x-ai", "gemini": "google", "anthropic-compat": "anthropic"}
# Local runtimes: a model name like "mistral" must not be priced at the hosted API's rate.
_UNPRICED_PROVIDERS: Final = frozenset({"ollama"})
_FREE_PROVIDERS: Final = frozenset({"test"})  # testkit fakes: known to cost nothing, so 0 is the truth here
# Prefixes split off "provider:model" strings; only these, since Ollama tags contain colons.
_PROVIDER_PREFIXES: Final = frozenset(
    {
        "openai",
        "anthropic",
        "anthropic-compat",
        "deepseek",
        "gemini",
        "groq",
        "xai",
        "openrouter",
        "together",
        "mistral",
        "ollama",
        "azure",
    }
)


class CostUnknownWarning(UserWarning):
    """No price is known for a model, so its calls are recorded with an unknown cost."""


def _as_price(name: str, value: object) -> Decimal:
    """Coerce a per-million-token price to Decimal; floats go through repr so 0.15 stays 0.15."""
    if isinstance(value, bool):
        raise ConfigurationError(f"ModelPricing.{name} must be a Decimal, got bool")
    try:
        if isinstance(value, float):
            price = Decimal(repr(value))
        elif isinstance(value, int | str | Decimal):
            price = Decimal(value)
        else:
            raise ConfigurationError(f"ModelPricing.{name} must be a Decimal, got {type(value).__name__}")
    except InvalidOperation:
        raise ConfigurationError(f"ModelPricing.{name} is not a number: {value!r}") from None
    if not price.is_finite() or price < 0:
        raise ConfigurationError(f"ModelPricing.{name} must be finite and non-negative, got {value!r}")
    return price


@dataclass(frozen=True, kw_only=True, slots=True)
class CostBreakdown:
    """The USD cost of one call (or a sum of calls).

    ``total_usd`` is the priced total; with genai-prices it can exceed input plus output when a
    model also charges per request.
    """

    input_usd: Decimal
    output_usd: Decimal
    total_usd: Decimal


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelPricing:
    """User-supplied USD prices per million tokens, for custom models or to override the table.

    Optional rates fall back the way providers bill when they have no special rate: cache reads
    and writes at the input price, reasoning at the output price. Ints, strings and floats are
    accepted and stored as `Decimal`.

    Raises:
        ConfigurationError: A price is negative, not finite, or not a number.
    """

    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cached_input_per_mtok: Decimal | None = None
    cache_write_per_mtok: Decimal | None = None
    reasoning_per_mtok: Decimal | None = None

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            object.__setattr__(self, name, _as_price(name, getattr(self, name)))
        for name in ("cached_input_per_mtok", "cache_write_per_mtok", "reasoning_per_mtok"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _as_price(name, value))

    def cost(self, usage: Usage) -> CostBreakdown:
        """Price one call; cached and cache-write tokens are carved out of ``input_tokens``."""
        cached_rate = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        write_rate = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        reasoning_rate = self.output_per_mtok if self.reasoning_per_mtok is None else self.reasoning_per_mtok
        fresh_input = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens
        input_usd = (
            fresh_input * self.input_per_mtok
            + usage.cached_input_tokens * cached_rate
            + usage.cache_write_tokens * write_rate
        ) / _MTOK
        plain_output = usage.output_tokens - usage.reasoning_tokens
        output_usd = (plain_output * self.output_per_mtok + usage.reasoning_tokens * reasoning_rate) / _MTOK
        return CostBreakdown(input_usd=input_usd, output_usd=output_usd, total_usd=input_usd + output_usd)


@dataclass(frozen=True, kw_only=True, slots=True)
class CostRecord:
    """The cost of one model call, with its lineage; ``cost`` is ``None`` when the price is unknown."""

    run_id: RunId
    parent_run_id: RunId | None
    root_run_id: RunId
    depth: int
    model: str
    provider: str | None
    usage: Usage
    cost: CostBreakdown | None
    source: PriceSource
    call_id: CallId | None = None
    ts: float


@dataclass(frozen=True, kw_only=True, slots=True)
class CostTotals:
    """A sum of call costs that remembers how many calls could not be priced.

    Attributes:
        known_usd: The sum over priced calls only.
        priced_calls: Calls with a known price.
        unpriced_calls: Calls whose price is unknown.
    """

    known_usd: Decimal = Decimal(0)
    priced_calls: int = 0
    unpriced_calls: int = 0

    @property
    def total_usd(self) -> Decimal | None:
        """The total, or ``None`` when any call is unpriced: a partial sum is not a total."""
        return self.known_usd if self.unpriced_calls == 0 else None

    @property
    def is_complete(self) -> bool:
        """True when every call was priced."""
        return self.unpriced_calls == 0

    @property
    def calls(self) -> int:
        return self.priced_calls + self.unpriced_calls

    def __add__(self, other: CostTotals) -> CostTotals:
        if type(other) is not CostTotals:
            return NotImplemented
        return CostTotals(
            known_usd=self.known_usd + other.known_usd,
            priced_calls=self.priced_calls + other.priced_calls,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )


_NO_COST: Final = CostTotals()
_ONE_UNPRICED: Final = CostTotals(unpriced_calls=1)


def _split_model(model: str, provider: str | None) -> tuple[str, str | None]:
    """Turn ``"openai:gpt-4o"`` into ``("gpt-4o", "openai")`` when no provider is given."""
    if provider is None:
        head, sep, tail = model.partition(":")
        if sep and tail and head.lower() in _PROVIDER_PREFIXES:
            return tail, head
    return model, provider


def _check_model(model: object) -> None:
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(f"model must be a non-empty string, got {model!r}")


def _check_call(model: object, usage: object) -> None:
    _check_model(model)
    if not isinstance(usage, Usage):
        raise ConfigurationError(f"usage must be a Usage, got {type(usage).__name__}")


class CostTracker(_Ledger[CostRecord, CostTotals]):
    """Thread-safe cost ledger shared by a root run and all its descendants.

    `total`, `for_run` and `for_subtree` return `CostTotals`; `by_model` maps model names to them.

    Args:
        prices: Overrides by model name, or ``"provider:model"`` to price one provider only.
        use_genai_prices: Look prices up in the bundled genai-prices table (never the network).
        warn_unknown: Warn (``CostUnknownWarning``) the first time a model has no price. A caller
            that tells its user itself (the notebook says it in one line, with its own way to set a
            price) turns it off; the record's cost stays unknown either way.
    """

    def __init__(
        self,
        *,
        prices: Mapping[str, ModelPricing] | None = None,
        use_genai_prices: bool = True,
        warn_unknown: bool = True,
    ) -> None:
        super().__init__(_NO_COST)
        self._prices: dict[str, ModelPricing] = {}
        self._use_genai_prices = use_genai_prices
        self.warn_unknown = warn_unknown
        self._unknown: set[tuple[str | None, str]] = set()
        for model, pricing in (prices or {}).items():
            self.register_price(model, pricing)

    # ------------------------------------------------------------------ pricing

    def register_price(self, model: str, pricing: ModelPricing) -> None:
        """Price ``model`` (or ``"provider:model"``) with ``pricing``, ahead of genai-prices.

        Raises:
            ConfigurationError: An empty model name or a pricing that is not a `ModelPricing`.
        """
        _check_model(model)
        if not isinstance(pricing, ModelPricing):
            raise ConfigurationError(f"pricing must be a ModelPricing, got {type(pricing).__name__}")
        with self._lock:
            self._prices[model] = pricing

    def price(
        self, model: str, usage: Usage, provider: str | None = None, *, warn: bool = True
    ) -> tuple[CostBreakdown | None, PriceSource]:
        """Price one call without recording it; ``(None, "unknown")`` when no price is known.

        Warns:
            CostUnknownWarning: The first time a (provider, model) pair has no price (unless ``warn=False``,
                for callers that handle an unknown price themselves).
        """
        _check_call(model, usage)
        model, provider = _split_model(model, provider)
        cost, source, first_miss = self._lookup(model, usage, provider)
        if first_miss and warn:
            self._warn_unknown(model, provider)
        return cost, source

    def _lookup(self, model: str, usage: Usage, provider: str | None) -> tuple[CostBreakdown | None, PriceSource, bool]:
        keys = (f"{provider}:{model}", model) if provider else (model,)
        with self._lock:
            pricing = next((self._prices[key] for key in keys if key in self._prices), None)
            known_miss = (provider, model) in self._unknown
        if pricing is not None:
            return pricing.cost(usage), "override", False
        if provider is not None and provider.lower() in _FREE_PROVIDERS:
            zero = Decimal(0)
            return CostBreakdown(input_usd=zero, output_usd=zero, total_usd=zero), "free", False
        if self._use_genai_prices and not known_miss:
            # Outside the lock: the first lookup loads the price table (~0.3 s).
            cost = self._genai_cost(model, usage, provider)
            if cost is not None:
                return cost, "genai-prices", False
        with self._lock:
            first_miss = (provider, model) not in self._unknown
            self._unknown.add((provider, model))
        return None, "unknown", first_miss

    def _genai_cost(self, model: str, usage: Usage, provider: str | None) -> CostBreakdown | None:
        import genai_prices

        provider_id: str | None = None
        if provider is not None:
            if provider.lower() in _UNPRICED_PROVIDERS:
                return None
            provider_id = self._genai_provider_id(provider)
        counts = genai_prices.Usage(
            input_tokens=usage.input_tokens,
            cache_read_tokens=usage.cached_input_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cache_write_1h_tokens=usage.cache_write_1h_tokens,
            output_tokens=usage.output_tokens,
            output_reasoning_tokens=usage.reasoning_tokens,
        )
        try:
            calc = genai_prices.calc_price(counts, model, provider_id=provider_id)
        except (LookupError, ValueError):
            # LookupError: unknown model or provider. ValueError: usage the table cannot price.
            return None
        return CostBreakdown(input_usd=calc.input_price, output_usd=calc.output_price, total_usd=calc.total_price)

    @staticmethod
    def _genai_provider_id(provider: str) -> str | None:
        """The table's id for our provider name, or None to let the model name pick the provider."""
        from genai_prices.data_snapshot import get_snapshot

        name = provider.lower()
        try:  # the snapshot caches hits and misses itself
            return get_snapshot().find_provider(None, _GENAI_PROVIDER_ALIASES.get(name, name), None).id
        except LookupError:
            return None

    @staticmethod
    def _warn_unknown(model: str, provider: str | None) -> None:
        where = f" from provider {provider!r}" if provider else ""
        warnings.warn(
            f"no price known for model {model!r}{where}; its calls are recorded with an unknown cost and "
            f"cost totals will be None. Register one with CostTracker.register_price({model!r}, "
            f"ModelPricing(input_per_mtok=..., output_per_mtok=...))",
            CostUnknownWarning,
            stacklevel=3,
        )

    # ------------------------------------------------------------------ ledger

    def record(
        self,
        *,
        run_id: str,
        parent_run_id: str | None,
        root_run_id: str,
        depth: int,
        usage: Usage,
        model: str,
        provider: str | None = None,
        call_id: str | None = None,
        ts: float | None = None,
    ) -> CostRecord:
        """Price one model call, record it with its lineage and return the stored record.

        Raises:
            ConfigurationError: Bad lineage (see `UsageTracker.register_run`), a negative depth,
                an empty model name, or ``usage`` is not a `Usage`.

        Warns:
            CostUnknownWarning: The first time a (provider, model) pair has no price; the record
                is stored before the warning, so it is kept even when warnings are errors.
        """
        _check_call(model, usage)
        run, parent, root, depth = _lineage(run_id, parent_run_id, root_run_id, depth)
        with self._lock:
            self._tree.link(run, parent)  # reject bad lineage before pricing
        when = time.time() if ts is None else ts
        model, provider = _split_model(model, provider)
        cost, source, first_miss = self._lookup(model, usage, provider)
        record = CostRecord(
            run_id=run,
            parent_run_id=parent,
            root_run_id=root,
            depth=depth,
            model=model,
            provider=provider,
            usage=usage,
            cost=cost,
            source=source,
            call_id=None if call_id is None else CallId(call_id),
            ts=when,
        )
        call = _ONE_UNPRICED if cost is None else CostTotals(known_usd=cost.total_usd, priced_calls=1)
        self._store(record, run, parent, model, call)
        if first_miss and self.warn_unknown:
            self._warn_unknown(model, provider)
        return record

    def __repr__(self) -> str:
        totals = self.total()
        shown = "unknown" if totals.total_usd is None else f"${totals.total_usd}"
        return f"CostTracker(records={totals.calls}, total_usd={shown})"

    def to_dataframe(self) -> pd.DataFrame:
        """One row per call, with the usage columns, ``source`` and float USD columns.

        ``input_usd``, ``output_usd`` and ``total_usd`` are float64 with **NaN for an unknown
        price** (``source == "unknown"``), never 0. pandas' ``sum()`` skips NaN, so use
        `total` for an honest total rather than summing the column.
        """
        records = self.records
        rows, columns = _record_rows(records, extra=("source",))
        nan = float("nan")
        for row, record in zip(rows, records, strict=True):
            cost = record.cost
            row["input_usd"] = nan if cost is None else float(cost.input_usd)
            row["output_usd"] = nan if cost is None else float(cost.output_usd)
            row["total_usd"] = nan if cost is None else float(cost.total_usd)
        money = ["input_usd", "output_usd", "total_usd"]
        columns = [*columns[:-1], *money, columns[-1]]
        dtypes = {**_usage_dtypes(), "source": "object", **dict.fromkeys(money, "float64")}
        return _frame(rows, columns, dtypes)
