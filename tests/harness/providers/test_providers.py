from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion
from tinyagents_nb.harness import (
    AssistantMessage,
    ChatModel,
    ConfigurationError,
    ModelNotFound,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    UserMessage,
)
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish, profile_for
from tinyagents_nb.harness.providers import (
    ModelRegistry,
    OpenAIChatModel,
    ProviderSpec,
    known_providers,
    resolve_model,
)

KEY_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "MISTRAL_API_KEY",
)


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


class Fake:
    """A minimal ChatModel."""

    def __init__(self, name: str = "fake-1") -> None:
        self._name = name

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        return "test"

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(message=AssistantMessage(text="fake"))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        yield StreamFinish(finish_reason="stop")


# ------------------------------------------------------------------------------------------ specs
@pytest.mark.parametrize(
    ("name", "base_url", "env", "requires_key", "max_field"),
    [
        ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", True, "max_completion_tokens"),
        ("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", True, "max_tokens"),
        ("anthropic-compat", "https://api.anthropic.com/v1/", "ANTHROPIC_API_KEY", True, "max_tokens"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY", True, "max_tokens"),
        ("deepseek", "https://api.deepseek.com", "DEEPSEEK_API_KEY", True, "max_tokens"),
        ("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY", True, "max_tokens"),
        ("xai", "https://api.x.ai/v1", "XAI_API_KEY", True, "max_tokens"),
        ("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True, "max_tokens"),
        ("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY", True, "max_tokens"),
        ("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", True, "max_tokens"),
        ("ollama", "http://localhost:11434/v1", None, False, "max_tokens"),
    ],
)
def test_builtin_specs(name: str, base_url: str, env: str | None, requires_key: bool, max_field: str) -> None:
    spec = ProviderSpec.named(name)
    assert spec == getattr(ProviderSpec, name.replace("-", "_"))()
    assert (spec.name, spec.base_url, spec.api_key_env, spec.requires_key) == (name, base_url, env, requires_key)
    assert spec.max_tokens_field == max_field
    assert dict(spec.default_headers) == {}
    assert ProviderSpec.named(name.upper()) == spec


def test_spec_quirk_flags() -> None:
    assert ProviderSpec.xai().reasoning_outside_completion
    assert not ProviderSpec.openai().reasoning_outside_completion
    assert not ProviderSpec.groq().send_message_names
    assert ProviderSpec.openai().send_prompt_cache_key
    assert not ProviderSpec.deepseek().send_prompt_cache_key


def test_spec_is_a_frozen_hashable_value() -> None:
    spec = ProviderSpec.compatible(base_url="http://127.0.0.1:8000/v1", default_headers={"X-Team": "a"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.default_headers["X-Team"] = "b"  # type: ignore[index]
    assert hash(spec) == hash(ProviderSpec.compatible(base_url="http://127.0.0.1:8000/v1"))
    assert {ProviderSpec.openai(), ProviderSpec.openai()} == {ProviderSpec.openai()}


def test_named_unknown_lists_known_providers() -> None:
    with pytest.raises(ConfigurationError) as info:
        ProviderSpec.named("bedrock")
    for known in ("openai", "anthropic", "groq", "ollama"):
        assert known in str(info.value)
    assert info.value.hint is not None
    assert "compatible" in info.value.hint


def test_compatible() -> None:
    open_host = ProviderSpec.compatible(base_url="http://127.0.0.1:8000/v1")
    assert (open_host.name, open_host.requires_key, open_host.api_key_env) == ("compatible", False, None)
    keyed = ProviderSpec.compatible(base_url="https://gw.test/v1", name="gateway", api_key_env="GW_KEY")
    assert (keyed.name, keyed.requires_key) == ("gateway", True)
    optional = ProviderSpec.compatible(base_url="https://gw.test/v1", api_key_env="GW_KEY", requires_key=False)
    assert optional.requires_key is False


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "a:b", "base_url": "https://x"},
        {"name": "", "base_url": "https://x"},
        {"name": "ok", "base_url": "x.test/v1"},
        {"name": "ok", "base_url": "https://x", "api_key_env": " "},
        {"name": "ok", "base_url": "https://x", "requires_key": True},  # needs an env var
        {"name": "ok", "base_url": "https://x", "api_key_env": "K", "max_tokens_field": "max_output"},
    ],
)
def test_bad_spec(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ProviderSpec(**kwargs)


def test_key_is_read_from_env_at_call_time(no_keys: pytest.MonkeyPatch) -> None:
    spec = ProviderSpec.groq()
    before = (spec.api_key_from_env(), spec.has_key)
    no_keys.setenv("GROQ_API_KEY", "  gsk-value  ")
    after = (spec.api_key_from_env(), spec.has_key)
    assert (before, after) == ((None, False), ("gsk-value", True))
    assert "GROQ_API_KEY" in spec.key_hint
    assert ProviderSpec.ollama().has_key  # nothing needed
    assert ProviderSpec.ollama().api_key_from_env() is None


def test_known_providers_reports_readiness_without_building(no_keys: pytest.MonkeyPatch) -> None:
    no_keys.setenv("OPENAI_API_KEY", "sk-x")
    table = known_providers()
    names = [spec.name for spec, _ in table]
    assert names == [
        "openai",
        "anthropic",
        "anthropic-compat",
        "gemini",
        "deepseek",
        "groq",
        "xai",
        "openrouter",
        "together",
        "mistral",
        "ollama",
    ]
    ready = {spec.name: has_key for spec, has_key in table}
    assert ready["openai"] is True
    assert ready["ollama"] is True
    assert ready["groq"] is False
    assert ready["anthropic"] is False


# ------------------------------------------------------------------------------------------ profiles
def test_profile_for() -> None:
    gpt = profile_for("openai", "gpt-4o-mini")
    assert (gpt.provider, gpt.context_window, gpt.structured_output) == ("openai", 128_000, "native")
    assert profile_for(ProviderSpec.openai(), "gpt-4.1").structured_output == "native"
    assert profile_for("openai", "gpt-3.5-turbo").structured_output == "tool"
    llama = profile_for("groq", "llama-3.3-70b-versatile")
    assert (llama.context_window, llama.structured_output) == (131_072, "tool")
    assert profile_for("openrouter", "openai/gpt-4o").structured_output == "tool"  # native only on openai itself
    reasoner = profile_for("deepseek", "deepseek-reasoner")
    assert reasoner.supports_reasoning
    assert profile_for("openai", "o3-mini").supports_reasoning
    assert not profile_for("openai", "o1-mini").supports_tools
    unknown = profile_for("compatible", "my-local-model")
    assert (unknown.context_window, unknown.name) == (None, "my-local-model")
    with pytest.raises(ConfigurationError):
        profile_for("openai", " ")


# ------------------------------------------------------------------------------------------ registry
def test_registry_register_resolve_and_names() -> None:
    registry = ModelRegistry()
    fake = Fake()
    registry.register("fast", fake)
    assert registry.resolve("fast") is fake
    assert "fast" in registry
    assert "slow" not in registry
    assert 3 not in registry
    assert registry.names() == ["fast"]
    assert len(registry) == 1
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register("fast", Fake())
    other = Fake("fake-2")
    registry.register("fast", other, replace=True)
    assert registry.resolve("fast") is other
    assert registry.unregister("fast")
    assert not registry.unregister("fast")
    assert "ModelRegistry(names=[])" == repr(registry)


def test_registry_factory_runs_once_on_first_resolve() -> None:
    registry = ModelRegistry()
    built: list[Fake] = []

    def factory() -> ChatModel:
        built.append(Fake())
        return built[-1]

    registry.register("lazy", factory)
    assert built == []
    first = registry.resolve("lazy")
    assert registry.resolve("lazy") is first
    assert len(built) == 1
    registry.register("broken", lambda: "not a model")  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigurationError, match="broken"):
        registry.resolve("broken")


@pytest.mark.parametrize("value", [42, "gpt-4o", None])
def test_registry_rejects_non_models(value: Any) -> None:
    with pytest.raises(ConfigurationError):
        ModelRegistry().register("x", value)


def test_registry_rejects_bad_names_and_profiles() -> None:
    registry = ModelRegistry()
    with pytest.raises(ConfigurationError):
        registry.register("  ", Fake())
    with pytest.raises(ConfigurationError):
        registry.register("x", Fake(), profile={"context_window": 5})  # type: ignore[arg-type]


def test_registry_resolve_unknown_lists_names() -> None:
    registry = ModelRegistry()
    registry.register("fast", Fake())
    with pytest.raises(ModelNotFound) as info:
        registry.resolve("nope")
    assert info.value.model == "nope"
    assert info.value.hint is not None
    assert "fast" in info.value.hint
    assert "openai" in info.value.hint


def test_registry_profiles(no_keys: pytest.MonkeyPatch) -> None:
    registry = ModelRegistry()
    explicit = ModelProfile(name="fake-1", provider="test", context_window=4096)
    registry.register("pinned", Fake(), profile=explicit)
    registry.register("plain", Fake())
    own = ModelProfile(name="gpt-4o", provider="openai", context_window=999)
    registry.register("adapter", OpenAIChatModel("gpt-4o", api_key="k", profile=own))
    calls: list[int] = []

    def lazy() -> ChatModel:
        calls.append(1)
        return Fake()

    registry.register("lazy", lazy)
    assert registry.profile("pinned") is explicit
    assert registry.profile("adapter") is own  # the model's own profile
    plain = registry.profile("plain")
    assert (plain.name, plain.provider, plain.context_window) == ("fake-1", "test", None)
    assert registry.profile("lazy").name == "lazy"
    assert calls == []  # profiles never build models
    groq = registry.profile("groq:llama-3.3-70b-versatile")  # unregistered, understood, no key needed
    assert (groq.provider, groq.context_window) == ("groq", 131_072)
    assert registry.profile("gpt-4o").structured_output == "native"
    with pytest.raises(ModelNotFound):
        registry.profile("mystery-model")


# ------------------------------------------------------------------------------------------ resolve_model
def test_resolve_passes_models_through() -> None:
    fake = Fake()
    assert resolve_model(fake) is fake
    with pytest.raises(ConfigurationError):
        resolve_model(fake, api_key="x")
    with pytest.raises(ConfigurationError):
        resolve_model(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "provider", "model", "base_url"),
    [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", "https://api.openai.com/v1"),
        ("groq:llama-3.3-70b-versatile", "groq", "llama-3.3-70b-versatile", "https://api.groq.com/openai/v1"),
        ("OpenRouter:openai/gpt-4o", "openrouter", "openai/gpt-4o", "https://openrouter.ai/api/v1"),
        ("ollama:qwen2:7b", "ollama", "qwen2:7b", "http://localhost:11434/v1"),
        (
            "anthropic-compat:claude-sonnet-4-5",
            "anthropic-compat",
            "claude-sonnet-4-5",
            "https://api.anthropic.com/v1/",
        ),
        (
            "gemini:gemini-2.5-flash",
            "gemini",
            "gemini-2.5-flash",
            "https://generativelanguage.googleapis.com/v1beta/openai",
        ),
        ("gpt-4o-mini", "openai", "gpt-4o-mini", "https://api.openai.com/v1"),
        ("o3-mini", "openai", "o3-mini", "https://api.openai.com/v1"),
        ("o1", "openai", "o1", "https://api.openai.com/v1"),
    ],
)
def test_resolve_model_strings(spec: str, provider: str, model: str, base_url: str) -> None:
    resolved = resolve_model(spec, api_key="sk-resolve-test-123456")
    assert isinstance(resolved, OpenAIChatModel)
    assert isinstance(resolved, ChatModel)
    assert (resolved.provider, resolved.model_name, resolved.base_url) == (provider, model, base_url)
    assert "sk-resolve-test-123456" not in repr(resolved)


def test_resolve_registry_wins_and_rejects_kwargs() -> None:
    registry = ModelRegistry()
    fake = Fake()
    registry.register("openai:gpt-4o", fake)  # a registered name shadows the provider route
    assert resolve_model("openai:gpt-4o", registry=registry) is fake
    with pytest.raises(ConfigurationError):
        resolve_model("openai:gpt-4o", registry=registry, api_key="x")


@pytest.mark.parametrize("spec", ["claude-3-5-sonnet", "mystery:model", "omni-moderation-latest", ""])
def test_resolve_unknown_is_model_not_found(spec: str) -> None:
    with pytest.raises(ModelNotFound) as info:
        resolve_model(spec, api_key="k")
    assert info.value.hint is not None
    assert "groq" in info.value.hint


def test_resolve_unknown_provider_says_so() -> None:
    with pytest.raises(ModelNotFound, match="unknown provider 'mystery'"):
        resolve_model("mystery:model")


def test_resolve_missing_key_and_provider_kwarg(no_keys: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_model("xai:grok-4")
    assert info.value.hint is not None
    assert "XAI_API_KEY" in info.value.hint
    with pytest.raises(ConfigurationError):
        resolve_model("openai:gpt-4o", provider="groq", api_key="k")
    assert isinstance(resolve_model("ollama:llama3.2"), OpenAIChatModel)  # no key needed


@pytest.mark.anyio
async def test_resolved_model_talks_to_the_server(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion("resolved"))
    model = resolve_model("deepseek:deepseek-chat", base_url=replay_server.base_url, api_key="sk-ds-0123456789")
    assert isinstance(model, OpenAIChatModel)
    async with model:
        response = await model.invoke(ModelRequest(messages=[UserMessage(text="x")], max_output_tokens=5))
    assert response.message.text == "resolved"
    assert response.provider == "deepseek"
    sent = replay_server.requests[0]
    assert sent.body["model"] == "deepseek-chat"
    assert sent.body["max_tokens"] == 5
    assert sent.headers["authorization"] == "Bearer sk-ds-0123456789"
