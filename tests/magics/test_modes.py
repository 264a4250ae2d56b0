"""Waiting-mode plumbing without a kernel: the cell transformers, honest controls, the record, name lookup."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ProviderError
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel
from tinyagents_nb.magics import NotebookSession
from tinyagents_nb.magics._waiting import UNREACHABLE, agent_cell_transformer, agent_wait_transformer

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


_AWAIT_WAIT = 'await get_ipython().magics_manager.registry["AgentMagics"].agent_wait_async('


def test_the_transformer_turns_top_level_agent_wait_lines_into_awaiting_ones(shell: InteractiveShell) -> None:
    transform = agent_wait_transformer()
    lines = ["x = 1\n", "%agent wait --timeout 5\n", "print(x)\n", "%agent wait {who}"]
    out = transform(lines)
    assert out[0] == "x = 1\n"
    assert out[2] == "print(x)\n"
    assert out[1] == _AWAIT_WAIT + "get_ipython().var_expand('wait --timeout 5'))\n"
    assert out[3] == _AWAIT_WAIT + "get_ipython().var_expand('wait {who}'))\n"
    compile("".join(out), "<cell>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT: a valid awaiting cell
    shell.user_ns["who"] = "long"  # {name} expands as run_line_magic expands it
    assert shell.ev(out[3].removeprefix(_AWAIT_WAIT).removesuffix(")\n")) == "wait long"
    for untouched in (
        ["if True:\n", "    %agent wait\n"],  # indented: inside a block an await may not be allowed
        ["%agent stop\n", "%agent status\n", "%agent\n"],  # other commands stay synchronous
        ["%agent waiting\n", "%agentwait\n", "% agent wait\n", "%agent 'unclosed wait\n"],
        ["%%agent --background\n", "%agent wait\n"],  # a cell magic's body is its own text
        ["%%agent\n", "%agent wait\n"],
        ['s = """\n', "%agent wait\n", '"""\n'],  # inside a string
        ["f(1,\n", "%agent wait)\n"],  # inside brackets
        ["%agent wait \\\n", "  --timeout 3\n"],  # continued over two rows
        [],
    ):
        assert transform(untouched) == untouched
    waiting_cell = ["%%agent --name q1\n", "%agent wait\n"]  # the %%agent transformer's, untouched by this one
    assert transform(waiting_cell) == waiting_cell


def _waited(capsys: pytest.CaptureFixture[str], *labels: str) -> list[str]:
    """The lines %agent wait printed (without a kernel the dashboards and records print too)."""
    prefixes = (*(f"{label}: " for label in labels), "stopped waiting", "no active run")
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith(prefixes)]


def test_an_awaiting_agent_wait_prints_what_the_blocking_one_prints(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("quick", SlowModel(ScriptedModel(["x"]), delay_s=0.3))
    session.register_model("slower", SlowModel(ScriptedModel(["x"]), delay_s=30))
    shell.input_transformers_cleanup.append(agent_wait_transformer())  # as the extension does on ipykernel 7
    run_ok(shell, "%agent wait")
    assert _waited(capsys) == ["no active run to wait for"]
    run_ok(shell, "%%agent --background --model slower --name long\nhi")
    run_ok(shell, "%%agent --background --new-thread --model quick --name short\nhi")
    run_ok(shell, "which = 'short'\n%agent wait {which}")  # through the transformer and the awaiting twin
    assert _waited(capsys, "short")[0].startswith("short: [completed · 1 model call")
    timed_out = ["long: [running]", "stopped waiting after 0.2 s; still active: long"]
    run_ok(shell, "%agent wait long --timeout 0.2")
    assert _waited(capsys, "long") == timed_out
    magics = shell.magics_manager.registry["AgentMagics"]
    asyncio.run(magics.agent_wait_async("wait long --timeout 0.2"))
    assert _waited(capsys, "long") == timed_out
    with pytest.raises(UsageError, match="--timeout needs a number of seconds > 0"):
        asyncio.run(magics.agent_wait_async("wait --timeout -1"))
    assert (
        len(asyncio.run(magics.agent_wait_async("runs"))) == 2
    )  # another command (only a direct call sends one) runs as usual
    session.find_run("long").cancel()


def test_interrupting_an_awaiting_agent_wait_stops_the_wait_and_leaves_the_runs_going(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("slower", SlowModel(ScriptedModel(["x"]), delay_s=30))
    run_ok(shell, "%%agent --background --model slower --name long\nhi")
    magics = shell.magics_manager.registry["AgentMagics"]

    async def interrupted() -> bool:
        task = asyncio.create_task(magics.agent_wait_async("wait all"))
        await asyncio.sleep(0.3)
        task.cancel()  # what ■ does to an awaiting cell on ipykernel 7
        await task
        return task.cancelled()

    assert asyncio.run(interrupted()) is False  # the cancel was taken as "stop waiting", not re-raised
    assert _waited(capsys, "long") == [
        "long: [running]",
        "stopped waiting; still active: long (%agent stop all stops them)",
    ]
    run = last_run(shell)
    assert run.status == "running"
    run.cancel()
    assert run.future is not None
    assert run.future.result(timeout=10).status == "cancelled"


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
