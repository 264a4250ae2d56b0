"""``%agent mcp add/list/remove`` in an in-process shell, with the real stdio calc server of the harness tests."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.harness.mcp.conftest import SERVER, gone
from tinyagents_nb.harness import ToolMessage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_error, run_ok

ADD = f"%agent mcp add calc -- {sys.executable} {SERVER}"


@pytest.fixture
def calc(shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]) -> Iterator[str]:
    run_ok(shell, ADD)
    yield capsys.readouterr().out
    for name in session.mcp.names():
        session.mcp.remove(name)


def test_add_starts_the_server_and_lists_its_tools(calc: str, shell: InteractiveShell) -> None:
    assert calc.startswith(f"MCP server calc (stdio: {sys.executable} {SERVER}): 13 tools: calc_add, ")
    table = shell.run_cell("%agent mcp list").result
    assert isinstance(table, pd.DataFrame)
    [row] = table.to_dict("records")
    assert (row["server"], row["transport"], row["status"]) == ("calc", "stdio", "running")
    assert "calc_add" in row["tools"]
    assert Path(row["stderr log"]).exists()


def test_every_later_run_gets_the_servers_tools(calc: str, shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel([ScriptedModel.tool_call("calc_add", {"a": 2, "b": 3}), "5"]))
    run_ok(shell, "%%agent --model fake\nWhat is 2 + 3?")
    run = last_run(shell)
    assert run.status == "completed"
    assert run.outcome is not None
    assert [m.text for m in run.outcome.messages if isinstance(m, ToolMessage)] == ["5"]


def test_tools_narrowing_selects_a_server_by_name(calc: str, shell: InteractiveShell, session: NotebookSession) -> None:
    model = ScriptedModel(["ok", "ok"])
    session.register_model("fake", model)
    run_ok(shell, "%%agent --model fake --tools calc\nhi")
    assert "calc_add" in {s.name for s in model.requests[0].tools}


def test_remove_stops_the_process(calc: str, shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel([ScriptedModel.tool_call("calc_pid", {}), "ok"]))
    run_ok(shell, "%%agent --model fake\npid?")
    outcome = last_run(shell).outcome
    assert outcome is not None
    [pid] = [int(m.text) for m in outcome.messages if isinstance(m, ToolMessage)]
    run_ok(shell, "%agent mcp remove calc")
    assert gone(pid)
    assert shell.run_cell("%agent mcp list").result is None  # "no MCP servers yet: …", not an empty table
    assert "no MCP server named 'calc'" in str(run_error(shell, "%agent mcp remove calc"))


def test_a_server_that_does_not_start_is_not_registered(shell: InteractiveShell, session: NotebookSession) -> None:
    error = run_error(shell, f"%agent mcp add broken -- {sys.executable} -c \"import sys; sys.exit('no config')\"")
    assert isinstance(error, UsageError)
    assert "MCP server `broken`" in str(error)
    assert "did not start" in str(error)
    assert "no config" in str(error)  # the tail of its stderr
    assert session.mcp.names() == []


@pytest.mark.parametrize(
    "line",
    ["%agent mcp add", "%agent mcp add calc", "%agent mcp add calc python", "%agent mcp frob", "%agent mcp remove"],
)
def test_bad_usage_is_one_line_with_the_forms(shell: InteractiveShell, line: str) -> None:
    error = run_error(shell, line)
    assert isinstance(error, UsageError)
    assert "%agent mcp add NAME -- COMMAND" in str(error)


def test_unloading_the_extension_stops_the_sessions_servers(shell: InteractiveShell, session: NotebookSession) -> None:
    run_ok(shell, ADD)
    server = session.mcp._servers["calc"]
    pid = asyncio.run(server.call_tool("pid", {})).data["result"]
    run_ok(shell, "%unload_ext tinyagents_nb")
    assert gone(pid)
    assert not server.running
    run_ok(shell, "%load_ext tinyagents_nb")  # the fixture unloads it again
