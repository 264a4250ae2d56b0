"""Exact prompt-token counts (``RunPolicy(token_counting="exact")``) against the real llama.cpp server.

The estimator runs low against SmolLM2's tokenizer (about 1 % for English, 16 % for code, 45 % for
Norwegian, 2.5x for Chinese). Counted by the server's own ``/apply-template`` and ``/tokenize``, the
figure the fitter and the gauge use must equal the ``prompt_tokens`` the server then reports, for
every kind of text; and at the window's edge, where the estimate says a request fits, the exact
count must make the fitter refuse it or trim the history before anything is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.realserver.conftest import ALIAS, LlamaServer
from tests.realserver.wire import Tee, client
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ContextLimitError,
    ContextWindow,
    Message,
    ModelRequest,
    RunContext,
    RunPolicy,
    SystemMessage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = [pytest.mark.realserver, pytest.mark.anyio, pytest.mark.timeout(120)]

EXACT = RunPolicy(temperature=0.0, max_output_tokens=1, token_counting="exact")
CHAT = "/v1/chat/completions"

ENGLISH = (
    "The harbour was quiet before dawn. Fishing boats rocked against the pier while gulls circled the "
    "lighthouse, and the first ferry of the day sounded its horn as it left for the islands. "
)
CODE = (
    "def merge(left: list[int], right: list[int]) -> list[int]:\n"
    "    out, i, j = [], 0, 0\n"
    "    while i < len(left) and j < len(right):\n"
    "        if left[i] <= right[j]:\n            out.append(left[i]); i += 1\n"
    "        else:\n            out.append(right[j]); j += 1\n"
    "    return out + left[i:] + right[j:]\n"
)
NORWEGIAN = (
    "Været i Tromsø skifter fort om høsten: først sludd og vind fra havet, så klarvær og nordlys over "
    "fjellene. Ferjene går som vanlig, men bussene til flyplassen kan bli forsinket. "
)
CHINESE = "清晨的港口很安静，渔船靠在码头边轻轻摇晃，海鸥在灯塔上空盘旋，第一班渡轮鸣笛驶向远处的岛屿。"  # noqa: RUF001


@tool
def tide_table(harbour: str) -> str:
    """High and low tide times for a harbour."""
    return f"High tide in {harbour} at 06:12 and 18:40."


@pytest.fixture
async def tee() -> AsyncIterator[Tee]:
    recorder = Tee()
    yield recorder
    await recorder.aclose()


def local(llama: LlamaServer, tee: Tee) -> OpenAIChatModel:
    return OpenAIChatModel(ALIAS, provider=ProviderSpec.compatible(base_url=llama.base_url), http_client=client(tee))


def chats(tee: Tee) -> list[int]:
    """The statuses of the chat requests (counting requests left out)."""
    return [x.status for x in tee.exchanges if x.path == CHAT]


@pytest.mark.parametrize(
    ("text", "tools"),
    [(ENGLISH, False), (CODE, True), (NORWEGIAN, False), (CHINESE, False)],
    ids=["english", "code-with-tools", "norwegian", "chinese"],
)
async def test_the_exact_count_equals_the_servers_prompt_tokens(
    llama: LlamaServer, tee: Tee, text: str, tools: bool
) -> None:
    model = local(llama, tee)
    harness = AgentHarness(
        model=model, tools=[tide_table] if tools else [], policy=EXACT, context_window=ContextWindow(
            model=ALIAS, max_tokens=2048, reserved_output_tokens=16
        ),
    )  # fmt: skip
    messages: list[Message] = [
        SystemMessage(text="You are a careful assistant."),
        UserMessage(text=text),
        AssistantMessage(text="Noted."),
        UserMessage(text="Summarise it in one word."),
    ]
    estimate = harness.fitter.request_tokens(ModelRequest(messages=tuple(messages), tools=harness.tools.schemas()))
    ctx = RunContext()
    run, _ = await harness.invoke_with_status(ctx, messages)
    await harness.aclose()
    assert run.status == "completed", run.error
    (reported,) = [x.openai_usage()["prompt_tokens"] for x in tee.exchanges if x.path == CHAT]
    window = ctx.context_window
    assert window is not None
    assert window.exact
    assert window.estimated_prompt_tokens == reported == window.measured_prompt_tokens
    assert reported != estimate  # the estimator alone would have been off
    counter = model.host_token_counter
    assert counter.mode == "pieces"
    assert counter.agreed == counter.checked


async def test_a_request_the_estimate_would_send_is_refused_before_sending(llama: LlamaServer, tee: Tee) -> None:
    model = local(llama, tee)
    window = ContextWindow(model=ALIAS, max_tokens=512, reserved_output_tokens=16)
    harness = AgentHarness(model=model, policy=EXACT, context_window=window)
    text = CHINESE * 7
    assert harness.fitter.request_tokens(ModelRequest(messages=(UserMessage(text=text),))) < 496  # "fits"
    with pytest.raises(ContextLimitError, match="counted by the host") as raised:
        await harness.invoke(text)
    await harness.aclose()
    assert raised.value.estimated_tokens is not None
    assert raised.value.estimated_tokens > 496
    assert chats(tee) == []  # nothing was sent to the model


async def test_a_history_the_estimate_would_send_is_trimmed_to_the_window(llama: LlamaServer, tee: Tee) -> None:
    model = local(llama, tee)
    window = ContextWindow(model=ALIAS, max_tokens=512, reserved_output_tokens=16)
    harness = AgentHarness(model=model, policy=EXACT, context_window=window)
    history: list[Message] = []
    for n in range(6):
        history += [UserMessage(text=f"第{n}段：{CHINESE}"), AssistantMessage(text="好的。")]  # noqa: RUF001
    history.append(UserMessage(text="用一个词总结。"))
    assert harness.fitter.request_tokens(ModelRequest(messages=tuple(history))) < 496  # the estimate: it fits
    assert await model.count_prompt_tokens(ModelRequest(messages=tuple(history))) > 496  # it does not
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run, _ = await harness.invoke_with_status(ctx, history)
    await harness.aclose()
    assert run.status == "completed", run.error
    assert chats(tee) == [200]  # fitted before sending: no refusal, no reactive compaction
    actions = [e.action for e in rec.of_kind("context.pressure")]  # type: ignore[attr-defined]
    assert "trim" in actions
    assert "reactive" not in actions
    reported = tee.exchanges[-1].openai_usage()["prompt_tokens"]
    assert reported <= window.usable_tokens
    assert ctx.context_window is not None
    assert ctx.context_window.estimated_prompt_tokens == reported
