"""``RunConfig.configurable`` overrides a run's model settings (and its model) per run."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import AgentHarness, ConfigurationError, FallbackPolicy, RunConfig, RunPolicy, SubAgent
from tinyagents_nb.harness.models import CONFIGURABLE_KEYS
from tinyagents_nb.harness.testkit import ScriptedModel

pytestmark = pytest.mark.anyio


async def test_temperature_tokens_and_settings_override_the_policy() -> None:
    model = ScriptedModel(["a", "b"])
    policy = RunPolicy(temperature=0.7, max_output_tokens=500, model_settings={"top_p": 0.9, "seed": 1})
    harness = AgentHarness(model=model, policy=policy)
    await harness.invoke("x")
    config = RunConfig(
        configurable={"temperature": 0, "max_output_tokens": 64, "model_settings": {"seed": 7}, "user": "ann"}
    )
    await harness.invoke("x", config=config)
    plain, tuned = model.requests
    assert (plain.temperature, plain.max_output_tokens, dict(plain.settings)) == (0.7, 500, {"top_p": 0.9, "seed": 1})
    assert (tuned.temperature, tuned.max_output_tokens, dict(tuned.settings)) == (0.0, 64, {"top_p": 0.9, "seed": 7})


async def test_the_configs_per_turn_cap_still_binds() -> None:
    model = ScriptedModel(["a"])
    config = RunConfig(configurable={"max_output_tokens": 900}, max_turn_output_tokens=100)
    await AgentHarness(model=model).invoke("x", config=config)
    assert model.requests[0].max_output_tokens == 100


async def test_model_picks_one_of_the_harness_models_first() -> None:
    primary = ScriptedModel(["from primary"], model_name="small")
    backup = ScriptedModel(["from backup"], model_name="large")
    harness = AgentHarness(model=primary, policy=RunPolicy(fallback=FallbackPolicy([backup])))
    run, events = await harness.invoke_with_events("x", config=RunConfig(configurable={"model": "test:large"}))
    assert run.final_text == "from backup"
    assert primary.calls == 0
    (selected,) = [e for e in events if e.kind == "model.selected"]
    assert (selected.model, selected.reason) == ("large", "configurable")  # type: ignore[attr-defined]


async def test_an_unknown_model_fails_the_root_but_not_a_sub_agent() -> None:
    harness = AgentHarness(model=ScriptedModel(["a"], model_name="small"))
    run, _ = await harness.invoke_with_events("x", config=RunConfig(configurable={"model": "huge"}))
    assert isinstance(run.error, ConfigurationError)
    assert "huge" in str(run.error)
    child = SubAgent("helper", AgentHarness(model=ScriptedModel(["child ok"], model_name="tiny")), description="d")
    root_model = ScriptedModel([ScriptedModel.tool_call("helper", {"input": "q"}), "root ok"], model_name="huge")
    root = AgentHarness(model=root_model, tools=[child.as_tool()])
    run = await root.invoke("x", config=RunConfig(configurable={"model": "huge"}))
    assert run.final_text == "root ok"
    assert "child ok" in run.messages[-2].text


@pytest.mark.parametrize(
    ("configurable", "match"),
    [
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"model_settings": [1]}, "model_settings"),
        ({"model": 3}, "model"),
    ],
)
async def test_bad_values_fail_before_any_model_call(configurable: dict[str, object], match: str) -> None:
    model = ScriptedModel(["a"])
    run, events = await AgentHarness(model=model).invoke_with_events("x", config=RunConfig(configurable=configurable))
    assert isinstance(run.error, ConfigurationError)
    assert match in str(run.error)
    assert model.calls == 0
    assert events[-1].kind == "run.failed"


def test_the_documented_keys() -> None:
    assert CONFIGURABLE_KEYS == ("max_output_tokens", "model", "model_settings", "temperature")
