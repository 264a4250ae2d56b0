"""Structured output picks a strategy per host and falls back once when the host shows it lacks it.

Against a real 127.0.0.1 replay server with the answers two real local servers gave: llama.cpp's
``llama-server`` ignores a forced (named) ``tool_choice`` and answers in text, while it honours a
``json_schema`` response format; llama-cpp-python's server rejects ``json_schema`` with HTTP 500 and
honours the forced tool. The fallback is remembered per model, so the next run asks the right way
at once.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from tests.harness.recorded import Recording
from tests.harness.replay_server import ReplayServer, chat_completion, error_body
from tinyagents_nb.harness import AgentHarness, ProviderError, RetryPolicy, RunContext, RunPolicy
from tinyagents_nb.harness.models import profile_for
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.002)
# llama-cpp-python's server's real answer to a json_schema response format (a 500; not retried: it
# names the request's own fields), recorded in tests/fixtures/llama-cpp-python/
REJECTED = Recording.load("llama-cpp-python", "structured_json_schema")


class Weather(BaseModel):
    city: str
    celsius: float


ANSWER = json.dumps({"city": "Rome", "celsius": 21})


def model_on(server: ReplayServer, name: str = "compatible") -> OpenAIChatModel:
    return OpenAIChatModel("smollm2", provider=ProviderSpec.compatible(base_url=server.base_url, name=name))


def harness(model: OpenAIChatModel, **policy: object) -> AgentHarness[None]:
    return AgentHarness(model=model, output_type=Weather, policy=RunPolicy(retry=FAST, **policy))  # type: ignore[arg-type]


def test_local_hosts_default_to_a_json_schema_response_format() -> None:
    for provider in ("compatible", "ollama"):
        assert profile_for(provider, "smollm2").structured_output == "native"
    assert profile_for("groq", "llama-3.3-70b-versatile").structured_output == "tool"


async def test_a_host_rejecting_json_schema_falls_back_to_a_tool_call_once_and_remembers(
    replay_server: ReplayServer,
) -> None:
    REJECTED.enqueue(replay_server)
    replay_server.enqueue(200, chat_completion(tool_calls=[("call_1", "Weather", ANSWER)]))
    replay_server.enqueue(200, chat_completion(tool_calls=[("call_2", "Weather", ANSWER)]))
    model = model_on(replay_server)
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run, _ = await harness(model).invoke_with_status(ctx, "Weather in Rome?")
    assert run.status == "completed", run.error
    assert run.structured is not None
    assert run.structured.value == Weather(city="Rome", celsius=21)
    bodies = [r.body for r in replay_server.requests]
    assert bodies[0]["response_format"]["type"] == "json_schema"
    assert "tools" not in bodies[0]
    assert bodies[-1]["tool_choice"] == {"type": "function", "function": {"name": "Weather"}}
    assert "response_format" not in bodies[-1]
    (note,) = [e for e in rec.of_kind("structured.repair") if e.attempt == 0]  # type: ignore[attr-defined]
    assert note.strategy == "tool"  # type: ignore[attr-defined]
    assert "response format" in note.error  # type: ignore[attr-defined]

    sent = len(replay_server.requests)
    second, _ = await harness(model).invoke_with_status(RunContext(), "And in Oslo?")  # a new harness, same model
    await model.aclose()
    assert second.status == "completed", second.error
    assert len(replay_server.requests) == sent + 1  # straight to the tool call: the fallback was remembered
    assert "tool_choice" in replay_server.requests[-1].body


async def test_a_host_ignoring_the_forced_tool_falls_back_to_json_schema(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion("The weather in Rome is sunny."))  # tool_choice ignored
    replay_server.enqueue(200, chat_completion(ANSWER))
    model = model_on(replay_server, name="gateway")  # an unknown host: a forced tool call first
    run, _ = await harness(model).invoke_with_status(RunContext(), "Weather in Rome?")
    await model.aclose()
    assert run.status == "completed", run.error
    assert run.structured is not None
    assert run.structured.value == Weather(city="Rome", celsius=21)
    first, second = (r.body for r in replay_server.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "Weather"}}
    assert second["response_format"]["type"] == "json_schema"
    assert [m["role"] for m in second["messages"]] == ["user"]  # the ignored text answer is not sent back


async def test_a_strategy_the_user_chose_is_kept(replay_server: ReplayServer) -> None:
    REJECTED.enqueue(replay_server)
    model = model_on(replay_server, name="pinned")
    run, _ = await harness(model, structured_strategy="native").invoke_with_status(RunContext(), "Weather?")
    await model.aclose()
    assert run.status == "failed"
    assert isinstance(run.error, ProviderError)
    assert len(replay_server.requests) == 1  # the body failed validation: sending it again would too


async def test_other_errors_do_not_change_the_strategy(replay_server: ReplayServer) -> None:
    replay_server.enqueue(400, error_body("Invalid value for 'temperature'"))
    model = model_on(replay_server, name="other")
    run, _ = await harness(model).invoke_with_status(RunContext(), "Weather?")
    await model.aclose()
    assert run.status == "failed"
    assert len(replay_server.requests) == 1
