"""``resume_streaming``: a resumed run as a handle, its open calls asked about inside the run (in process, fast)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AgentStream,
    ApprovalError,
    ConfigurationError,
    RunContext,
    RunPolicy,
    ToolCall,
    ToolMessage,
)
from tinyagents_nb.harness.durable import DurableJournal, RunStore, resume_streaming
from tinyagents_nb.harness.events import ApprovalDecided
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

from .test_resume_plan import _journal, guarded, plain, ran

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    ran.clear()
    return RunStore(tmp_path / "runs.sqlite")


CALLS = [ToolCall(id="a", name="plain", arguments={"x": 1}), ToolCall(id="b", name="guarded", arguments={"x": 2})]


def _harness(store: RunStore, *, journaled: bool = True) -> AgentHarness[None]:
    middleware = [DurableJournal(store, model="m")] if journaled else []
    return AgentHarness(model=ScriptedModel(["finished"]), tools=[plain, guarded], middleware=middleware)


async def _answer_when_asked(stream: AgentStream, decide: dict[str, str], asked: dict[str, bool]) -> None:
    """Answer each request as it arrives (``decide``: call id -> "approve" | "deny"); ``asked`` gets its ``rerun``."""
    desk = stream.approvals
    while len(asked) < len(decide):
        for request in desk.pending():
            if request.call_id not in asked:
                asked[request.call_id] = request.rerun
                if decide[request.call_id] == "approve":
                    desk.approve(request.call_id)
                else:
                    desk.deny(request.call_id, reason="done by hand")
        await anyio.sleep(0.01)


async def test_the_handle_asks_inside_the_run_and_marks_the_cut_off_call_a_rerun(store: RunStore) -> None:
    _journal(store, "run-old", CALLS, started={"a"})  # a: killed inside it; b: its approval was pending
    store.add_step("run-old", "carried", {"spent": [{"usage": {"input_tokens": 7}, "model": "m"}]})  # spent before
    ctx: RunContext[None] = RunContext()
    stream = resume_streaming(_harness(store), "run-old", store=store, context=ctx)
    kinds: list[str] = []
    requests: dict[str, bool] = {}
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_answer_when_asked, stream, {"a": "approve", "b": "deny"}, requests)
            async for event in stream:
                kinds.append(event.kind)
    run = await stream.result()
    assert kinds.index("run.started") < kinds.index("approval.requested")  # inside the run: its Stop applies
    assert requests == {"a": True, "b": False}  # the cut-off call is asked as "run again?"
    assert ran == ["plain 1"]
    answers = {m.tool_call_id: m for m in run.messages if isinstance(m, ToolMessage)}
    assert answers["a"].text == "plain 1"
    assert answers["b"].is_error
    assert "done by hand" in answers["b"].text
    assert run.usage.input_tokens == 7  # the spend already recorded is the new run's too
    assert store.get("run-old").resumed_by == run.run_id  # type: ignore[union-attr]
    assert store.get(run.run_id).resumed_from == "run-old"  # type: ignore[union-attr]


@pytest.mark.parametrize("journaled", [True, False])
async def test_a_stop_while_a_call_waits_leaves_the_original_resumable(store: RunStore, journaled: bool) -> None:
    _journal(store, "run-old", CALLS, started={"a"})
    stream = resume_streaming(_harness(store, journaled=journaled), "run-old", store=store)

    async def stop_when_asked() -> None:
        while not stream.approvals.pending():  # noqa: ASYNC110 - the desk has no event to wait on
            await anyio.sleep(0.01)
        stream.cancel("stopped on the card")

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_asked)
        run = await stream.wait()
    assert run.status == "cancelled"
    assert ran == []
    # The job stays resumable: the original (nothing of the stopped run journaled yet) or, when the
    # resumed run is journaled from before settling, the stopped run itself.
    original = store.get("run-old")
    assert original is not None
    left = "run-old" if original.status == "failed" else run.run_id
    if journaled and left == run.run_id:
        assert original.resumed_by == run.run_id
    again = resume_streaming(_harness(store, journaled=journaled), left, store=store)
    again.approvals.attended = False  # nobody to ask now: the policy skips both with a note
    resumed = await again.result()
    assert resumed.final_text == "finished"
    assert ran == []
    assert store.get(left).resumed_by == resumed.run_id  # type: ignore[union-attr]


async def test_refusals_come_before_a_handle_exists(store: RunStore) -> None:
    _journal(store, "run-done", CALLS, started=set(), status="completed")
    with pytest.raises(ConfigurationError, match="completed"):
        resume_streaming(_harness(store), "run-done", store=store)


@pytest.mark.parametrize(
    ("action", "ran_after", "status"),
    [("deny", [], "completed"), ("approve", ["plain 1"], "completed"), ("fail", [], "failed")],
)
async def test_an_unanswered_question_on_resume_follows_the_policys_timeout_and_its_action(
    store: RunStore, action: str, ran_after: list[str], status: str
) -> None:
    # Nobody answers the cut-off call's card: the policy's timeout ends the wait with the policy's action.
    _journal(store, "run-old", CALLS[:1], started={"a"})
    policy = RunPolicy(approval_timeout_s=0.2, approval_timeout_action=action)  # type: ignore[arg-type]
    harness = AgentHarness(model=ScriptedModel(["finished"]), tools=[plain, guarded], policy=policy)
    stream = resume_streaming(harness, "run-old", store=store)
    rec = EventRecorder(stream.context.events)
    with anyio.fail_after(20):
        run = await stream.wait()
    assert run.status == status
    assert ran == ran_after
    (decided,) = rec.of_type(ApprovalDecided)
    assert (decided.approved, decided.decided_by) == (action == "approve", "timeout")
    if action == "fail":
        assert isinstance(run.error, ApprovalError)
