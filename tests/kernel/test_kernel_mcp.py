"""``%agent mcp`` in a real kernel (6.x and 7.x): a stdio server whose stderr has no terminal to go to.

A kernel's ``sys.stderr`` is a ZMQ stream without a file descriptor, which is where naive stdio
clients break; here the server writes megabytes to stderr, runs serve cells in blocking mode (a
worker thread's loop) and background mode (the kernel's loop) alike, and removing it ends its process.
"""

from __future__ import annotations

import time

import pytest

from tests.harness.mcp.conftest import SERVER, gone
from tests.kernel._kernel import KernelHarness

from .test_kernel_magics import wait_for

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

SETUP = """
%load_ext tinyagents_nb
import sys
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session
calls = [
    ScriptedModel.tool_call("calc_noisy", {"kilobytes": 2048}),
    ScriptedModel.tool_call("calc_add", {"a": 2, "b": 3}),
    "It is 5.",
]
get_session().register_model("scripted", ScriptedModel(calls * 2))
"""


def test_mcp_servers_in_a_real_kernel(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    added = kernel.execute(f"%agent mcp add calc -- {{sys.executable}} {SERVER}")
    assert added.status == "ok", added.error
    assert "MCP server calc (stdio: " in added.stdout
    assert "calc_add" in added.stdout

    blocking = kernel.execute("%%agent --model scripted --wait --name first\nadd 2 and 3")
    assert blocking.status == "ok", blocking.error
    assert kernel.value("first.status") == "completed"
    assert kernel.value("first.final_text") == "It is 5."
    tool_texts = "[m.text for m in {}.outcome.messages if m.role == 'tool']"
    assert kernel.value(tool_texts.format("first")) == ["ok", "5"]

    kernel.execute("%%agent --model scripted --name second\nagain, in the background")
    wait_for(kernel, "second.done", timeout=60)
    assert kernel.value(tool_texts.format("second"))[-2:] == ["ok", "5"]  # after the thread's first turn
    assert kernel.value("get_session().mcp._servers['calc'].starts") == 1  # one process served both loops

    listed = kernel.execute("print(get_session().mcp.frame().to_dict('records'))")
    assert "'status': 'running'" in listed.stdout
    pid = kernel.value("(await get_session().mcp._servers['calc'].call_tool('pid', {})).data['result']")
    removed = kernel.execute("%agent mcp remove calc")
    assert removed.status == "ok"
    assert "removed calc" in removed.stdout
    assert gone(pid)
    assert kernel.execute("1 + 1").status == "ok"  # the kernel outlived megabytes of server stderr


def test_stop_during_an_mcp_call_in_a_real_kernel(kernel: KernelHarness) -> None:
    setup = (
        "import os, sys\n"
        "from tinyagents_nb.harness.testkit import ScriptedModel\n"
        "from tinyagents_nb.magics import get_session\n"
        "get_session().register_model('slowcall', ScriptedModel([ScriptedModel.tool_call('calc2_slow', {'seconds': 60})]))"
    )
    assert kernel.execute(setup).status == "ok"
    assert kernel.execute(f"%agent mcp add calc2 -- {{sys.executable}} {SERVER}").status == "ok"
    kernel.execute("%%agent --background --model slowcall --name stuck\nwait for it")  # the kernel goes idle
    wait_for(kernel, "os.path.exists('started')", timeout=60)  # the server is inside the call (its cwd: the kernel's)
    stopped = time.monotonic()
    assert kernel.execute("%agent stop stuck").status == "ok"
    wait_for(kernel, "stuck.done", timeout=10)
    elapsed = time.monotonic() - stopped
    assert kernel.value("stuck.status") == "cancelled"
    assert elapsed < 3.0, f"the run took {elapsed:.2f} s to end after %agent stop"
    wait_for(kernel, "os.path.exists('cancelled')", timeout=10)  # notifications/cancelled reached the server
    assert kernel.execute("%agent mcp remove calc2").status == "ok"
