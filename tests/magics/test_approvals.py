"""``%agent pending / approve / deny / budget`` and the notebook-wide approval and dollar defaults."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import anyio
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import BudgetExceeded, ModelPricing, ToolCall, ToolMessage, Usage, tool
from tinyagents_nb.harness.events import ApprovalDecided
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel, SlowModel
from tinyagents_nb.magics import NotebookSession
from tinyagents_nb.magics._budget import frontend_can_answer, session_budget, unattended_decision

from .conftest import last_run, run_error, run_ok

pytestmark = pytest.mark.anyio

done: list[str] = []


@tool(requires_approval=True)
def wipe(table: str) -> str:
    """Drop a table."""
    done.append(table)
    return "dropped"


async def until(predicate: Callable[[], bool], *, limit_s: float = 10.0) -> None:
    with anyio.fail_after(limit_s):
        while not predicate():  # noqa: ASYNC110 - polls plain state that has no event to wait on
            await anyio.sleep(0.01)


def wiping(session: NotebookSession, *tables: str) -> None:
    done.clear()
    calls = [ToolCall(id=f"w{i}", name="wipe", arguments={"table": t}) for i, t in enumerate(tables)]
    session.register_model("wiper", ScriptedModel([ScriptedModel.tool_calls(calls), "finished"]))
    session.register_tool(wipe)


async def test_pending_approve_and_deny_from_later_cells(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, '%config AgentMagics.approvals = "ask"')
    wiping(session, "logs", "users")
    rec = EventRecorder(session.context.events)
    run_ok(shell, "%%agent --model wiper --background\nclean up")
    handle = last_run(shell)
    await until(lambda: len(handle.stream.pending_approvals()) == 2)
    capsys.readouterr()
    run_ok(shell, "%agent pending")
    out = capsys.readouterr().out
    assert "w0: wipe(table='logs')" in out
    assert "w1: wipe(table='users')" in out
    assert "2 tool calls are waiting" in str(run_error(shell, "%agent approve"))
    assert "no tool call 'zz'" in str(run_error(shell, "%agent approve zz"))
    run_ok(shell, "%agent deny w1 never the users table")
    assert "denied wipe (w1): never the users table" in capsys.readouterr().out
    run_ok(shell, "%agent approve")  # the only one left
    run = await handle.result()
    assert done == ["logs"]
    denied = next(m for m in run.messages if isinstance(m, ToolMessage) and m.tool_call_id == "w1")
    assert "never the users table" in denied.text
    decided = {e.call_id: e for e in rec.of_type(ApprovalDecided)}
    assert decided["w0"].decider == "%agent approve"
    assert decided["w1"].decider == "%agent deny"
    run_ok(shell, "%agent pending")
    assert "no tool call is waiting" in capsys.readouterr().out


async def test_without_a_frontend_that_can_click_auto_denies_at_once(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    wiping(session, "logs")
    rec = EventRecorder(session.context.events)
    run_ok(shell, "%%agent --model wiper --background\nclean up")  # a plain shell: no kernel request allows stdin
    with anyio.fail_after(10):
        await last_run(shell).result()
    assert done == []
    (event,) = rec.of_type(ApprovalDecided)
    assert (event.approved, event.decided_by) == (False, "unattended")


async def test_approve_mode_decides_every_request_automatically(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    run_ok(shell, '%config AgentMagics.approvals = "approve"')
    wiping(session, "tmp")
    run_ok(shell, "%%agent --model wiper --background\nclean up")
    with anyio.fail_after(10):
        await last_run(shell).result()
    assert done == ["tmp"]


def test_frontend_detection_reads_the_requests_allow_stdin() -> None:
    class Kernel:
        _allow_stdin = True

    class Shell:
        kernel = Kernel()

    assert frontend_can_answer(Shell())
    Kernel._allow_stdin = False
    assert not frontend_can_answer(Shell())
    assert not frontend_can_answer(object())  # no kernel at all
    assert unattended_decision("auto", lambda: True) == (True, "deny")
    assert unattended_decision("auto", lambda: False) == (False, "deny")
    assert unattended_decision("approve", lambda: True) == (False, "approve")
    assert unattended_decision("ask", lambda: False) == (True, None)


def test_per_run_and_session_dollar_caps(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    assert session_budget(None, "refuse") == ()
    (budget,) = session_budget(2, "refuse")
    assert budget.anchor_run_id is None
    assert budget.max_cost_usd == Decimal(2)

    usage = Usage(input_tokens=1_000_000, output_tokens=0)  # $1 a call at the price below
    session.context.costs.register_price("scripted", ModelPricing(input_per_mtok=1, output_per_mtok=1))
    session.register_model("pricey", ScriptedModel([ScriptedModel.text(f"answer {i}", usage=usage) for i in range(4)]))
    run_ok(shell, "%config AgentMagics.session_max_cost_usd = 2.0")
    run_ok(shell, "%%agent --model pricey\none")
    run_ok(shell, "%%agent --model pricey\ntwo")
    assert last_run(shell).status == "completed"
    capsys.readouterr()
    run_ok(shell, "%%agent --model pricey\nthree")  # $2 spent: the session cap leaves $0
    third = last_run(shell)
    assert third.status == "failed"
    outcome = third.outcome
    assert outcome is not None
    assert isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.limit == "cost_usd"
    capsys.readouterr()
    run_ok(shell, "%agent budget")
    out = capsys.readouterr().out
    assert "session spend: $2.000000" in out
    assert "session cap: $2.000000 ($0.000000 left)" in out
    assert "per run: none" in out
    run_ok(shell, "%config AgentMagics.max_cost_usd = 0.25")
    assert session.max_cost_usd == 0.25
    run_ok(shell, "%agent budget")
    assert "per run: $0.250000" in capsys.readouterr().out  # one money format everywhere
    assert isinstance(run_error(shell, "%agent budget 5"), UsageError)


def test_the_offline_model_is_never_refused_by_a_dollar_cap(shell: InteractiveShell, session: NotebookSession) -> None:
    run_ok(shell, "%config AgentMagics.max_cost_usd = 0.01")
    run_ok(shell, "%%agent\nhello")
    assert last_run(shell).status == "completed"


async def test_the_session_cap_binds_concurrent_runs_together(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0)  # $1 a call
    session.context.costs.register_price("scripted", ModelPricing(input_per_mtok=1, output_per_mtok=1))

    @tool
    def step() -> str:
        """One step."""
        return "ok"

    session.register_tool(step)
    for name in ("a", "b"):
        script = [ScriptedModel.tool_call("step", {}, usage=usage) for _ in range(10)] + ["done"]
        session.register_model(name, SlowModel(ScriptedModel(script), delay_s=0.05))
    run_ok(shell, "%config AgentMagics.session_max_cost_usd = 2.5")
    run_ok(shell, "%%agent --model a --name ra --background\ngo")
    run_ok(shell, "%%agent --model b --name rb --background --new-thread\ngo")
    ra, rb = shell.user_ns["ra"], shell.user_ns["rb"]
    with anyio.fail_after(20):
        first = await ra.wait()
        second = await rb.wait()
    spent = session.context.costs.total().total_usd
    # each request is checked against the whole session's spend: at most one request per run in flight
    # passes the cap (a per-run share of the cap would have let each run spend $3)
    assert spent is not None
    assert spent <= Decimal(4)
    assert isinstance(first.error, BudgetExceeded)
    assert isinstance(second.error, BudgetExceeded)
    assert first.error.anchor_run_id is None


async def test_the_record_says_how_each_approval_was_decided(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, '%config AgentMagics.approvals = "ask"')
    wiping(session, "logs", "users")
    run_ok(shell, "%%agent --model wiper --background --name asked\nclean up")
    handle = last_run(shell)
    await until(lambda: len(handle.stream.pending_approvals()) == 2)
    handle.stream.approve("w0", by="alice")
    handle.stream.deny("w1", "never the users table", by="bob")
    await handle.wait()
    plain = handle._repr_mimebundle_()["text/plain"].splitlines()
    assert plain[1:6] == [  # both calls were in one reply; each decision follows its call
        'tool call: wipe {"table": "logs"}',
        "✓ approved wipe (by alice)",
        'tool call: wipe {"table": "users"}',
        "✗ denied wipe (by bob: never the users table)",
        "  → dropped",
    ]
    markdown = handle._repr_mimebundle_()["text/markdown"]
    assert "✓ approved wipe (by alice)" in markdown

    run_ok(shell, '%config AgentMagics.approvals = "auto"')  # a plain shell cannot answer: denied at once
    wiping(session, "logs")
    run_ok(shell, "%%agent --model wiper --background\nclean up")
    with anyio.fail_after(10):
        unattended = await last_run(shell).wait()
    assert unattended.status == "completed"
    plain = last_run(shell)._repr_mimebundle_()["text/plain"].splitlines()
    line = plain[plain.index('tool call: wipe {"table": "logs"}') + 1]
    assert line.startswith("✗ denied wipe (unattended: nobody can answer")

    run_ok(shell, '%config AgentMagics.approvals = "approve"')
    wiping(session, "tmp")
    run_ok(shell, "%%agent --model wiper --background\nclean up")
    with anyio.fail_after(10):
        await last_run(shell).wait()
    plain = last_run(shell)._repr_mimebundle_()["text/plain"].splitlines()
    assert plain[plain.index('tool call: wipe {"table": "tmp"}') + 1].startswith("✓ approved wipe (unattended: ")


def test_the_record_names_the_limit_that_refused_a_request(shell: InteractiveShell, session: NotebookSession) -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0)  # $1 a call at the price below
    session.context.costs.register_price("scripted", ModelPricing(input_per_mtok=1, output_per_mtok=1))
    session.register_model("pricey", ScriptedModel([ScriptedModel.text(f"answer {i}", usage=usage) for i in range(2)]))
    run_ok(shell, "%config AgentMagics.session_max_cost_usd = 1.0")
    run_ok(shell, "%%agent --model pricey\none")
    run_ok(shell, "%%agent --model pricey\ntwo")  # $1 spent: refused before it is sent
    record = last_run(shell)._repr_mimebundle_()
    plain = record["text/plain"].splitlines()
    assert plain[1] == "⛔ limit reached: cost budget of $1.000000 (cost_usd)"  # which limit; the next line says why
    assert plain[2].startswith(
        "run failed: BudgetExceeded: limit exceeded: all runs of this session together spent $1.000000 of $1.000000"
    )
    assert "%config AgentMagics.session_max_cost_usd = 2" in plain[2]  # how to raise it
    assert (
        "⛔ limit reached: cost budget of <code>\\$1\\.000000</code> (cost\\_usd)" in record["text/markdown"]
    )  # code, never math


async def test_a_call_id_reused_by_two_runs_is_named_with_its_run(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, '%config AgentMagics.approvals = "ask"')
    done.clear()
    session.register_tool(wipe)
    for name, table in (("first", "logs"), ("second", "users")):
        call = ToolCall(id="w0", name="wipe", arguments={"table": table})  # both models pick the same id
        session.register_model(f"m_{name}", ScriptedModel([ScriptedModel.tool_calls([call]), "finished"]))
        run_ok(shell, f"%%agent --model m_{name} --name {name} --thread {name} --background\nclean up")
    runs = [r for r in session.active_runs() if r.name in ("first", "second")]
    await until(lambda: sum(len(r.stream.pending_approvals()) for r in runs) == 2)
    refused = str(run_error(shell, "%agent approve w0"))
    assert "waiting in 2 runs" in refused
    assert "w0@first" in refused
    assert "w0@second" in refused
    capsys.readouterr()
    run_ok(shell, "%agent approve w0@second")
    run_ok(shell, "%agent deny w0@first not the logs")
    out = capsys.readouterr().out
    assert "approved wipe (w0)" in out
    assert "denied wipe (w0): not the logs" in out
    for run in runs:
        await run.result()
    assert done == ["users"]


async def test_notebook_approvals_wait_until_answered_unless_a_timeout_is_configured(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    # A person who steps away for longer than the harness's 300 s finds the call still waiting.
    run_ok(shell, '%config AgentMagics.approvals = "ask"')
    wiping(session, "logs")
    run_ok(shell, "%%agent --model wiper --background\nclean up")
    waiting = last_run(shell)
    assert waiting.harness.policy.approval_timeout_s is None
    await until(lambda: len(waiting.stream.pending_approvals()) == 1)
    waiting.stream.approvals.approve("w0")
    await waiting.result()
    assert done == ["logs"]
    # %config sets a bound; its timeout denies the unanswered call (decided by "timeout").
    run_ok(shell, "%config AgentMagics.approval_timeout = 0.2")
    wiping(session, "users")
    rec = EventRecorder(session.context.events)
    run_ok(shell, "%%agent --model wiper --background\nclean up")
    bounded = last_run(shell)
    assert bounded.harness.policy.approval_timeout_s == 0.2
    with anyio.fail_after(10):
        await bounded.result()
    assert done == []
    (event,) = rec.of_type(ApprovalDecided)
    assert (event.approved, event.decided_by) == (False, "timeout")
    run_ok(shell, "%config AgentMagics.approval_timeout = 0")  # 0 (or None) removes the bound again
    assert session.approval_timeout_s is None
