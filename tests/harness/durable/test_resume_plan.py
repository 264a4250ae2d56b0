"""Resuming from journals written step by step: unanswered calls, refusals, damaged stores (in process, fast)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ApprovalDesk,
    ConfigurationError,
    ProviderError,
    ToolCall,
    ToolMessage,
    tool,
)
from tinyagents_nb.harness.durable import DurableJournal, RunStore, RunStoreCorrupt
from tinyagents_nb.harness.testkit import ScriptedModel

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
def plain(x: int) -> str:
    """Not idempotent."""
    ran.append(f"plain {x}")
    return f"plain {x}"


@tool(requires_approval=True)
def guarded(x: int) -> str:
    """Needs a person."""
    ran.append(f"guarded {x}")
    return "guarded"


def _journal(store: RunStore, run_id: str, calls: list[ToolCall], *, started: set[str], status: str = "failed") -> None:
    """A run that made ``calls`` in one turn and died before answering them (``started``: which began)."""
    store.start_run(run_id, agent=None, model=None, prompt="go")
    store.add_step(run_id, "input", {"messages": [{"role": "user", "text": "go"}]})
    message = {
        "role": "assistant",
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
    }
    store.add_step(run_id, "model", {"message": message, "usage": {}, "model": "m"})
    for call in calls:
        if call.id in started:
            store.add_step(run_id, "tool.started", {"id": call.id, "name": call.name})
    store.end_run(run_id, status)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    ran.clear()
    return RunStore(tmp_path / "runs.sqlite")


async def test_calls_that_never_started_run_now_unless_they_need_approval(store: RunStore) -> None:
    calls = [
        ToolCall(id="a", name="plain", arguments={"x": 1}),
        ToolCall(id="b", name="guarded", arguments={"x": 2}),
        ToolCall(id="c", name="missing", arguments={}),
    ]
    _journal(store, "run-old", calls, started=set())
    model = ScriptedModel(["finished"])
    run = await AgentHarness(model=model, tools=[plain, guarded]).resume("run-old", store=store)
    assert run.final_text == "finished"
    assert ran == ["plain 1"]  # the pending approval is asked again: headless, nobody answers, so it is skipped
    answers = {m.tool_call_id: m for m in run.messages if isinstance(m, ToolMessage)}
    assert answers["a"].text == "plain 1"
    assert answers["b"].is_error
    assert "was not run" in answers["b"].text
    assert answers["c"].is_error
    sent = model.requests[0].messages
    assert [type(m).__name__ for m in sent] == ["UserMessage", "AssistantMessage", *["ToolMessage"] * 3]


async def test_approved_again_a_pending_or_interrupted_call_runs_once(store: RunStore) -> None:
    calls = [ToolCall(id="a", name="plain", arguments={"x": 1}), ToolCall(id="b", name="guarded", arguments={"x": 2})]
    _journal(store, "run-old", calls, started={"a"})  # a: killed inside; b: killed while its approval waited
    harness = AgentHarness(model=ScriptedModel(["finished"]), tools=[plain, guarded])
    harness.policy = replace(harness.policy, unattended_approval="approve")
    run = await harness.resume("run-old", store=store)
    assert sorted(ran) == ["guarded 2", "plain 1"]  # each exactly once, after its decision
    answers = {m.tool_call_id: m.text for m in run.messages if isinstance(m, ToolMessage)}
    assert answers == {"a": "plain 1", "b": "guarded"}


async def test_a_person_decides_at_the_approval_desk_of_the_resumed_run(store: RunStore) -> None:
    _journal(store, "run-old", [ToolCall(id="a", name="plain", arguments={"x": 1})], started={"a"})
    harness = AgentHarness(model=ScriptedModel(["finished"]), tools=[plain])
    ctx_desk = ApprovalDesk(attended=True)

    async def deny_when_asked() -> None:
        while not ctx_desk.pending():  # noqa: ASYNC110 - the desk has no event to wait on
            await anyio.sleep(0.01)
        (request,) = ctx_desk.pending()
        assert request.tool_name == "plain"
        ctx_desk.deny(request.call_id, reason="already charged")

    async with anyio.create_task_group() as tg:
        tg.start_soon(deny_when_asked)
        run = await harness.resume("run-old", store=store, approvals=ctx_desk)
    assert ran == []
    (answer,) = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert "not run again" in answer.text
    assert "already charged" in answer.text


async def test_an_interrupted_non_idempotent_call_is_not_run_again(store: RunStore) -> None:
    _journal(store, "run-old", [ToolCall(id="a", name="plain", arguments={"x": 1})], started={"a"})
    run = await AgentHarness(model=ScriptedModel(["ok"]), tools=[plain]).resume("run-old", store=store)
    assert ran == []
    (answer,) = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert answer.is_error
    assert "may or may not have taken effect" in answer.text


async def test_completed_resumed_and_unknown_runs_are_refused(store: RunStore) -> None:
    harness = AgentHarness(model=ScriptedModel(["ok", "ok"]), tools=[plain])
    _journal(store, "run-done", [], started=set(), status="completed")
    with pytest.raises(ConfigurationError, match="nothing to resume"):
        await harness.resume("run-done", store=store)
    with pytest.raises(ConfigurationError, match="no run"):
        await harness.resume("run-nope", store=store)
    _journal(store, "run-old", [ToolCall(id="a", name="plain", arguments={"x": 1})], started={"a"})
    await harness.resume("run-old", store=store)
    with pytest.raises(ConfigurationError, match="already resumed"):
        await harness.resume("run-old", store=store)


def test_a_store_with_damaged_tables_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 1")  # claims to be a run store, but has no tables
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(RunStoreCorrupt, match="damaged"):
        RunStore(path)
    assert path.read_bytes() == before


async def test_a_resumed_run_that_fails_again_keeps_the_whole_spend_for_the_next_resume(store: RunStore) -> None:
    store.start_run("run-old", agent=None, model=None, prompt="go")
    store.add_step("run-old", "input", {"messages": [{"role": "user", "text": "go"}]})
    message = {"role": "assistant", "tool_calls": [{"id": "a", "name": "plain", "arguments": {"x": 1}}]}
    store.add_step("run-old", "model", {"message": message, "usage": {"input_tokens": 100}, "model": "m"})
    store.end_run("run-old", "failed")
    journal = DurableJournal(store)
    failing = AgentHarness(
        model=ScriptedModel([ProviderError("down again", retryable=False)]), tools=[plain], middleware=[journal]
    )
    with pytest.raises(ProviderError):
        await failing.resume("run-old", store=store)
    (second,) = [r for r in store.runs() if r.resumed_from == "run-old"]
    assert second.status == "failed"
    assert store.get("run-old").status == "resumed"  # type: ignore[union-attr]
    last = AgentHarness(model=ScriptedModel(["finished"]), tools=[plain], middleware=[DurableJournal(store)])
    run = await last.resume(second.run_id, store=store)
    assert run.final_text == "finished"
    assert run.usage.input_tokens >= 100  # the first run's spend is still counted two resumes later
    assert ran == ["plain 1"]  # the call answered by the first resume is not run again
