"""RLM sessions joined to a chat thread's history, and closing a session."""

from __future__ import annotations

import anyio
import pytest

from tinyagents_nb.harness import AssistantMessage, ModelRequest, ModelResponse, UserMessage
from tinyagents_nb.harness.memory import InMemoryChatHistory
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.rlm import RLM, RLMError, RLMSession

from .test_rlm_recursion import fenced

pytestmark = pytest.mark.anyio


async def test_a_joined_session_shares_the_thread_with_chat_turns_both_ways() -> None:
    history = InMemoryChatHistory()
    history.append("t", [UserMessage(text="My budget is 3."), AssistantMessage(text="Noted: 3.")])
    model = ScriptedModel([fenced("FINAL(6 * 7)"), fenced("FINAL('ok')")])
    session = RLMSession("local", history=history, thread_id="t")
    rlm = RLM(model=model, environment="local")
    await rlm.invoke("Compute.", session=session)
    first = [(m.role, m.text) for m in model.requests[0].messages]
    assert first[1:3] == [("user", "My budget is 3."), ("assistant", "Noted: 3.")]  # before the first task
    assert first[3][1].startswith("Task:\nCompute.")
    assert [(m.role, m.text, tuple(m.tags)) for m in history.load("t")[2:]] == [
        ("user", "Compute.", ("rlm-thread",)),
        ("assistant", "42", ("rlm-thread",)),
    ]
    history.append("t", [UserMessage(text="Now halve it."), AssistantMessage(text="Sure.", tool_calls=())])
    await rlm.invoke("Halve.", session=session)
    sent = [(m.role, m.text) for m in model.requests[-1].messages]
    assert sent.count(("user", "My budget is 3.")) == 1  # earlier turns are in the transcript once
    assert sent[-3:-1] == [("user", "Now halve it."), ("assistant", "Sure.")]
    assert sent[-1][1].startswith("Next task:\nHalve.")
    with pytest.raises(RLMError, match="both history= and thread_id="):
        RLMSession("local", history=history)


async def test_closing_a_session_stops_its_repl_now_or_when_its_run_ends() -> None:
    session = RLMSession("local")
    rlm = RLM(model=ScriptedModel([fenced("x = 1\nFINAL(x)")]), environment="local")
    await rlm.invoke("Go.", session=session)
    session.close()
    assert session.closed
    with pytest.raises(RLMError, match="closed"):
        await rlm.invoke("Again.", session=session)
    # closed during a run: the run finishes, then the REPL stops
    gate = anyio.Event()
    started = anyio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        started.set()
        await gate.wait()
        return fenced("FINAL(2)")

    busy = RLMSession("local")
    slow_rlm = RLM(model=FunctionModel(slow), environment="local")
    result: list[str] = []

    async def run() -> None:
        result.append((await slow_rlm.invoke("Wait.", session=busy)).final_text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        busy.close()
        assert not busy.closed  # still running
        gate.set()
    assert result == ["2"]
    assert busy.closed


async def test_an_idle_session_closes_itself_and_a_used_one_stays_open() -> None:
    model = ScriptedModel([fenced("x = 41\nFINAL(x)"), fenced("FINAL(x + 1)"), fenced("FINAL(0)")])
    rlm = RLM(model=model, environment="local")
    session = RLMSession("local", idle_timeout_s=0.6)
    await rlm.invoke("First.", session=session)
    await anyio.sleep(0.2)
    second = await rlm.invoke("Second.", session=session)  # within the timeout: the REPL was kept
    assert second.final_text == "42"
    with anyio.fail_after(10):
        while not session.closed:  # noqa: ASYNC110  (a timer thread closes it: no event to await)
            await anyio.sleep(0.05)
    assert "closed" in repr(session)
    with pytest.raises(RLMError, match=r"closed after 0.6 s without a run \(idle_timeout_s\)"):
        await rlm.invoke("Third.", session=session)
    with pytest.raises(RLMError, match="idle_timeout_s must be"):
        RLMSession("local", idle_timeout_s=0)
