"""Model selection: capabilities from profiles, hints, the registry, ResolvedModel on every response, re-fits."""

from __future__ import annotations

from typing import Any

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ConfigurationError,
    FallbackPolicy,
    Message,
    Middleware,
    ModelNotFound,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.models import (
    CapabilitySet,
    ModelHint,
    ModelSelection,
    ResolvedModel,
    TokenEstimator,
    profile_for,
    select_model,
)
from tinyagents_nb.harness.providers import ModelRegistry
from tinyagents_nb.harness.stores import InMemoryResponseCache
from tinyagents_nb.harness.testkit import ScriptedModel

pytestmark = pytest.mark.anyio

TEXT_ONLY = ModelProfile(name="small", provider="scripted", context_window=8_000, supports_vision=False)
SEEING = ModelProfile(name="big", provider="scripted", context_window=200_000, supports_vision=True)


class Require(Middleware):
    """Asks for capabilities on every request, and keeps every response's ResolvedModel."""

    def __init__(self, **flags: Any) -> None:
        self.flags = flags
        self.resolved: list[ResolvedModel | None] = []

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        return request.with_required_capabilities(**self.flags) if self.flags else request

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        self.resolved.append(response.resolved)
        return response


def test_capabilities_come_from_profiles_and_report_what_is_missing() -> None:
    caps = CapabilitySet.of(TEXT_ONLY)
    assert caps.tools
    assert caps.context_tokens == 8_000
    assert caps.missing(CapabilitySet(vision=True, context_tokens=100_000)) == ("vision", "context_tokens")
    assert CapabilitySet.of(SEEING).covers(CapabilitySet(vision=True, tools=True, context_tokens=100_000))
    assert profile_for("openai", "gpt-4o").supports_vision
    assert not profile_for("openai", "gpt-3.5-turbo").supports_vision
    with pytest.raises(ConfigurationError):
        CapabilitySet(context_tokens=0)


def test_with_required_capabilities_accumulates() -> None:
    request = ModelRequest(messages=(UserMessage(text="hi"),))
    both = request.with_required_capabilities(vision=True).with_required_capabilities(
        CapabilitySet(context_tokens=50_000)
    )
    assert both.required_capabilities == CapabilitySet(vision=True, context_tokens=50_000)
    assert request.required_capabilities is None
    with pytest.raises(ConfigurationError, match="unknown capability"):
        request.with_required_capabilities(telepathy=True)


def test_the_registry_resolves_a_selection() -> None:
    registry = ModelRegistry()
    registry.register("small", ScriptedModel([], model_name="small", profile=TEXT_ONLY))
    registry.register("big", ScriptedModel([], model_name="big", profile=SEEING))
    model, resolved = select_model(registry, ModelSelection(required=CapabilitySet(vision=True)))
    assert model.model_name == "big"
    assert resolved == ResolvedModel(provider="test", model="big", source="registry")
    _, plain = select_model(registry, ModelSelection())
    assert plain.model == "small"  # registration order when nothing is required
    _, hinted = select_model(registry, ModelSelection(hint=ModelHint(names=("big", "small"))))
    assert (hinted.model, hinted.source) == ("big", "hint")
    with pytest.raises(ModelNotFound, match="small: lacks vision, context_tokens; big: lacks context_tokens"):
        select_model(registry, ModelSelection(required=CapabilitySet(vision=True, context_tokens=500_000)))
    with pytest.raises(ModelNotFound, match="small: provider scripted; big: provider scripted"):
        select_model(registry, ModelSelection(hint=ModelHint(provider="openai")))


async def test_the_loop_sends_a_call_to_the_first_model_with_the_required_capabilities() -> None:
    small = ScriptedModel(["never"], model_name="small", profile=TEXT_ONLY)
    big = ScriptedModel(["I see a cat."], model_name="big", profile=SEEING)
    require = Require(vision=True)
    harness = AgentHarness(model=small, policy=RunPolicy(fallback=FallbackPolicy([big])), middleware=[require])
    run = await harness.invoke("what is in the picture?")
    assert run.final_text == "I see a cat."
    assert small.requests == []
    assert require.resolved == [ResolvedModel(provider="test", model="big", source="capabilities")]


async def test_no_capable_model_is_a_clear_error() -> None:
    small = ScriptedModel(["never"], model_name="small", profile=TEXT_ONLY)
    harness = AgentHarness(model=small, middleware=[Require(vision=True)])
    with pytest.raises(ModelNotFound, match="small: lacks vision"):
        await harness.invoke("look")


async def test_every_response_records_who_served_it() -> None:
    cache = InMemoryResponseCache()
    require = Require()
    model = ScriptedModel(["hello", "hello again"], model_name="small", profile=TEXT_ONLY)
    harness = AgentHarness(model=model, policy=RunPolicy(response_cache=cache), middleware=[require])
    await harness.invoke("hi")
    await harness.invoke("hi")  # the same request: served from the cache
    assert [r.source if r else None for r in require.resolved] == ["configured", "cache"]

    failing = ScriptedModel([ProviderError("down", status=500, retryable=True)], model_name="small", profile=TEXT_ONLY)
    backup = ScriptedModel(["from backup"], model_name="big", profile=SEEING)
    require = Require()
    policy = RunPolicy(fallback=FallbackPolicy([backup]), retry=RetryPolicy(max_attempts=1))
    await AgentHarness(model=failing, policy=policy, middleware=[require]).invoke("hi")
    assert require.resolved == [ResolvedModel(provider="test", model="big", source="fallback")]


async def test_a_fallback_with_a_smaller_window_gets_a_refitted_request() -> None:
    history: list[Message] = []
    for i in range(40):
        history += [UserMessage(text=f"question {i} " * 30), AssistantMessage(text=f"answer {i} " * 30)]
    history.append(UserMessage(text="final?"))
    primary = ScriptedModel([ProviderError("down", status=503, retryable=True)], model_name="big", profile=SEEING)
    narrow = ModelProfile(name="narrow", provider="scripted", context_window=2_000, max_output_tokens=200)
    backup = ScriptedModel(["ok"], model_name="narrow", profile=narrow)
    policy = RunPolicy(fallback=FallbackPolicy([backup]), retry=RetryPolicy(max_attempts=1))
    run = await AgentHarness(model=primary, policy=policy).invoke(history)
    assert run.final_text == "ok"
    estimator = TokenEstimator.for_model("narrow")
    assert estimator.estimate(primary.requests[0].messages) > 2_000  # the first model got everything
    assert estimator.estimate(backup.requests[0].messages) <= 2_000 - 200
    assert backup.requests[0].messages[-1] == UserMessage(text="final?")


async def test_recording_the_resolved_model_keeps_every_other_response_field() -> None:
    """The loop rebuilds the response in one constructor call: a field added later must not be dropped."""
    import dataclasses

    seen: list[ModelResponse] = []

    class Record(Middleware):
        async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
            seen.append(response)
            return response

    original = ModelResponse(
        message=AssistantMessage(text="x"),
        usage=Usage(input_tokens=3, output_tokens=1),
        finish_reason="stop",
        model="alias",
        provider="p",
    )
    with pytest.warns(UserWarning, match="no price known for model 'alias'"):
        await AgentHarness(model=ScriptedModel([original], profile=TEXT_ONLY), middleware=[Record()]).invoke("q")
    [done] = seen
    for f in dataclasses.fields(ModelResponse):
        if f.name != "resolved":
            assert getattr(done, f.name) == getattr(original, f.name), f.name
    assert done.resolved == ResolvedModel(provider="p", model="alias", source="configured")
    primary = ScriptedModel([ProviderError("down", status=503, retryable=True)], profile=TEXT_ONLY)
    backup = ScriptedModel([ModelResponse(message=AssistantMessage(text="y"))], model_name="small", profile=TEXT_ONLY)
    policy = RunPolicy(fallback=FallbackPolicy([backup]), retry=RetryPolicy(max_attempts=1))
    await AgentHarness(model=primary, policy=policy, middleware=[Record()]).invoke("q")
    bare = seen[-1]
    assert (bare.model, bare.provider) == ("small", "test")
    assert bare.resolved == ResolvedModel(provider="test", model="small", source="fallback")


async def test_a_capability_routed_model_gets_a_request_refitted_to_its_window_and_is_announced() -> None:
    history: list[Message] = []
    for i in range(40):
        history += [UserMessage(text=f"question {i} " * 60), AssistantMessage(text=f"answer {i} " * 60)]
    history.append(UserMessage(text="what is in the picture?"))
    wide = ModelProfile(name="wide", provider="scripted", context_window=200_000, supports_vision=False)
    narrow = ModelProfile(
        name="eyes", provider="scripted", context_window=3_000, max_output_tokens=300, supports_vision=True
    )
    primary = ScriptedModel(["never"], model_name="wide", profile=wide)
    eyes = ScriptedModel(["a cat"], model_name="eyes", profile=narrow)
    harness = AgentHarness(
        model=primary, policy=RunPolicy(fallback=FallbackPolicy([eyes])), middleware=[Require(vision=True)]
    )
    run, events = await harness.invoke_with_events(history)
    assert run.final_text == "a cat"
    estimator = TokenEstimator.for_model("eyes")
    assert estimator.estimate(history) > 12_000  # the harness's window took it all
    sent = eyes.requests[0].messages
    assert estimator.estimate(sent) <= 3_000 - 300  # the routed model's own window
    assert sent[-1] == UserMessage(text="what is in the picture?")
    (selected,) = [e for e in events if e.kind == "model.selected"]
    assert (selected.model, selected.reason) == ("eyes", "capabilities")  # type: ignore[attr-defined]


class PickModel(Middleware):
    def __init__(self, name: str) -> None:
        self.wanted = name

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        import dataclasses

        return dataclasses.replace(request, model=self.wanted)


async def test_request_model_set_by_middleware_is_honoured_or_raises() -> None:
    primary = ScriptedModel(["from primary"], model_name="small", profile=TEXT_ONLY)
    other = ScriptedModel(["from big"], model_name="big", profile=SEEING)
    policy = RunPolicy(fallback=FallbackPolicy([other]))
    run, events = await AgentHarness(model=primary, policy=policy, middleware=[PickModel("big")]).invoke_with_events(
        "q"
    )
    assert run.final_text == "from big"
    assert primary.requests == []
    (selected,) = [e for e in events if e.kind == "model.selected"]
    assert (selected.model, selected.reason) == ("big", "request")  # type: ignore[attr-defined]

    lonely = ScriptedModel(["never"], model_name="small", profile=TEXT_ONLY)
    with pytest.raises(ModelNotFound, match="no-such-model"):
        await AgentHarness(model=lonely, middleware=[PickModel("no-such-model")]).invoke("q")
    assert lonely.requests == []  # never silently sent to the configured model instead

    same = ScriptedModel(["fine"], model_name="small", profile=TEXT_ONLY)
    run = await AgentHarness(model=same, middleware=[PickModel("test:small")]).invoke("q")  # its own name
    assert run.final_text == "fine"
