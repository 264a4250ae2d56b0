from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from tinyagents_nb.harness import ConfigurationError, ModelNotFound
from tinyagents_nb.harness.models import (
    ContextWindow,
    context_window_for,
    register_context_window,
    unregister_context_window,
)


@pytest.fixture
def overrides() -> Iterator[list[str]]:
    """Names registered during a test; unregistered afterwards so tests stay independent."""
    names: list[str] = []
    yield names
    for name in names:
        unregister_context_window(name)


def test_properties() -> None:
    w = ContextWindow(model="m", max_tokens=1_000, reserved_output_tokens=200, estimated_prompt_tokens=400)
    assert (w.usable_tokens, w.remaining, w.utilization) == (800, 400, 0.5)
    assert w.fits(800)
    assert w.fits(0)
    assert not w.fits(801)
    over = w.with_estimate(900)
    assert (over.remaining, over.utilization) == (-100, 1.125)
    assert w.estimated_prompt_tokens == 400  # values are immutable
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.max_tokens = 5  # type: ignore[misc]
    empty = ContextWindow(model="m", max_tokens=10)
    assert (empty.remaining, empty.utilization) == (10, 0.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens must be an int"),
        ({"max_tokens": 1.5}, "max_tokens must be an int"),
        ({"max_tokens": 100, "reserved_output_tokens": -1}, "reserved_output_tokens"),
        ({"max_tokens": 100, "reserved_output_tokens": 100}, "less than max_tokens"),
        ({"max_tokens": 100, "reserved_output_tokens": 150}, "less than max_tokens"),
        ({"max_tokens": 100, "estimated_prompt_tokens": -1}, "estimated_prompt_tokens"),
        ({"max_tokens": 100, "estimated_prompt_tokens": False}, "estimated_prompt_tokens"),
        ({"max_tokens": 100, "model": ""}, "model"),
        ({"max_tokens": 100, "model": "   "}, "model"),
    ],
)
def test_validation(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"model": "m"} | kwargs
    with pytest.raises(ConfigurationError, match=match):
        ContextWindow(**args)  # type: ignore[arg-type]


def test_method_arguments_are_validated() -> None:
    w = ContextWindow(model="m", max_tokens=100)
    with pytest.raises(ConfigurationError):
        w.with_estimate(-1)
    with pytest.raises(ConfigurationError):
        w.fits(-1)


def test_for_model_gpt_4o() -> None:
    w = ContextWindow.for_model("gpt-4o")
    assert (w.model, w.max_tokens, w.reserved_output_tokens) == ("gpt-4o", 128_000, 4096)
    assert w.remaining == 128_000 - 4_096
    assert ContextWindow.for_model("openai:gpt-4o", reserved_output_tokens=0).max_tokens == 128_000
    assert context_window_for("gpt-4o-2024-08-06") == 128_000  # dated snapshots resolve


def test_for_model_explicit_size_skips_lookup_and_scales_reserve() -> None:
    w = ContextWindow.for_model("my-unlisted-model", max_tokens=1_000)
    assert (w.max_tokens, w.reserved_output_tokens) == (1_000, 250)
    with pytest.raises(ConfigurationError, match="max_tokens"):
        ContextWindow.for_model("x", max_tokens=0)
    with pytest.raises(ConfigurationError, match="less than max_tokens"):
        ContextWindow.for_model("x", max_tokens=10, reserved_output_tokens=10)


def test_builtin_table_covers_a_model_genai_prices_lists_without_size() -> None:
    assert context_window_for("groq:llama-3.3-70b-versatile") == 131_072


@pytest.mark.parametrize("model", ["no-such-model-xyz", "ollama:no-such-model-xyz", "qwen-nope:7b"])
def test_unknown_model_raises_model_not_found(model: str) -> None:
    with pytest.raises(ModelNotFound) as info:
        ContextWindow.for_model(model)
    err = info.value
    assert isinstance(err, LookupError)
    assert err.model == model
    assert err.hint is not None
    assert "register_context_window" in err.hint
    assert "ContextWindow(model=" in err.hint


@pytest.mark.parametrize("model", ["", "  ", 42])
def test_lookup_rejects_non_names(model: object) -> None:
    with pytest.raises(ConfigurationError):
        context_window_for(model)  # type: ignore[arg-type]


def test_overrides_win_and_are_scoped(overrides: list[str]) -> None:
    overrides += ["my-local-model", "groq:gpt-4o", "gpt-4o"]
    assert register_context_window("my-local-model", 32_768) is None
    assert ContextWindow.for_model("my-local-model").max_tokens == 32_768
    assert context_window_for("ollama:my-local-model") == 32_768  # a bare name applies under any provider
    register_context_window("groq:gpt-4o", 1_000)
    assert context_window_for("groq:gpt-4o") == 1_000
    assert context_window_for("gpt-4o") == 128_000  # a provider-scoped override stays scoped
    assert register_context_window("gpt-4o", 64_000) is None
    assert register_context_window("GPT-4o", 65_000) == 64_000  # names are case-insensitive
    assert context_window_for("openai:gpt-4o") == 65_000
    assert unregister_context_window("gpt-4o") is True
    assert unregister_context_window("gpt-4o") is False
    assert context_window_for("gpt-4o") == 128_000


@pytest.mark.parametrize(("model", "tokens"), [("m", 0), ("m", -1), ("m", True), ("m", 2.0), ("", 100)])
def test_register_rejects_bad_input(model: str, tokens: object) -> None:
    with pytest.raises(ConfigurationError):
        register_context_window(model, tokens)  # type: ignore[arg-type]
