"""Exact prompt-token counts from the host (``RunPolicy(token_counting="exact")``), against a 127.0.0.1 fake llama.cpp.

The fake serves what ``llama-server`` serves for counting: ``/apply-template`` renders a chat body
with a ChatML template, ``/tokenize`` splits text with a small regex tokenizer (special tokens whole,
like llama.cpp with ``parse_special``), and ``/v1/chat/completions`` reports the prompt tokens of the
same rendering. tests/realserver/test_exact_counts.py checks the same against the real server.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

import pytest

from tests.harness.fake_llama import FakeLlama, render, tokens
from tests.harness.replay_server import ReplayServer
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ContextLimitError,
    ContextWindow,
    ModelRequest,
    RunContext,
    RunLimits,
    RunPolicy,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.providers import HostTokenCounter, OpenAIChatModel, ProviderSpec

pytestmark = pytest.mark.anyio


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"the value of {key} is " + "long " * 20


def model_on(server: ReplayServer) -> OpenAIChatModel:
    name = f"exact-{uuid.uuid4().hex[:8]}"  # counters and calibrations live for the process, per host and model
    return OpenAIChatModel(name, provider=ProviderSpec.compatible(base_url=server.base_url))


def exact_harness(model: OpenAIChatModel, window: int = 100_000) -> AgentHarness[None]:
    return AgentHarness(
        model=model,
        tools=[lookup],
        context_window=ContextWindow(model=model.model_name, max_tokens=window, reserved_output_tokens=100),
        policy=RunPolicy(token_counting="exact", limits=RunLimits(max_model_calls=30)),
    )


async def test_a_long_run_is_counted_exactly_and_tokenizes_each_turn_once(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server, tool_turns=12)
    model = model_on(replay_server)
    ctx = RunContext()
    run, _ = await exact_harness(model).invoke_with_status(ctx, "Look up twelve items, one at a time.")
    await model.aclose()
    assert run.status == "completed", run.error
    counter = model.host_token_counter
    assert fake.calls["/v1/chat/completions"] == 13
    assert fake.calls["/apply-template"] == 13  # rendered once per request
    assert (counter.mode, counter.checked, counter.agreed) == ("pieces", 13, 13)  # every count equals the usage
    # each piece (the tool block, each message, the reply's opening) was tokenized once: no history again
    pieces = 1 + 1 + 2 * 12 + 1  # tools, user, 12x (call, result), the reply opener
    assert sum(text.count("<|im_start|>") for text in fake.tokenized) == pieces == counter.cached_pieces
    assert fake.calls["/tokenize"] == 2 + 12  # the first request's pieces in two, then one per step
    window = ctx.context_window
    assert window is not None
    assert window.exact
    assert (
        window.estimated_prompt_tokens
        == window.measured_prompt_tokens
        == run.usage.input_tokens - sum(r.usage.input_tokens for r in ctx.usage.records[:-1])
    )


async def test_the_default_estimates_and_asks_the_host_nothing(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server, tool_turns=2)
    model = model_on(replay_server)
    harness: AgentHarness[None] = AgentHarness(model=model, tools=[lookup], context_window=100_000)
    ctx = RunContext()
    run, _ = await harness.invoke_with_status(ctx, "Look up two items.")
    await model.aclose()
    assert run.status == "completed", run.error
    assert fake.calls["/apply-template"] == fake.calls["/tokenize"] == 0
    assert ctx.context_window is not None
    assert not ctx.context_window.exact


async def test_a_host_without_the_endpoints_is_asked_once_per_session(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server, tool_turns=3)
    replay_server.routes["/apply-template"] = lambda body: (404, {"error": {"code": 404, "message": "File Not Found"}})
    model = model_on(replay_server)
    for _ in range(2):  # a second harness and run, as the next notebook cell would make
        ctx = RunContext()
        run, _ = await exact_harness(model).invoke_with_status(ctx, "Look up three items.")
        assert run.status == "completed", run.error
        assert ctx.context_window is not None
        assert not ctx.context_window.exact
    again = OpenAIChatModel(model.model_name, provider=ProviderSpec.compatible(base_url=replay_server.base_url))
    assert await again.count_prompt_tokens(ModelRequest(messages=(UserMessage(text="hi"),))) is None
    await model.aclose()
    paths = Counter(r.path for r in replay_server.requests)
    assert paths["/apply-template"] == 1  # one probe, no request storm
    assert fake.calls["/v1/chat/completions"] == 8
    counter = model.host_token_counter
    assert counter.mode == "off"
    assert counter.reason is not None
    assert "/apply-template" in counter.reason
    assert "404" in counter.reason


async def test_a_slow_host_costs_a_bounded_wait_then_is_left_alone(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server)
    fake.delay_s = 1.0
    model = model_on(replay_server)
    request = ModelRequest(messages=(UserMessage(text="How long is a piece of string?"),))
    for attempt in range(3):
        started = time.perf_counter()
        assert await model.count_prompt_tokens(request, timeout_s=0.2) is None
        assert time.perf_counter() - started < 0.8
        assert model.host_token_counter.mode == ("off" if attempt == 2 else "pieces")
    assert await model.count_prompt_tokens(request, timeout_s=0.2) is None
    await model.aclose()
    assert fake.calls["/apply-template"] == 3  # off after three timeouts in a row: nothing more is asked
    assert "no count within 0.2s, 3 times in a row" in str(model.host_token_counter.reason)


async def test_an_error_costs_one_count_and_a_success_resets_the_tally(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server)
    model = model_on(replay_server)
    request = ModelRequest(messages=(UserMessage(text="one two three"),))
    answers = iter([(500, {"error": "busy"}), (500, {"error": "busy"})])
    replay_server.routes["/apply-template"] = lambda body: next(answers, None) or fake.apply_template(body)
    assert await model.count_prompt_tokens(request) is None
    assert await model.count_prompt_tokens(request) is None
    exact = await model.count_prompt_tokens(request)
    assert exact == tokens(render({"messages": [{"role": "user", "content": "one two three"}]})) + 1
    replay_server.routes["/apply-template"] = lambda body: (500, {"error": "busy"})
    assert await model.count_prompt_tokens(request) is None
    assert model.host_token_counter.mode == "pieces"  # two failures, a success, one failure: still counting
    await model.aclose()


async def test_counts_that_disagree_with_the_usage_switch_to_whole_prompts_then_off(
    replay_server: ReplayServer,
) -> None:
    FakeLlama(replay_server, misreport=2)
    model = model_on(replay_server)
    counter = model.host_token_counter
    run = await exact_harness(model).invoke("hello")
    assert run.status == "completed"
    assert counter.mode == "whole"
    assert counter.reason is not None
    assert "added up to" in counter.reason
    run = await exact_harness(model).invoke("hello again")
    await model.aclose()
    assert (counter.mode, counter.checked, counter.agreed) == ("off", 2, 0)


async def test_the_exact_count_refuses_what_the_estimate_would_have_sent(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server)
    model = model_on(replay_server)
    text = "a-b-c-d " * 60  # 7 tokens a word here, about 2 for the estimator
    harness = exact_harness(model, window=400)
    request = ModelRequest(messages=(UserMessage(text=text),))
    assert harness.fitter.request_tokens(request) < 300  # the estimate would have sent it
    with pytest.raises(ContextLimitError, match="counted by the host") as raised:
        await harness.invoke(text)
    await model.aclose()
    assert raised.value.estimated_tokens is not None
    assert raised.value.estimated_tokens > 400
    assert fake.calls["/v1/chat/completions"] == 0  # refused before sending


async def test_the_exact_count_trims_history_to_the_window(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server)
    model = model_on(replay_server)
    harness = exact_harness(model, window=700)
    history: list[Any] = []
    for turn in range(6):
        history += [UserMessage(text=f"turn {turn}: " + "a-b-c-d " * 12), AssistantMessage(text=f"noted {turn}")]
    history.append(UserMessage(text="and now?"))
    assert harness.fitter.request_tokens(ModelRequest(messages=tuple(history))) < 600  # the estimate: it fits
    ctx = RunContext()
    run, _ = await harness.invoke_with_status(ctx, history)
    await model.aclose()
    assert run.status == "completed", run.error
    sent = fake.calls["/v1/chat/completions"]
    assert sent == 1
    window = ctx.context_window
    assert window is not None
    assert window.exact
    assert window.measured_prompt_tokens is not None
    assert window.measured_prompt_tokens <= window.usable_tokens
    assert window.measured_prompt_tokens == window.estimated_prompt_tokens


async def test_pieces_that_do_not_split_by_the_marker_are_asked_one_by_one(replay_server: ReplayServer) -> None:
    fake = FakeLlama(replay_server)
    plain = fake.tokenize

    def no_pieces(body: Any) -> tuple[int, Any]:  # an answer without the marker's piece: no split possible
        status, answer = plain(body)
        if body.get("with_pieces"):
            answer = {"tokens": [{"id": t["id"], "piece": "?"} for t in answer["tokens"]]}
        return status, answer

    replay_server.routes["/tokenize"] = no_pieces
    model = model_on(replay_server)
    messages = ({"role": "user", "content": "one two"}, {"role": "assistant", "content": "three"})
    request = ModelRequest(messages=(UserMessage(text="one two"), AssistantMessage(text="three")))
    counted = await model.count_prompt_tokens(request)
    await model.aclose()
    assert counted == tokens(render({"messages": list(messages)})) + 1
    assert fake.calls["/tokenize"] == 1 + 3  # the joint request, then each of the three pieces


def test_the_counters_printout_never_shows_credentials_in_the_host_url() -> None:
    counter = HostTokenCounter("http://user:sk-secret-1@127.0.0.1:9/root?key=sk-secret-2")
    shown = repr(counter)
    assert "sk-secret" not in shown
    assert "user" not in shown
    assert "127.0.0.1:9/root" in shown
