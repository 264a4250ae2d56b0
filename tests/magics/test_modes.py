"""Waiting-mode plumbing without a kernel: the cell transformer, honest controls, the record, name lookup."""

from __future__ import annotations

import re
import threading

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ProviderError
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel
from tinyagents_nb.magics import NotebookSession
from tinyagents_nb.magics._waiting import UNREACHABLE, agent_cell_transformer

from .conftest import last_run, run_ok


def _noop(x: int) -> str:
    """Does nothing."""
    return f"got {x}"


def test_the_transformer_turns_waiting_agent_cells_into_awaiting_ones(shell: InteractiveShell) -> None:
    magics = shell.magics_manager.registry["AgentMagics"]
    transform = agent_cell_transformer(magics.waits)
    [code] = transform(["%%agent --name q1\n", "What is {x}?\n"])
    assert code.startswith('await get_ipython().magics_manager.registry["AgentMagics"].agent_cell_async(')
    assert "get_ipython().var_expand('--name q1'), 'What is {x}?\\n'" in code
    compile(code, "<cell>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT: a valid awaiting cell
    for untouched in (
        ["%%agent --background\n", "hi\n"],  # returns at once anyway
        ["%%agent --modle x\n", "hi\n"],  # a bad line: the magic reports it
        ["%%agents\n", "hi\n"],
        ["x = 1\n"],
        [],
    ):
        assert transform(untouched) == untouched
    shell.user_ns["who"] = "q2"  # {name} in the magic line expands as run_cell_magic expands it
    [code] = transform(["%%agent --name {who}\n", "hi\n"])
    assert shell.ev(code.split(".agent_cell_async(", 1)[1].split(", 'hi", 1)[0]) == "--name q2"
    run_ok(shell, "%config AgentMagics.blocking = False")
    assert transform(["%%agent\n", "hi\n"]) == ["%%agent\n", "hi\n"]  # background by default now
    assert transform(["%%agent --wait\n", "hi\n"]) != ["%%agent --wait\n", "hi\n"]


def test_controls_say_press_stop_where_clicks_cannot_arrive(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["done"]), delay_s=0.6))
    seen: dict[str, object] = {}

    def look() -> None:  # while the cell waits (no kernel: nothing can deliver a click)
        dashboard = shell.user_ns["_agent"].dashboard
        seen["stop_disabled"] = dashboard.controls.stop.disabled
        seen["header"] = dashboard.header.widget.value

    timer = threading.Timer(0.4, look)
    timer.start()
    run_ok(shell, "%%agent --model slow\nhi")
    timer.join()
    assert last_run(shell).dashboard.controls.unreachable == UNREACHABLE
    assert seen["stop_disabled"] is True
    assert "press ■" in str(seen["header"])


def test_the_record_has_tool_calls_failures_and_no_running(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_tool(_noop, name="noop")
    session.register_model("tools", ScriptedModel([ScriptedModel.tool_call("noop", {"x": 7}), "All done."]))
    run_ok(shell, "%%agent --model tools --name t\nuse the tool")
    record = last_run(shell)._repr_mimebundle_()
    assert set(record) == {"text/markdown", "text/plain"}
    plain = record["text/plain"].splitlines()
    assert plain[0] == 'agent run "t" · tools'
    assert plain[1:4] == ['tool call: noop {"x": 7}', "  → got 7", "All done."]
    assert plain[-1].startswith("[completed · 2 model calls · 1 tool call")
    broken = ScriptedModel([ProviderError("upstream is down", provider="acme", model="x", retryable=False)])
    session.register_model("broken", broken)
    run_ok(shell, "%%agent --model broken\nhi")
    failed = last_run(shell)._repr_mimebundle_()
    assert "**run failed: ProviderError: upstream is down" in failed["text/markdown"]
    assert "running" not in failed["text/plain"]


def test_the_record_neutralises_html_and_script_links_from_the_model(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    # The frontend renders the record's Markdown as trusted output: model text must not become live HTML.
    hostile = '<img src="x" onerror="steal()"> [bad](javascript:steal()) `a<b` ![pic](https://evil.example/p.png)'
    session.register_tool(_noop, name="noop")
    session.register_model("hostile", ScriptedModel([ScriptedModel.tool_call("noop", {"x": 1}), hostile]))
    run_ok(shell, "%%agent --model hostile --name h\nhi")
    markdown = last_run(shell)._repr_mimebundle_()["text/markdown"]
    assert "<img" not in markdown
    assert "&lt;img" in markdown
    assert "](javascript:" not in markdown
    assert re.search(r"(?<!\\)!\[pic\]", markdown) is None  # an image becomes a plain link: nothing is fetched
    assert "got 1" in markdown
    assert "hi" not in markdown.split("\n")[0]


def test_a_reused_name_means_the_newest_run(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel(["one", "two"]))
    run_ok(shell, "%%agent --model fake --name same\nfirst")
    run_ok(shell, "%%agent --model fake --name same\nsecond")
    newest = shell.user_ns["same"]
    assert session.find_run("same") is newest
    assert newest.final_text == "two"
    with pytest.raises(LookupError, match="no run matches"):
        session.find_run("other")
