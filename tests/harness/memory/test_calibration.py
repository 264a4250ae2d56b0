"""Prompt-token estimates learn each model's real count from what its provider reports.

A real 127.0.0.1 replay server answers with usage whose ``prompt_tokens`` run well above the
estimate (as a real server with another tokenizer does: 1.45x for Norwegian, 2.5x for Chinese).
After one response the fitter's estimates for that model carry the ratio, so the next request is
fitted with it and the gauge shows the provider's measurement.
"""

from __future__ import annotations

import uuid

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, usage_body
from tinyagents_nb.harness import AgentHarness, ContextWindow, ModelRequest, RunContext, RunPolicy, Usage, UserMessage
from tinyagents_nb.harness.models import calibration_for
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio

NORWEGIAN = "Været i Tromsø er kaldt og vindfullt om vinteren, men nordlyset gjør det verdt det. "


def model_on(server: ReplayServer) -> OpenAIChatModel:
    name = f"calibrated-{uuid.uuid4().hex[:8]}"  # the calibration lives for the process, keyed by model
    return OpenAIChatModel(name, provider=ProviderSpec.compatible(base_url=server.base_url))


async def test_reported_prompt_tokens_calibrate_the_next_estimate_and_the_gauge(replay_server: ReplayServer) -> None:
    model = model_on(replay_server)
    window = ContextWindow(model=model.model_name, max_tokens=100_000, reserved_output_tokens=1_000)
    harness: AgentHarness[None] = AgentHarness(model=model, context_window=window, policy=RunPolicy())
    question = [UserMessage(text=NORWEGIAN * 8)]
    raw = harness.fitter.request_tokens(ModelRequest(messages=question))
    replay_server.enqueue(200, chat_completion("Ja.", usage=usage_body(raw * 2, 2)))
    ctx = RunContext()
    run, _ = await harness.invoke_with_status(ctx, question)
    await model.aclose()
    assert run.status == "completed", run.error
    assert ctx.context_window is not None
    assert ctx.context_window.measured_prompt_tokens == raw * 2  # the provider's count, not the guess
    assert harness.fitter.request_tokens(ModelRequest(messages=question)) == raw * 2
    learnt = calibration_for(f"compatible:{model.model_name}")
    assert learnt is not None
    assert (learnt.ratio, learnt.samples, learnt.last_reported) == (2.0, 1, raw * 2)
    # a new harness on the same model starts calibrated (the session remembers the model)
    again: AgentHarness[None] = AgentHarness(model=model, context_window=window)
    assert again.fitter.request_tokens(ModelRequest(messages=question)) == raw * 2


async def test_a_calibrated_estimate_trims_a_request_the_raw_estimate_would_have_sent(
    replay_server: ReplayServer,
) -> None:
    model = model_on(replay_server)
    history = [UserMessage(text=f"{i}: {NORWEGIAN}") for i in range(40)]
    probe: AgentHarness[None] = AgentHarness(model=model)
    raw = probe.fitter.request_tokens(ModelRequest(messages=history))
    # the first call teaches the ratio 1.45 (what Norwegian cost on a real Llama tokenizer)
    replay_server.enqueue(200, chat_completion("ok", usage=usage_body(int(raw * 1.45), 2)))
    await probe.invoke(history)
    # a window the raw estimate fits, the real count does not
    window = ContextWindow(model=model.model_name, max_tokens=int(raw * 1.2) + 100, reserved_output_tokens=100)
    replay_server.enqueue(200, chat_completion("ok", usage=usage_body(100, 2)))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    harness: AgentHarness[None] = AgentHarness(model=model, context_window=window)
    run, _ = await harness.invoke_with_status(ctx, history)
    await model.aclose()
    assert run.status == "completed", run.error
    assert rec.of_kind("context.pressure"), "the calibrated estimate did not fit, so the chain relieved it"
    sent = replay_server.requests[-1].body["messages"]
    assert len(sent) < len(history)
    assert ctx.context_window is not None
    assert ctx.context_window.estimated_prompt_tokens <= window.usable_tokens


async def test_the_testkits_made_up_usage_teaches_nothing() -> None:
    model = ScriptedModel([ScriptedModel.text("ok", usage=Usage(input_tokens=90_000, output_tokens=1))])
    harness: AgentHarness[None] = AgentHarness(model=model, context_window=200_000)
    await harness.invoke(NORWEGIAN * 4)
    assert calibration_for(f"{model.provider}:{model.model_name}") is None
