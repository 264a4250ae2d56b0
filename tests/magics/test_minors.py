"""Small traps a new user met (UX review 3): each says what it does instead of leaving something out."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession, agent_tool

from .conftest import last_run, run_error, run_ok


def test_agent_tool_takes_every_tool_option(shell: InteractiveShell, session: NotebookSession) -> None:
    @agent_tool(requires_approval=True, timeout_s=5)
    def delete_rows(table: str) -> str:
        """Delete every row of a table."""
        return f"deleted {table}"

    registered = session.tools["delete_rows"]
    assert registered is delete_rows
    assert registered.requires_approval is True
    assert session.tool(name="renamed")(lambda_free).name == "renamed"


def lambda_free(x: int) -> int:
    """Return x."""
    return x


def test_rlm_with_the_offline_model_says_it_needs_a_code_writing_model(shell: InteractiveShell) -> None:
    run_ok(shell, "df = [1, 2, 3]")
    error = run_error(shell, "%%agent --rlm local --context df\nHow many rows?")
    assert isinstance(error, UsageError)
    assert "needs a model that writes Python code" in str(error)
    assert "demo_model" in str(error)
    assert "--model" in str(error)


def test_cost_names_the_runs_it_cannot_price(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("toolbot", ScriptedModel(["ok"]))
    run_ok(shell, "%%agent --model toolbot --name tb\nhi")
    capsys.readouterr()
    run_ok(shell, "%agent cost")
    out = capsys.readouterr().out
    assert "not in the table: 1 run on toolbot (no price is known for that model" in out


def test_context_reports_the_last_model_even_after_a_measured_one(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, "%%agent\nhello")  # the offline demo model: its window is measured
    assert last_run(shell).context.context_window is not None
    session.register_model("toolbot", ScriptedModel(["ok"]))
    run_ok(shell, "%%agent --model toolbot\nhi")
    capsys.readouterr()
    run_ok(shell, "%agent context")
    assert "model toolbot" in capsys.readouterr().out.strip().splitlines()[-1]


def test_runs_table_is_narrow_and_mcp_list_says_none(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, "%%agent --name first\nhello")
    runs = run_ok(shell, "%agent runs").result
    assert "thread_id" not in runs.columns
    assert "run_id" not in runs.columns
    assert list(runs["run"]) == ["first"]
    assert "run_id" in session.runs_frame().columns  # the full table stays one call away
    capsys.readouterr()
    assert run_ok(shell, "%agent mcp list").result is None
    assert "no MCP servers yet: add one with %agent mcp add NAME" in capsys.readouterr().out


def test_a_timeout_mid_answer_is_marked_like_a_stop(shell: InteractiveShell, session: NotebookSession) -> None:
    from tinyagents_nb.harness.testkit import StreamingMock

    session.register_model("talker", StreamingMock("word " * 2000, chunk_delay_s=0.01))  # 20 s of text
    run_ok(shell, "%%agent --model talker --timeout 1.5 --name t1\ntalk")
    plain = last_run(shell)._repr_mimebundle_()["text/plain"].splitlines()
    assert "— stopped here —" in plain
    failure = next(line for line in plain if line.startswith("run failed: RunTimeout"))
    assert "run t1 ran out" in failure or "run-" not in failure  # the run's name, never its full id
    assert "give the run more time with %%agent --timeout S, or leave --timeout out" in plain
    assert plain[-1].startswith("[failed · 0 model calls + 1 interrupted")
    assert "streamed (estimate)" in plain[-1]
