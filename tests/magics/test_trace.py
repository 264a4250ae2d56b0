"""``%agent trace otlp URL`` and ``%config AgentMagics.otel_endpoint``: a notebook's runs reach a real OTLP receiver."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.harness.observability.otlp_receiver import OTLPReceiver
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession

from .conftest import run_error, run_ok


def test_trace_otlp_exports_every_run_of_the_notebook(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("scripted", ScriptedModel(["first answer", "second answer"], model_name="nb-model"))
    with OTLPReceiver() as rx:
        run_ok(shell, f"%agent trace otlp {rx.url}")
        assert capsys.readouterr().out.strip() == (
            f"tracing: OTLP/HTTP to {rx.url}/v1/traces · conventions latest · content off"
        )
        run_ok(shell, "%%agent --model scripted\nHello")
        run_ok(shell, "%%agent --model scripted\nAnd again")
        sink = session.tracing.sink
        assert sink is not None
        sink.force_flush()
        spans = rx.wait_for(4)
        run_ok(shell, "%agent trace off")
        assert capsys.readouterr().out.strip().endswith("tracing: stopped")
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    chats = [s for s in spans if s.name == "chat nb-model"]
    assert len(agents) == 2
    assert len(chats) == 2
    # the notebook's thread is the conversation: both cells carry it
    assert {s.attributes["gen_ai.conversation.id"] for s in agents} == {session.thread_id}
    assert {c.parent_span_id for c in chats} == {a.span_id for a in agents}


def test_the_config_setting_starts_and_stops_the_same_export(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("scripted", ScriptedModel(["ok"], model_name="cfg-model"))
    with OTLPReceiver() as rx:
        run_ok(shell, f'%config AgentMagics.otel_endpoint = "{rx.url}"')
        sink = session.tracing.sink
        assert sink is not None
        run_ok(shell, "%agent reset")  # a new root context: the export follows it
        run_ok(shell, "%%agent --model scripted\nHi")
        sink.force_flush()
        spans = rx.wait_for(2)
        run_ok(shell, '%config AgentMagics.otel_endpoint = ""')
        assert not session.tracing.describe().startswith("tracing: OTLP")
    assert {s.name for s in spans} == {"invoke_agent cfg-model", "chat cfg-model"}
    run_ok(shell, "%agent trace")
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("tracing: off (%agent trace otlp URL exports every run as OpenTelemetry GenAI spans)")
    )


def test_bad_trace_commands_are_one_line_errors(shell: InteractiveShell) -> None:
    assert "one http(s) URL" in str(run_error(shell, "%agent trace otlp localhost:4318"))
    assert isinstance(run_error(shell, "%agent trace jaeger"), UsageError)
