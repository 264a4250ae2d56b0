from __future__ import annotations

import dataclasses
import math
import socket
import threading
import warnings
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from tinyagents_nb.harness import ConfigurationError, CostTotals, CostTracker, ModelPricing, Usage
from tinyagents_nb.harness.runtime import CostBreakdown, CostRecord, CostUnknownWarning

# $1 per million input tokens and $2 per million output tokens: easy hand arithmetic.
SIMPLE = ModelPricing(input_per_mtok=Decimal(1), output_per_mtok=Decimal(2))
MTOK = 1_000_000


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pricing must work offline: any socket connect fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("cost tracking tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def no_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def _record(tracker: CostTracker, **kwargs: Any) -> CostRecord:
    args: dict[str, Any] = {"parent_run_id": None, "depth": 0, "root_run_id": "root", "model": "simple"}
    return tracker.record(**{**args, **kwargs})


# ---------------------------------------------------------------- genai-prices


def test_gpt_4o_with_cached_input_matches_hand_arithmetic(no_warnings: None) -> None:
    tracker = CostTracker()
    usage = Usage(input_tokens=10_000, cached_input_tokens=8_000, output_tokens=1_000, reasoning_tokens=600)
    cost, source = tracker.price("gpt-4o", usage, provider="openai")
    assert source == "genai-prices"
    # gpt-4o: $2.50/M input, $1.25/M cached read, $10/M output, no separate reasoning rate.
    # input  = 2,000 * 2.50 / 1M + 8,000 * 1.25 / 1M = 0.005 + 0.010 = 0.015
    # output = 1,000 * 10 / 1M (the 600 reasoning tokens are inside the 1,000) = 0.010
    assert cost == CostBreakdown(input_usd=Decimal("0.015"), output_usd=Decimal("0.010"), total_usd=Decimal("0.025"))
    assert isinstance(cost.total_usd, Decimal)


def test_anthropic_cache_writes_are_priced_at_the_write_rate(no_warnings: None) -> None:
    usage = Usage(input_tokens=1_000, cached_input_tokens=200, cache_write_tokens=500, output_tokens=100)
    cost, source = CostTracker().price("claude-sonnet-4-5", usage, provider="anthropic")
    assert source == "genai-prices"
    assert cost is not None
    # $3/M input, $0.30/M cache read, $3.75/M cache write, $15/M output:
    # input = (300 * 3 + 200 * 0.30 + 500 * 3.75) / 1M = (900 + 60 + 1,875) / 1M = 0.002835
    assert cost.input_usd == Decimal("0.002835")
    assert cost.output_usd == Decimal("0.0015")  # 100 * 15 / 1M
    assert cost.total_usd == Decimal("0.004335")


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("openai:gpt-4o-mini", None),  # "provider:model" strings are split
        ("gpt-4o-mini-2024-07-18", None),  # dated snapshots and no provider: the name picks it
        ("grok-4", "xai"),  # our "xai" is genai-prices' "x-ai"
        ("deepseek-chat", "deepseek"),
        ("llama-3.3-70b-versatile", "groq"),
        ("gpt-4o-mini", "my-proxy"),  # a provider the table does not know: inferred from the name
    ],
)
def test_known_models_are_priced_from_the_table(model: str, provider: str | None, no_warnings: None) -> None:
    cost, source = CostTracker().price(model, Usage(input_tokens=MTOK, output_tokens=MTOK), provider=provider)
    assert source == "genai-prices"
    assert cost is not None
    assert cost.input_usd > 0
    assert cost.output_usd > 0


def test_gpt_4o_mini_by_prefix_uses_the_mini_price(no_warnings: None) -> None:
    cost, _ = CostTracker().price("openai:gpt-4o-mini", Usage(input_tokens=MTOK, output_tokens=MTOK))
    assert cost == CostBreakdown(input_usd=Decimal("0.15"), output_usd=Decimal("0.6"), total_usd=Decimal("0.75"))


def test_ollama_models_are_never_priced_by_name() -> None:
    tracker = CostTracker()
    usage = Usage(input_tokens=MTOK)
    assert tracker.price("mistral-large-latest", usage, provider="mistral")[1] == "genai-prices"
    with pytest.warns(CostUnknownWarning, match="'mistral-large-latest' from provider 'ollama'"):
        assert tracker.price("mistral-large-latest", usage, provider="ollama") == (None, "unknown")
    with pytest.warns(CostUnknownWarning, match="'llama3:8b'"):
        assert tracker.price("ollama:llama3:8b", usage) == (None, "unknown")


# ---------------------------------------------------------------- unknown prices


def test_unknown_model_warns_once_and_makes_totals_unknown(no_warnings: None) -> None:
    tracker = CostTracker(prices={"simple": SIMPLE})
    _record(tracker, run_id="root", usage=Usage(input_tokens=MTOK))
    with pytest.warns(CostUnknownWarning, match=r"'no-such-model-xyz'.*register_price") as caught:
        record = _record(tracker, run_id="root", model="no-such-model-xyz", usage=Usage(input_tokens=5))
    assert len(caught) == 1
    assert (record.cost, record.source) == (None, "unknown")
    # Second call for the same (provider, model): recorded, no second warning (no_warnings is "error").
    _record(tracker, run_id="root", model="no-such-model-xyz", usage=Usage(input_tokens=5))

    totals = tracker.total()
    assert totals.total_usd is None  # never a partial sum presented as the total
    assert not totals.is_complete
    assert totals.known_usd == Decimal(1)
    assert (totals.priced_calls, totals.unpriced_calls, totals.calls) == (1, 2, 3)
    assert tracker.by_model()["simple"].total_usd == Decimal(1)
    assert tracker.by_model()["no-such-model-xyz"].total_usd is None
    assert "total_usd=unknown" in repr(tracker)


def test_same_model_under_another_provider_warns_again() -> None:
    tracker = CostTracker()
    with pytest.warns(CostUnknownWarning):
        tracker.price("no-such-model-xyz", Usage())
    with pytest.warns(CostUnknownWarning, match="provider 'openai'"):
        tracker.price("no-such-model-xyz", Usage(), provider="openai")


def test_failed_lookups_are_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    import genai_prices

    calls: list[str] = []
    real: Callable[..., Any] = genai_prices.calc_price

    def counting(usage: object, model_ref: str, **kwargs: Any) -> Any:
        calls.append(model_ref)
        return real(usage, model_ref, **kwargs)

    monkeypatch.setattr(genai_prices, "calc_price", counting)
    tracker = CostTracker()
    with pytest.warns(CostUnknownWarning):
        _record(tracker, run_id="r", root_run_id="r", model="no-such-model-xyz", usage=Usage())
    for _ in range(5):
        _record(tracker, run_id="r", root_run_id="r", model="no-such-model-xyz", usage=Usage())
    assert calls == ["no-such-model-xyz"]
    assert len(tracker) == 6


def test_record_is_kept_when_the_warning_is_an_error() -> None:
    tracker = CostTracker(use_genai_prices=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CostUnknownWarning):
            _record(tracker, run_id="r", root_run_id="r", model="gpt-4o", usage=Usage(input_tokens=1))
    assert len(tracker) == 1
    assert tracker.total().unpriced_calls == 1


def test_without_genai_prices_only_overrides_count() -> None:
    tracker = CostTracker(use_genai_prices=False, prices={"simple": SIMPLE})
    assert tracker.price("simple", Usage(output_tokens=MTOK))[1] == "override"
    with pytest.warns(CostUnknownWarning, match="gpt-4o"):
        assert tracker.price("gpt-4o", Usage(), provider="openai") == (None, "unknown")


# ---------------------------------------------------------------- overrides


def test_override_arithmetic_with_cached_write_and_reasoning_rates(no_warnings: None) -> None:
    pricing = ModelPricing(
        input_per_mtok=Decimal(3),
        output_per_mtok=Decimal(15),
        cached_input_per_mtok=Decimal("0.3"),
        cache_write_per_mtok=Decimal("3.75"),
        reasoning_per_mtok=Decimal(20),
    )
    usage = Usage(
        input_tokens=10_000,
        cached_input_tokens=2_000,
        cache_write_tokens=1_000,
        output_tokens=2_000,
        reasoning_tokens=500,
    )
    cost = pricing.cost(usage)
    # input  = (7,000 * 3 + 2,000 * 0.3 + 1,000 * 3.75) / 1M = (21,000 + 600 + 3,750) / 1M = 0.02535
    # output = (1,500 * 15 + 500 * 20) / 1M = (22,500 + 10,000) / 1M = 0.0325
    assert cost == CostBreakdown(
        input_usd=Decimal("0.02535"), output_usd=Decimal("0.0325"), total_usd=Decimal("0.05785")
    )


def test_override_rates_fall_back_to_input_and_output() -> None:
    usage = Usage(
        input_tokens=10_000,
        cached_input_tokens=2_000,
        cache_write_tokens=1_000,
        output_tokens=2_000,
        reasoning_tokens=500,
    )
    cost = ModelPricing(input_per_mtok=Decimal(3), output_per_mtok=Decimal(15)).cost(usage)
    assert cost.input_usd == Decimal("0.03")  # 10,000 * 3 / 1M: every input token at the input rate
    assert cost.output_usd == Decimal("0.03")  # 2,000 * 15 / 1M


def test_overrides_win_and_provider_specific_keys_win_over_bare_ones(no_warnings: None) -> None:
    cheap = ModelPricing(input_per_mtok=Decimal(0), output_per_mtok=Decimal(0))
    tracker = CostTracker(prices={"gpt-4o": SIMPLE})
    tracker.register_price("azure:gpt-4o", cheap)
    usage = Usage(input_tokens=MTOK)
    assert tracker.price("gpt-4o", usage, provider="openai") == (SIMPLE.cost(usage), "override")
    assert tracker.price("gpt-4o", usage) == (SIMPLE.cost(usage), "override")
    cost, source = tracker.price("gpt-4o", usage, provider="azure")
    assert source == "override"
    assert cost is not None
    assert cost.total_usd == 0  # a registered zero price is a known zero, not unknown


def test_registering_a_price_fixes_a_previously_unknown_model() -> None:
    tracker = CostTracker()
    with pytest.warns(CostUnknownWarning):
        tracker.price("house-model", Usage())
    tracker.register_price("house-model", SIMPLE)
    assert tracker.price("house-model", Usage(input_tokens=MTOK)) == (SIMPLE.cost(Usage(input_tokens=MTOK)), "override")


def test_pricing_accepts_numbers_and_stores_decimals() -> None:
    pricing = ModelPricing(input_per_mtok=0.15, output_per_mtok="0.6", reasoning_per_mtok=2)  # type: ignore[arg-type]
    assert pricing.input_per_mtok == Decimal("0.15")  # via repr, not the binary float
    assert pricing.output_per_mtok == Decimal("0.6")
    assert pricing.reasoning_per_mtok == Decimal(2)
    assert pricing.cached_input_per_mtok is None
    assert all(isinstance(v, Decimal) for v in (pricing.input_per_mtok, pricing.output_per_mtok))


@pytest.mark.parametrize("value", [-1, Decimal("-0.01"), float("nan"), Decimal("Infinity"), "abc", True, None, [1]])
def test_pricing_rejects_bad_prices(value: object) -> None:
    with pytest.raises(ConfigurationError, match="input_per_mtok"):
        ModelPricing(input_per_mtok=value, output_per_mtok=Decimal(1))  # type: ignore[arg-type]


def test_register_price_rejects_bad_input() -> None:
    tracker = CostTracker()
    with pytest.raises(ConfigurationError):
        tracker.register_price("", SIMPLE)
    with pytest.raises(ConfigurationError):
        tracker.register_price("m", {"input_per_mtok": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        CostTracker(prices={"m": 1.0})  # type: ignore[dict-item]


# ---------------------------------------------------------------- ledger


def _tree(tracker: CostTracker) -> None:
    """root -> (child1 -> grandchild), child2; grandchild records first."""
    _record(tracker, run_id="grandchild", parent_run_id="child1", depth=2, usage=Usage(output_tokens=1_000))
    tracker.register_run("child1", "root")  # child1 never calls a model itself
    _record(tracker, run_id="root", usage=Usage(input_tokens=MTOK))
    _record(tracker, run_id="child2", parent_run_id="root", depth=1, usage=Usage(input_tokens=10_000))
    _record(tracker, run_id="root", usage=Usage(output_tokens=MTOK))


def test_cost_totals_over_a_three_level_tree(no_warnings: None) -> None:
    tracker = CostTracker(prices={"simple": SIMPLE})
    _tree(tracker)
    # grandchild 1,000 out * $2/M = 0.002; root $1 in + $2 out = 3; child2 10,000 in * $1/M = 0.01
    assert tracker.for_run("grandchild").total_usd == Decimal("0.002")
    assert tracker.for_run("child1") == CostTotals()
    assert tracker.for_run("child1").total_usd == 0
    assert tracker.for_subtree("child1").total_usd == Decimal("0.002")
    assert tracker.for_run("root").total_usd == Decimal(3)
    assert tracker.for_subtree("child2").total_usd == Decimal("0.01")
    assert tracker.for_subtree("root") == CostTotals(known_usd=Decimal("3.012"), priced_calls=4)
    assert tracker.total() == tracker.for_subtree("root")
    assert tracker.runs() == ("grandchild", "child1", "root", "child2")

    # One unpriced call in child2's subtree makes that subtree and the root unknown, not child1's.
    with pytest.warns(CostUnknownWarning):
        _record(tracker, run_id="leaf", parent_run_id="child2", depth=2, model="mystery", usage=Usage())
    assert tracker.for_subtree("child2").total_usd is None
    assert tracker.for_subtree("child2").known_usd == Decimal("0.01")
    assert tracker.for_subtree("root").total_usd is None
    assert tracker.for_subtree("child1").total_usd == Decimal("0.002")


def test_totals_arithmetic() -> None:
    a = CostTotals(known_usd=Decimal("0.1"), priced_calls=1)
    b = CostTotals(unpriced_calls=2)
    assert a + b == CostTotals(known_usd=Decimal("0.1"), priced_calls=1, unpriced_calls=2)
    assert (a + b).total_usd is None
    assert CostTotals().total_usd == 0
    assert CostTotals().is_complete
    with pytest.raises(TypeError):
        _ = a + 1  # type: ignore[operator]


def test_record_validates_its_input() -> None:
    tracker = CostTracker(prices={"simple": SIMPLE})
    with pytest.raises(ConfigurationError):
        _record(tracker, run_id="r", usage=None)
    with pytest.raises(ConfigurationError):
        _record(tracker, run_id="r", usage=Usage(), model="")
    with pytest.raises(ConfigurationError):
        _record(tracker, run_id="r", usage=Usage(), depth=-1)
    with pytest.raises(ConfigurationError, match="usage must be a Usage"):
        tracker.price("simple", {"input_tokens": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="model must be"):
        tracker.price(None, Usage())  # type: ignore[arg-type]
    _record(tracker, run_id="r", usage=Usage())
    with pytest.raises(ConfigurationError, match="registered with parent None"):
        _record(tracker, run_id="r", parent_run_id="p", usage=Usage())
    assert len(tracker) == 1


def test_record_fields_and_provider_prefix(no_warnings: None) -> None:
    tracker = CostTracker()
    record = _record(
        tracker, run_id="r", model="openai:gpt-4o", usage=Usage(input_tokens=1), call_id="c1", ts=1_700_000_000.0
    )
    assert (record.model, record.provider, record.source, record.ts) == ("gpt-4o", "openai", "genai-prices", 1.7e9)
    assert record.cost is not None
    assert record.cost.input_usd == Decimal("0.0000025")
    assert tracker.records == (record,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.cost = None  # type: ignore[misc]
    assert CostTracker()  # an empty shared tracker is still truthy


def test_concurrent_recording_is_exact(no_warnings: None) -> None:
    tracker = CostTracker(prices={"simple": SIMPLE})
    tracker.register_run("root", None)
    threads_n, calls = 8, 250
    barrier = threading.Barrier(threads_n)

    def work(index: int) -> None:
        barrier.wait()
        for _ in range(calls):
            _record(tracker, run_id=f"c{index}", parent_run_id="root", depth=1, usage=Usage(input_tokens=7))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    n = threads_n * calls
    # 7 tokens * $1/M per call; Decimal keeps it exact where floats would drift.
    assert tracker.total() == CostTotals(known_usd=Decimal(7 * n) / MTOK, priced_calls=n)
    assert tracker.for_subtree("root") == tracker.total()
    assert tracker.for_run("c5").known_usd == Decimal("0.00175")


# ---------------------------------------------------------------- DataFrame

COLUMNS = [
    "run_id",
    "parent_run_id",
    "root_run_id",
    "depth",
    "model",
    "provider",
    "call_id",
    "source",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "total_tokens",
    "input_usd",
    "output_usd",
    "total_usd",
    "ts",
]


def test_dataframe_marks_unknown_cost_as_nan_not_zero() -> None:
    tracker = CostTracker(prices={"simple": SIMPLE, "free": ModelPricing(input_per_mtok=0, output_per_mtok=0)})  # type: ignore[arg-type]
    _record(tracker, run_id="root", usage=Usage(input_tokens=MTOK, output_tokens=500_000))
    _record(tracker, run_id="root", model="free", usage=Usage(input_tokens=10))
    with pytest.warns(CostUnknownWarning):
        _record(tracker, run_id="root", model="mystery", usage=Usage(input_tokens=10))
    frame = tracker.to_dataframe()
    assert list(frame.columns) == COLUMNS
    assert {c: str(frame.dtypes[c]) for c in ("input_usd", "output_usd", "total_usd", "input_tokens", "depth")} == {
        "input_usd": "float64",
        "output_usd": "float64",
        "total_usd": "float64",
        "input_tokens": "int64",
        "depth": "int64",
    }
    assert list(frame.source) == ["override", "override", "unknown"]
    assert frame.total_usd.iloc[0] == 2.0  # $1 input + 500,000 * $2/M output
    assert frame.total_usd.iloc[1] == 0.0  # known to be free
    assert math.isnan(frame.total_usd.iloc[2])  # unknown, distinguishable from free
    assert frame.provider.iloc[0] is None


def test_empty_dataframe_keeps_columns_and_dtypes() -> None:
    frame = CostTracker().to_dataframe()
    assert frame.empty
    assert list(frame.columns) == COLUMNS
    assert str(frame.dtypes["total_usd"]) == "float64"


def test_testkit_provider_is_free_not_unknown() -> None:
    from decimal import Decimal

    from tinyagents_nb.harness import CostTracker, Usage

    tracker = CostTracker()
    cost, source = tracker.price("scripted", Usage(input_tokens=10, output_tokens=5), provider="test")
    assert source == "free"
    assert cost is not None
    assert cost.total_usd == Decimal(0)
