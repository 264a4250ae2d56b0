"""The notebook's dollar caps bind every run it starts: ``%%agent --rlm`` (and its sub-queries) and concurrent background runs."""

from __future__ import annotations

from decimal import Decimal

import anyio
import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import (
    AssistantMessage,
    BudgetExceeded,
    ModelPricing,
    ModelRequest,
    ModelResponse,
    Usage,
)
from tinyagents_nb.harness.events import BudgetReconciled
from tinyagents_nb.harness.models import TokenEstimator
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel, ScriptedModel, StreamingMock
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_ok

pytestmark = pytest.mark.anyio

PRICE = ModelPricing(input_per_mtok=1_000, output_per_mtok=1_000)  # $0.001 per token


class Acme(ScriptedModel):
    @property
    def provider(self) -> str:
        return "acme"


class Quiet(StreamingMock):
    """A priced stream that sends no usage chunk (as llama-cpp-python's server does)."""

    @property
    def provider(self) -> str:
        return "acme"


class AcmeWorker(FunctionModel):
    @property
    def provider(self) -> str:
        return "acme"


def worker(name: str, delay: float = 0.005) -> AcmeWorker:
    """Answers after a short wait, reporting the prompt it was sent and a short answer (as a provider does)."""
    estimator = TokenEstimator.for_model(name)

    async def answer(request: ModelRequest) -> ModelResponse:
        await anyio.sleep(delay)
        usage = Usage(input_tokens=estimator.estimate(request.messages), output_tokens=2)
        return ModelResponse(message=AssistantMessage(text="ok"), usage=usage, model=name)

    return AcmeWorker(answer, model_name=name)


def overshoot(rec: EventRecorder) -> Decimal:
    done = [e for e in rec.events if isinstance(e, BudgetReconciled)]
    return sum((max((e.usd or Decimal(0)) - (e.reserved_usd or Decimal(0)), Decimal(0)) for e in done), Decimal(0))


def py(code: str) -> ModelResponse:
    return ScriptedModel.text(f"```python\n{code}\n```", usage=Usage(input_tokens=50, output_tokens=10))


async def test_an_rlm_batch_of_100_sub_queries_stays_within_the_session_cap(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.context.costs.register_price("acme:root", PRICE)
    session.context.costs.register_price("acme:sub", PRICE)
    root = Acme(
        [py("answers = llm_batch([f'item {i}' for i in range(100)])"), py("FINAL('done')")] * 2, model_name="root"
    )
    sub = worker("sub")
    session.register_model("root", root)
    session.register_model("sub", sub)
    rec = EventRecorder(session.context.events)
    run_ok(shell, "%config AgentMagics.session_max_cost_usd = 0.5")
    run_ok(shell, "%%agent --rlm local --model root --sub-model sub --wait\nlabel every item")
    spent = session.context.costs.total().known_usd
    assert 0 < sub.calls < 100  # the cap let some sub-queries through and refused the rest unsent
    assert spent <= Decimal("0.5") + overshoot(rec)
    assert spent > Decimal("0.3")
    assert session.context.usage.holds.usd(None) == 0

    calls, root_calls = sub.calls, root.calls
    run_ok(shell, "%%agent --rlm local --model root --sub-model sub --wait\nagain")  # the cap is exhausted
    refused = last_run(shell)
    assert refused.status == "failed"
    assert refused.outcome is not None
    assert isinstance(refused.outcome.error, BudgetExceeded)
    assert "%config AgentMagics.session_max_cost_usd = 1" in str(refused.outcome.error)
    assert sub.calls == calls
    assert root.calls == root_calls  # the second run's first request was never sent


async def test_the_per_run_cap_binds_an_rlm_run_and_its_sub_queries(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.context.costs.register_price("acme:root", PRICE)
    session.context.costs.register_price("acme:sub", PRICE)
    root = Acme([py("answers = llm_batch([f'item {i}' for i in range(100)])"), py("FINAL('done')")], model_name="root")
    sub = worker("sub")
    session.register_model("root", root)
    session.register_model("sub", sub)
    rec = EventRecorder(session.context.events)
    run_ok(shell, "%config AgentMagics.max_cost_usd = 0.6")
    run_ok(shell, "%%agent --rlm local --model root --sub-model sub --wait\nlabel every item")
    assert 0 < sub.calls < 100
    run = last_run(shell)
    assert session.context.costs.for_subtree(run.run_id).known_usd <= Decimal("0.6") + overshoot(rec)


async def test_concurrent_background_runs_reserve_against_one_session_cap(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    for i in range(4):
        session.context.costs.register_price(f"acme:w{i}", PRICE)
        session.register_model(f"w{i}", worker(f"w{i}", delay=0.3))  # all four in flight at once
    rec = EventRecorder(session.context.events)
    run_ok(shell, '%config AgentMagics.notebook_access = "off"')  # no notebook tool schemas in the estimate
    run_ok(shell, "%config AgentMagics.session_max_cost_usd = 0.025")  # ~$0.01 reserved per run: two fit
    names = []
    for i in range(4):
        run_ok(shell, f"%%agent --model w{i} --name r{i} --background --new-thread\nhello number {i}")
        names.append(f"r{i}")
    with anyio.fail_after(20):
        runs = [await shell.user_ns[name].wait() for name in names]
    spent = session.context.costs.total().known_usd
    assert spent <= Decimal("0.025") + overshoot(rec)
    assert sum(r.ok for r in runs) == 2  # the other two were refused before sending, while two were in flight
    assert any(isinstance(r.error, BudgetExceeded) for r in runs)


def test_estimated_usage_is_labelled_where_it_is_shown(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.context.costs.register_price("acme:quiet", PRICE)
    session.register_model("quiet", Quiet("an answer streamed without any usage chunk", model_name="quiet"))
    run_ok(shell, "%%agent --model quiet --wait\nSummarize the data")
    run = last_run(shell)
    assert run.outcome is not None
    assert run.outcome.usage.estimated
    assert run.outcome.usage.output_tokens > 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert "~" in summary
    assert "estimated)" in summary
    run_ok(shell, "%agent status")
    assert "(part estimated" in capsys.readouterr().out


def test_a_refusal_suggests_a_cap_that_would_let_the_request_through(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.context.costs.register_price("scripted", PRICE)
    session.register_model("priced", ScriptedModel(["never sent"]))
    run_ok(shell, "%config AgentMagics.max_cost_usd = 0.0001")
    run_ok(shell, "%%agent --model priced\nWhat does it cost?")
    error = str(last_run(shell).outcome.error)
    asked = Decimal(error.split("(about $")[1].split(")")[0])
    suggested = Decimal(error.split("%config AgentMagics.max_cost_usd = ")[1].split()[0])
    assert asked > Decimal("0.01")  # the request alone is far above the old fixed suggestion
    assert suggested >= asked  # raising the cap to what it says lets this request through


async def test_an_rlm_run_the_cap_stops_mid_run_shows_its_partial_answer_in_the_record(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.context.costs.register_price("acme:root", PRICE)
    big = Usage(input_tokens=3_000, output_tokens=10)  # $3.01 a call: the second request will not fit under $4
    replies = ["answer['content'] = 'about <i>40</i>'", "print('still counting')", "FINAL('unreachable')"]
    root = Acme([ScriptedModel.text(f"```python\n{code}\n```", usage=big) for code in replies], model_name="root")
    session.register_model("root", root)
    run_ok(shell, '%config AgentMagics.notebook_access = "off"')
    run_ok(shell, "%config AgentMagics.max_cost_usd = 4")
    run_ok(shell, "%%agent --rlm local --model root --wait\nCount.")
    run = last_run(shell)
    assert run.status == "failed"
    assert run.outcome is not None
    assert isinstance(run.outcome.error, BudgetExceeded)
    assert root.calls == 1  # stopped mid-run: the next request (priced from the first) would go over
    record = run._repr_mimebundle_()
    plain = record["text/plain"].splitlines()
    assert any(line.startswith("run failed: BudgetExceeded") for line in plain)
    assert "partial answer: about <i>40</i>" in plain
    shown = record["text/markdown"].split("**partial answer:**")[1]
    assert "about" in shown
    assert "<i>" not in shown  # the model's text stays inert in the record
