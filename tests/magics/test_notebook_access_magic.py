"""The notebook-access setting and commands in an IPython shell (issue 25): ``%config
AgentMagics.notebook_access``, ``%%agent --access``, ``%agent access`` and ``%agent hide``, which tools
each mode gives a run, and the one-line notice the session's first look at the notebook prints once.
The kernel tests (``tests/kernel/test_kernel_notebook.py``) drive the tools themselves."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ToolCall
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession

from .conftest import run_error, run_ok

READ = ["inspect_variable", "last_error", "notebook_cells", "notebook_variables"]
WRITE = ["propose_cell", "run_code"]


def tools_sent(shell: InteractiveShell, session: NotebookSession, line: str = "") -> list[str]:
    """The notebook tools a run's first request offers the model."""
    model = ScriptedModel(["ok"])
    session.register_model("m", model)
    run_ok(shell, f"%%agent --model m {line}\nhello")
    return sorted(t.name for t in model.requests[0].tools)


def test_the_setting_and_the_flag_decide_which_tools_a_run_gets(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tools_sent(shell, session) == READ  # the default: read
    run_ok(shell, '%config AgentMagics.notebook_access = "ask"')
    capsys.readouterr()
    run_ok(shell, "%agent access")
    assert capsys.readouterr().out.startswith("notebook access: ask · the agent can read this kernel and run code")
    assert tools_sent(shell, session) == sorted(READ + WRITE)
    run_ok(shell, '%config AgentMagics.notebook_access = "off"')
    assert tools_sent(shell, session) == []
    assert tools_sent(shell, session, "--access read") == READ  # one run overrides the setting
    assert tools_sent(shell, session, "--access auto") == sorted(READ + WRITE)
    assert isinstance(run_error(shell, "%%agent --model m --access everything\nhi"), UsageError)


def test_the_first_look_says_in_one_line_what_the_agent_sees_once_per_session(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("quiet", ScriptedModel(["no look"]))
    looks = [ToolCall(id="v", name="notebook_variables", arguments={})]
    session.register_model("look", ScriptedModel([ScriptedModel.tool_calls(looks), "seen"]))
    session.register_model("again", ScriptedModel([ScriptedModel.tool_calls(looks), "seen"]))
    capsys.readouterr()
    run_ok(shell, "%%agent --model quiet\nhi")  # a run that never looks says nothing
    assert "notebook access" not in capsys.readouterr().out
    run_ok(shell, "%%agent --model look\nwhat do I have?")
    notices = [line for line in capsys.readouterr().out.splitlines() if "notebook access" in line]
    assert notices == [
        "notebook access: read · the agent can read this kernel's variables, cells, outputs and errors "
        '(secrets masked; nothing runs) (turn it off with %config AgentMagics.notebook_access = "off"; '
        "hide a variable with %agent hide NAME)"
    ]
    run_ok(shell, "%%agent --model again\nand now?")
    assert "notebook access" not in capsys.readouterr().out


def test_hide_and_show_names(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run_ok(shell, "%agent hide sales_db customers")
    assert capsys.readouterr().out.strip() == "hidden from the agent: customers, sales_db"
    run_ok(shell, "%agent hide --show customers")
    assert capsys.readouterr().out.strip() == "hidden from the agent: sales_db"
    run_ok(shell, "%agent access")
    assert "hidden from the agent: sales_db" in capsys.readouterr().out
    assert isinstance(run_error(shell, "%agent hide 'not a name'"), UsageError)
