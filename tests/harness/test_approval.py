from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AgentStream,
    ApprovalError,
    RunCancelled,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    RunTimeout,
    ToolDefinitionError,
    ToolMessage,
    require_approval,
    tool,
)
from tinyagents_nb.harness.events import ApprovalDecided, ApprovalRequested, ToolCompleted, ToolStarted
from tinyagents_nb.harness.runtime import arguments_sha256
from tinyagents_nb.harness.testkit import EventRecorder, FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio

ran: list[tuple[str, dict[str, Any]]] = []


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email."""
    ran.append(("send_email", {"to": to, "body": body}))
    return f"sent to {to}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(("delete_file", {"path": path}))
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def two_turns(*calls: tuple[str, dict[str, Any]], ids: tuple[str, ...] = ()) -> ScriptedModel:
    from tinyagents_nb.harness import ToolCall

    built = [ToolCall(id=ids[i] if ids else f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)]
    return ScriptedModel([ScriptedModel.tool_calls(built), "done"])


async def wait_pending(stream: AgentStream, count: int = 1) -> list[str]:
    with anyio.fail_after(20):
        while len(stream.pending_approvals()) < count:  # noqa: ASYNC110 (the desk has no event to await)
            await anyio.sleep(0.005)
    return [r.call_id for r in stream.pending_approvals()]


def tool_messages(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


async def test_approve_runs_the_call_and_records_who_and_the_argument_hash() -> None:
    args = {"to": "a@example.com", "body": "hi"}
    harness = AgentHarness(model=two_turns(("send_email", args)), tools=[send_email])
    stream = harness.invoke_streaming("mail a")
    rec = EventRecorder(stream.context.events)
    stream.start()
    assert await wait_pending(stream) == ["c0"]
    assert ran == []  # nothing ran while it waited
    # from another thread, like a widget callback
    decision: list[Any] = []
    t = threading.Thread(target=lambda: decision.append(stream.approve("c0", by="alice")))
    t.start()
    t.join()
    run = await stream.result()
    assert run.final_text == "done"
    assert ran == [("send_email", args)]
    requested = rec.of_type(ApprovalRequested)
    decided = rec.of_type(ApprovalDecided)
    assert [(e.call_id, e.tool_name, e.arguments) for e in requested] == [("c0", "send_email", args)]
    assert len(decided) == 1
    event = decided[0]
    assert (event.approved, event.decided_by, event.decider, event.edited) == (True, "person", "alice", False)
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"))
    assert event.arguments_sha256 == hashlib.sha256(canonical.encode()).hexdigest() == decision[0].arguments_sha256
    kinds = rec.kinds()
    assert kinds.index("approval.requested") < kinds.index("approval.decided") < kinds.index("tool.completed")


async def test_a_call_starts_after_its_approval_with_the_arguments_approved() -> None:
    """tool.started marks the tool's start, not the person's wait: after approval.decided, with edited arguments."""
    harness = AgentHarness(model=two_turns(("send_email", {"to": "boss@x.com", "body": "I quit"})), tools=[send_email])
    stream = harness.invoke_streaming("mail")
    rec = EventRecorder(stream.context.events)
    stream.start()
    await wait_pending(stream)
    assert "tool.started" not in rec.kinds()  # waiting for a person is not running
    stream.approve("c0", arguments={"to": "boss@x.com", "body": "I stay"})
    await stream.result()
    kinds = rec.kinds()
    assert kinds.index("approval.decided") < kinds.index("tool.started") < kinds.index("tool.completed")
    (started,) = rec.of_type(ToolStarted)
    assert dict(started.arguments) == {"to": "boss@x.com", "body": "I stay"}
    (decided,) = rec.of_type(ApprovalDecided)
    assert started.ts >= decided.ts  # so the tool's duration_s, measured from tool.started, excludes the wait


async def test_a_denied_call_is_reported_as_one_error_result_after_the_decision() -> None:
    harness = AgentHarness(model=two_turns(("delete_file", {"path": "x"})), tools=[delete_file])
    stream = harness.invoke_streaming("go")
    rec = EventRecorder(stream.context.events)
    stream.start()
    await wait_pending(stream)
    stream.deny("c0", reason="no")
    await stream.result()
    tool_kinds = [k for k in rec.kinds() if k.startswith(("tool.", "approval."))]
    assert tool_kinds == ["approval.requested", "approval.decided", "tool.started", "tool.completed"]
    (completed,) = rec.of_type(ToolCompleted)
    assert completed.is_error
    assert "denied by a person" in completed.output


async def test_deny_with_reason_becomes_an_error_result_for_the_model() -> None:
    model = two_turns(("delete_file", {"path": "/etc/passwd"}))
    harness = AgentHarness(model=model, tools=[delete_file])
    stream = harness.invoke_streaming("clean up")
    rec = EventRecorder(stream.context.events)
    stream.start()
    await wait_pending(stream)
    stream.deny("c0", reason="never touch /etc")
    run = await stream.result()
    assert ran == []
    result = tool_messages(run.messages)["c0"]
    assert result.is_error
    assert "denied by a person" in result.text
    assert "never touch /etc" in result.text
    # the model saw the denial on its next request
    assert any(isinstance(m, ToolMessage) and "never touch /etc" in m.text for m in model.requests[1].messages)
    (event,) = rec.of_type(ApprovalDecided)
    assert (event.approved, event.decided_by, event.reason) == (False, "person", "never touch /etc")


async def test_approve_with_edited_arguments_runs_them_and_hashes_them() -> None:
    harness = AgentHarness(model=two_turns(("send_email", {"to": "boss@x.com", "body": "I quit"})), tools=[send_email])
    stream = harness.invoke_streaming("mail")
    rec = EventRecorder(stream.context.events)
    stream.start()
    await wait_pending(stream)
    with pytest.raises(ApprovalError, match="edited arguments rejected"):
        stream.approve("c0", arguments={"to": "boss@x.com"})  # missing `body`: re-validated, stays pending
    with pytest.raises(ApprovalError, match="JSON object"):
        stream.approve("c0", arguments=["x"])  # type: ignore[arg-type]
    assert [r.call_id for r in stream.pending_approvals()] == ["c0"]
    edited = {"to": "boss@x.com", "body": "Thanks for everything"}
    stream.approve("c0", arguments=edited)
    await stream.result()
    assert ran == [("send_email", edited)]
    (event,) = rec.of_type(ApprovalDecided)
    assert event.edited
    assert event.arguments == edited
    assert event.arguments_sha256 == arguments_sha256(edited)


async def test_stop_while_pending_ends_the_run_cancelled_promptly() -> None:
    harness = AgentHarness(model=two_turns(("delete_file", {"path": "x"})), tools=[delete_file])
    stream = harness.invoke_streaming("go")
    rec = EventRecorder(stream.context.events)
    stream.start()
    await wait_pending(stream)
    started = time.monotonic()
    stream.cancel("user pressed Stop")
    with anyio.fail_after(10):
        run = await stream.wait()
    assert time.monotonic() - started < 5
    assert run.status == "cancelled"
    assert isinstance(run.error, RunCancelled)
    assert ran == []
    assert stream.pending_approvals() == []
    (event,) = rec.of_type(ApprovalDecided)
    assert (event.approved, event.decided_by) == (False, "withdrawn")
    # it never started, so there is no tool.started to close: the withdrawn decision tells the story
    assert [k for k in rec.kinds() if k.startswith("tool.")] == []


async def test_deadline_while_pending_times_the_run_out() -> None:
    harness = AgentHarness(
        model=two_turns(("delete_file", {"path": "x"})),
        tools=[delete_file],
        policy=RunPolicy(limits=RunLimits(max_wall_clock_s=0.5)),
    )
    stream = harness.invoke_streaming("go")
    rec = EventRecorder(stream.context.events)
    with anyio.fail_after(20):
        run = await stream.wait()
    assert run.status == "failed"
    assert isinstance(run.error, RunTimeout)
    assert ran == []
    assert [e.decided_by for e in rec.of_type(ApprovalDecided)] == ["withdrawn"]
    assert [e.limit for e in rec.of_kind("limit.reached")] == ["wall_clock"]  # type: ignore[attr-defined]
    assert [k for k in rec.kinds() if k.startswith("tool.")] == []


@pytest.mark.parametrize(("policy", "approved"), [("deny", False), ("approve", True), (None, False)])
async def test_unattended_runs_decide_at_once_never_hang(policy: Any, approved: bool) -> None:
    harness = AgentHarness(
        model=two_turns(("delete_file", {"path": "x"})),
        tools=[delete_file],
        policy=RunPolicy(unattended_approval=policy),
    )
    ctx = RunContext(config=RunConfig())
    rec = EventRecorder(ctx.events)
    with anyio.fail_after(10):
        run = await harness.invoke_in_context(ctx, "go")  # no handle: nobody can answer
    assert run.final_text == "done"
    assert (ran == [("delete_file", {"path": "x"})]) is approved
    (event,) = rec.of_type(ApprovalDecided)
    assert (event.approved, event.decided_by) == (approved, "unattended")
    assert "no approval handle" in (event.reason or "")


async def test_an_unattended_desk_decides_at_once_even_with_a_handle() -> None:
    harness = AgentHarness(
        model=two_turns(("delete_file", {"path": "x"})),
        tools=[delete_file],
        policy=RunPolicy(unattended_approval="approve"),
    )
    stream = harness.invoke_streaming("go")
    stream.approvals.attended = False  # what the notebook session does without a clicking frontend
    with anyio.fail_after(10):
        await stream.result()
    assert ran == [("delete_file", {"path": "x"})]


async def test_a_callable_rule_decides_per_call_from_the_arguments_and_context() -> None:
    seen: list[tuple[str, Mapping[str, Any]]] = []

    def rule(ctx: RunContext[Any], arguments: Mapping[str, Any]) -> Any:
        seen.append((ctx.run_id, arguments))
        path = arguments["path"]
        if path.startswith("/tmp/"):
            return False  # harmless: no approval needed
        if path.startswith("/etc/"):
            return "deny"  # the policy decides alone
        return "ask"

    @tool(requires_approval=rule)
    def remove(path: str) -> str:
        """Remove a path."""
        ran.append(("remove", {"path": path}))
        return "ok"

    calls = (("remove", {"path": "/tmp/a"}), ("remove", {"path": "/etc/b"}), ("remove", {"path": "/home/c"}))
    harness = AgentHarness(model=two_turns(*calls), tools=[remove])
    stream = harness.invoke_streaming("go")
    rec = EventRecorder(stream.context.events)
    stream.start()
    assert await wait_pending(stream) == ["c2"]  # only the one the rule asks about waits
    stream.approve()  # the only pending call, by default
    run = await stream.result()
    assert sorted(p["path"] for _, p in ran) == ["/home/c", "/tmp/a"]
    assert [a["path"] for _, a in seen] == ["/tmp/a", "/etc/b", "/home/c"]
    assert all(run_id == stream.run_id for run_id, _ in seen)
    by_call = {e.call_id: e for e in rec.of_type(ApprovalDecided)}
    assert set(by_call) == {"c1", "c2"}
    assert (by_call["c1"].approved, by_call["c1"].decided_by) == (False, "policy")
    assert (by_call["c2"].approved, by_call["c2"].decided_by) == (True, "person")
    assert "denied by policy" in tool_messages(run.messages)["c1"].text


async def test_two_pending_calls_are_decided_independently_while_another_tool_runs() -> None:
    unblocked = anyio.Event()

    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL (needs no approval)."""
        ran.append(("fetch", {"url": url}))
        unblocked.set()
        return "page"

    calls = (("send_email", {"to": "a", "body": "1"}), ("fetch", {"url": "u"}), ("delete_file", {"path": "p"}))
    harness = AgentHarness(model=two_turns(*calls), tools=[send_email, fetch, delete_file])
    stream = harness.invoke_streaming("go")
    stream.start()
    assert sorted(await wait_pending(stream, 2)) == ["c0", "c2"]
    with anyio.fail_after(10):
        await unblocked.wait()  # the tool without approval ran while both waited
    with pytest.raises(ApprovalError, match="2 tool calls are waiting"):
        stream.approve()  # ambiguous
    with pytest.raises(ApprovalError, match="no tool call 'nope'"):
        stream.deny("nope")
    stream.deny("c2", reason="no")
    assert [r.call_id for r in stream.pending_approvals()] == ["c0"]
    with pytest.raises(ApprovalError):
        stream.deny("c2")  # decided already
    stream.approve("c0")
    run = await stream.result()
    assert [name for name, _ in ran] == ["fetch", "send_email"]
    results = tool_messages(run.messages)
    assert not results["c0"].is_error
    assert results["c2"].is_error
    assert not results["c1"].is_error


async def test_require_approval_wraps_any_tool_and_rules_are_checked() -> None:
    fake = FakeTool("shell", ["ran"])
    gated = require_approval(fake)
    assert gated.name == "shell"
    assert gated.schema is fake.schema
    harness = AgentHarness(model=two_turns(("shell", {})), tools=[gated])
    stream = harness.invoke_streaming("go")
    stream.start()
    await wait_pending(stream)
    assert fake.calls == []
    stream.approve()
    await stream.result()
    assert len(fake.calls) == 1
    with pytest.raises(ToolDefinitionError):
        tool(lambda x: x, name="f", requires_approval="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unattended_approval"):
        RunPolicy(unattended_approval="maybe")  # type: ignore[arg-type]


async def test_a_tool_without_approval_emits_no_approval_events() -> None:
    @tool
    def plain() -> str:
        """Plain."""
        return "x"

    harness = AgentHarness(model=two_turns(("plain", {})), tools=[plain])
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    await harness.invoke_in_context(ctx, "go")
    assert not [k for k in rec.kinds() if k.startswith("approval.")]


async def test_a_sub_agents_approval_reaches_the_root_handle() -> None:
    from tinyagents_nb.harness import SubAgent

    child = AgentHarness(model=two_turns(("delete_file", {"path": "deep"})), tools=[delete_file])
    root = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("helper", {"input": "go"}, id="r0"), "root done"]),
        tools=[SubAgent("helper", child).as_tool()],
    )
    stream = root.invoke_streaming("go")
    stream.start()
    await wait_pending(stream)
    (request,) = stream.pending_approvals()
    assert request.run_id != stream.run_id  # it waits in the child run
    stream.approve(request.call_id)
    run = await stream.result()
    assert run.final_text == "root done"
    assert ran == [("delete_file", {"path": "deep"})]


def test_approval_errors_are_typed() -> None:
    with pytest.raises(ApprovalError, match="no tool call is waiting"):
        AgentHarness(model=ScriptedModel(["x"])).invoke_streaming("x").approve()


async def test_the_decision_lands_in_a_sqlite_journal_and_decodes_back(tmp_path: Any) -> None:
    from tinyagents_nb.harness.observability import JournalSink, SQLiteEventJournal

    journal = SQLiteEventJournal(tmp_path / "events.db")
    args = {"to": "a", "body": "b"}
    harness = AgentHarness(model=two_turns(("send_email", args)), tools=[send_email])
    stream = harness.invoke_streaming("go")
    stream.context.events.add_listener(JournalSink(journal))
    stream.start()
    await wait_pending(stream)
    stream.approve(by="bob")
    await stream.result()
    (row,) = journal.read_from(0, kinds=["approval.decided"])
    event = row.event
    assert isinstance(event, ApprovalDecided)
    assert (event.approved, event.decided_by, event.decider) == (True, "person", "bob")
    assert event.arguments_sha256 == arguments_sha256(args)
    assert len(journal.read_from(0, kinds=["approval.requested"])) == 1
    journal.close()


async def test_a_broken_rule_fails_the_run_closed() -> None:
    @tool(requires_approval=lambda ctx, arguments: "maybe")
    def risky() -> str:
        """Risky."""
        ran.append(("risky", {}))
        return "done"

    harness = AgentHarness(model=two_turns(("risky", {})), tools=[risky])
    run, _ = await harness.invoke_with_status(RunContext(), "go")
    assert run.status == "failed"
    assert "returned 'maybe'" in str(run.error)
    assert ran == []


async def test_approving_the_same_arguments_again_is_not_an_edit_and_edits_are_copied() -> None:
    @tool(requires_approval=True)
    def tag(names: list[str], meta: dict[str, int]) -> str:
        """Tag things."""
        ran.append(("tag", {"names": names, "meta": meta}))
        return "ok"

    original = {"names": ["a", "b"], "meta": {"n": 1}}
    harness = AgentHarness(model=two_turns(("tag", original), ("tag", original)), tools=[tag])
    stream = harness.invoke_streaming("go")
    rec = EventRecorder(stream.context.events)
    stream.start()
    await wait_pending(stream, 2)
    same = {"meta": {"n": 1}, "names": ["a", "b"]}  # equal JSON, other key order
    assert not stream.approve("c0", arguments=same).edited
    edited = {"names": ["c"], "meta": {"n": 2}}
    stream.approve("c1", arguments=edited)
    edited["names"].append("mutated after approval")  # the approved copy is what runs
    await stream.result()
    assert sorted(ran, key=str) == sorted([("tag", original), ("tag", {"names": ["c"], "meta": {"n": 2}})], key=str)
    flags = {e.call_id: e.edited for e in rec.of_type(ApprovalDecided)}
    assert flags == {"c0": False, "c1": True}
