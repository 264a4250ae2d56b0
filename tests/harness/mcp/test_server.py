"""An MCP server's tools in an ``AgentHarness``: a real stdio server (``calc_server.py``) and a scripted model."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ModelRequest,
    ModelResponse,
    RunCancelled,
    RunContext,
    RunPolicy,
    ToolError,
    ToolMessage,
    event_to_dict,
)
from tinyagents_nb.harness.mcp import MCPConnectionError, MCPServer, MCPTool
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel, ScriptedModel

from .conftest import SECRET, SERVER, gone

Factory = Callable[..., MCPServer]


def tool_texts(run_messages: list[object]) -> list[str]:
    return [m.text for m in run_messages if isinstance(m, ToolMessage)]


def test_a_scripted_model_calls_calc_add_and_gets_5(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel([ScriptedModel.tool_call("calc_add", {"a": 2, "b": 3}), ScriptedModel.text("It is 5.")])
    agent = AgentHarness(model=model, tools=[server])
    run = agent.run_sync("What is 2 + 3?")
    assert run.final_text == "It is 5."
    [message] = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert (message.name, message.text, message.is_error) == ("calc_add", "5", False)
    assert server.running
    assert server.starts == 1


def test_the_model_sees_prefixed_tools_with_their_published_schema(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel([ScriptedModel.text("ok")])
    AgentHarness(model=model, tools=[server]).run_sync("hi")
    schemas = {s.name: s for s in model.requests[0].tools}
    assert {"calc_add", "calc_fail", "calc_slow", "calc_pid"} <= set(schemas)
    add = schemas["calc_add"]
    assert add.description == "Add two integers."
    assert add.parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    assert all(isinstance(t, MCPTool) and t.server is server for t in server.tools)


def test_a_tool_error_reaches_the_model_as_an_error_result(stdio_server: Factory) -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("calc_fail", {"message": "the disk is full"}), ScriptedModel.text("sorry")]
    )
    run = AgentHarness(model=model, tools=[stdio_server()]).run_sync("go")
    [message] = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert message.is_error
    assert "the disk is full" in message.text
    assert run.status == "completed"


def test_invalid_arguments_come_back_as_an_error_result(stdio_server: Factory) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("calc_add", {"a": "two", "b": 3}), ScriptedModel.text("ok")])
    run = AgentHarness(model=model, tools=[stdio_server()]).run_sync("go")
    [message] = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert message.is_error
    assert "a" in message.text


def test_images_become_a_note_for_the_model_and_data_for_uis(stdio_server: Factory) -> None:
    server = stdio_server()

    async def main() -> None:
        [picture] = [t for t in await server.list_tools() if t.name == "calc_picture"]
        result = await picture.call(RunContext(), {})
        assert result.text.startswith("[image: image/png, ")
        assert result.data["content"][0]["mime_type"] == "image/png"

    asyncio.run(main())


def test_stop_cancels_a_slow_call_and_the_server_sees_the_cancellation(stdio_server: Factory, markers: Path) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("calc_slow", {"seconds": 60}), ScriptedModel.text("never")])
    agent = AgentHarness(model=model, tools=[stdio_server()])

    async def main() -> float:
        ctx = RunContext()
        task = asyncio.create_task(agent.invoke_in_context(ctx, "sleep"))
        while not (markers / "started").exists():
            assert not task.done(), task
            await asyncio.sleep(0.02)
        stopped = time.monotonic()
        ctx.cancellation.cancel("Stop")
        with pytest.raises(RunCancelled):
            await task
        return time.monotonic() - stopped

    elapsed = asyncio.run(main())
    assert elapsed < 2.0, f"the run took {elapsed:.2f} s to end after Stop"
    deadline = time.monotonic() + 5
    while not (markers / "cancelled").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (markers / "cancelled").read_text() == "yes"  # notifications/cancelled reached the server


def test_a_call_past_its_timeout_is_cancelled_on_the_server_and_reported_to_the_model(
    stdio_server: Factory, markers: Path
) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("calc_slow", {"seconds": 60}), ScriptedModel.text("too slow")])
    started = time.monotonic()
    run = AgentHarness(model=model, tools=[stdio_server(timeout_s=1.0)]).run_sync("sleep")
    assert time.monotonic() - started < 30
    [message] = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert message.is_error
    assert "timed out after 1 s" in message.text
    deadline = time.monotonic() + 5
    while not (markers / "cancelled").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (markers / "cancelled").exists()


def test_a_server_that_crashes_mid_call_gives_a_typed_error_and_restarts_on_next_use(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel([ScriptedModel.tool_call("calc_crash", {})])
    agent = AgentHarness(model=model, tools=[server], policy=RunPolicy(tool_errors="fail"))
    with pytest.raises(ToolError) as caught:
        agent.run_sync("crash")
    error = caught.value.__cause__
    assert isinstance(error, MCPConnectionError)
    assert error.server == "calc"
    assert "calc server: about to crash" in error.stderr_tail
    assert "about to crash" in str(error)
    assert not server.running

    model = ScriptedModel([ScriptedModel.tool_call("calc_add", {"a": 1, "b": 1}), ScriptedModel.text("2")])
    run = AgentHarness(model=model, tools=[server]).run_sync("again")
    assert tool_texts(run.messages) == ["2"]
    assert server.starts == 2


def test_a_server_that_exits_while_idle_is_restarted_by_the_next_call(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("calc_exit_later", {"seconds": 0.2}),
            "ok",
            ScriptedModel.tool_call("calc_add", {"a": 2, "b": 3}),
            "5",
        ]
    )
    agent = AgentHarness(model=model, tools=[server])
    assert tool_texts(agent.run_sync("exit").messages) == ["bye"]
    deadline = time.monotonic() + 10
    while server.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server.running  # noticed without a call: its stdout ended
    assert tool_texts(agent.run_sync("add").messages)[-1] == "5"
    assert server.starts == 2


def test_a_crash_under_the_default_policy_is_an_error_result_for_the_model(stdio_server: Factory) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("calc_crash", {}), ScriptedModel.text("it crashed")])
    run = AgentHarness(model=model, tools=[stdio_server()]).run_sync("crash")
    [message] = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert message.is_error
    assert "MCPConnectionError" in message.text
    assert "about to crash" in message.text
    assert run.final_text == "it crashed"


def test_a_server_writing_megabytes_to_stderr_neither_blocks_nor_floods(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel([ScriptedModel.tool_call("calc_noisy", {"kilobytes": 4096}), ScriptedModel.text("ok")])
    run = AgentHarness(model=model, tools=[server]).run_sync("be noisy")
    assert tool_texts(run.messages) == ["ok"]  # 4 MB through a pipe nobody read would have blocked it
    assert server.log_path is not None
    assert Path(server.log_path).stat().st_size > 4_000_000
    tail = server.stderr_tail(lines=3)
    assert tail.splitlines()[-1] == "noisy: last line"
    assert len(tail) < 4_000


def test_closing_the_harness_leaves_no_process_behind(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel([ScriptedModel.tool_call("calc_pid", {}), ScriptedModel.text("ok")])
    agent = AgentHarness(model=model, tools=[server])
    [pid_text] = tool_texts(agent.run_sync("pid").messages)
    pid = int(pid_text)
    assert not gone(pid, within_s=0.2)
    log = server.log_path
    agent.close()
    assert gone(pid), f"MCP server process {pid} outlived the harness"
    assert not server.running
    assert log is not None
    assert not Path(log).exists()


def test_one_server_serves_runs_on_different_event_loops(stdio_server: Factory) -> None:
    server = stdio_server()
    script = [ScriptedModel.tool_call("calc_pid", {}), ScriptedModel.text("ok")]
    agent = AgentHarness(model=ScriptedModel(script * 3), tools=[server])
    first = tool_texts(agent.run_sync("a").messages)  # run_sync: a private loop per call
    second = tool_texts(agent.run_sync("b").messages)
    third = tool_texts(asyncio.run(agent.invoke("c")).messages)
    assert first == second == third
    assert server.starts == 1
    agent.close()
    assert not server.running
    assert [t.name for t in server.start()][:2] == ["calc_add", "calc_fail"]  # a closed server starts again
    assert server.running
    assert server.starts == 2


def test_a_tool_added_by_the_server_is_offered_at_the_next_model_call(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("calc_grow", {}),
            ScriptedModel.tool_call("calc_mul", {"a": 3, "b": 4}),
            ScriptedModel.text("12"),
        ]
    )
    run = AgentHarness(model=model, tools=[server]).run_sync("grow")
    assert tool_texts(run.messages) == ["grown", "12"]
    assert "calc_mul" not in {s.name for s in model.requests[0].tools}
    assert "calc_mul" in {s.name for s in model.requests[1].tools}


def test_the_tool_list_is_cached_until_the_server_announces_a_change(stdio_server: Factory) -> None:
    server = stdio_server()

    async def main() -> None:
        first = await server.list_tools()
        assert await server.list_tools() is first  # no round trip, same tuple: the registry does no work

    asyncio.run(main())


def test_secrets_never_reach_events_results_errors_or_reprs(stdio_server: Factory) -> None:
    server = stdio_server()
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("calc_env", {"name": "CALC_SECRET"}),
            ScriptedModel.tool_call("calc_crash", {}),
            ScriptedModel.text("done"),
        ]
    )
    agent = AgentHarness(model=model, tools=[server])
    ctx = RunContext()
    recorder = EventRecorder(ctx.events)
    run = asyncio.run(agent.invoke_in_context(ctx, "leak it"))
    texts = tool_texts(run.messages)
    assert texts[0] == "***"  # the server did read the value: it came back masked
    assert "MCPConnectionError" in texts[1]
    assert "env CALC_SECRET=***" in texts[1]
    shown = [
        repr(server),
        repr(agent),
        repr(server.tools),
        json.dumps([event_to_dict(e) for e in recorder.events], default=str),
        *texts,
        *(m.text for m in model.requests[-1].messages),
    ]
    assert not [s for s in shown if SECRET in s]


def test_a_server_still_running_at_interpreter_exit_is_stopped(markers: Path) -> None:
    code = (
        "import sys\n"
        "from tinyagents_nb.harness import MCPServer\n"
        f"server = MCPServer.stdio('calc', sys.executable, [{str(SERVER)!r}], env={{'MARKER_DIR': {str(markers)!r}, 'CALC_IGNORE_EOF': '1'}})\n"
        "server.start()\n"
        "import asyncio\n"
        "print(asyncio.run(server.call_tool('pid', {})).data['result'], flush=True)\n"
    )  # no close(): the atexit hook must stop it, and this server ignores the end of its stdin
    # The timeout only guards against a hang (15 s at load 8; 54-60 s at load 15 beside the rest of the suite).
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, check=True)
    pid = int(out.stdout.strip())
    assert gone(pid), f"MCP server process {pid} outlived the interpreter that started it"


def test_closing_a_server_during_a_call_fails_the_call_with_a_typed_error(stdio_server: Factory, markers: Path) -> None:
    server = stdio_server()

    async def main() -> None:
        call = asyncio.create_task(server.call_tool("slow", {"seconds": 60}))
        while not (markers / "started").exists():  # noqa: ASYNC110 - another process writes the marker
            await asyncio.sleep(0.02)
        await asyncio.to_thread(server.close)
        with pytest.raises(MCPConnectionError, match="calc"):
            await call

    asyncio.run(main())
    assert not server.running


def test_a_servers_requires_approval_gates_its_tools(stdio_server: Factory, markers: Path) -> None:
    # Nobody can answer under run_sync: the unattended policy decides, before anything reaches the server.
    calls = [("calc_add", {"a": 2, "b": 3}), ("calc_pid", {})]
    script = [ScriptedModel.tool_calls(calls), ScriptedModel.text("done")]
    denied = AgentHarness(
        model=ScriptedModel(list(script)),
        tools=[stdio_server(requires_approval={"add"})],
        policy=RunPolicy(unattended_approval="deny"),
    ).run_sync("go")
    by_name = {m.name: m for m in denied.messages if isinstance(m, ToolMessage)}
    assert by_name["calc_add"].is_error
    assert "denied" in by_name["calc_add"].text
    assert not by_name["calc_pid"].is_error  # only the named tool waits for approval
    approved = AgentHarness(
        model=ScriptedModel(list(script)),
        tools=[stdio_server(requires_approval=True)],
        policy=RunPolicy(unattended_approval="approve"),
    ).run_sync("go")
    assert next(m.text for m in approved.messages if isinstance(m, ToolMessage)) == "5"


def test_a_bad_requires_approval_is_a_configuration_error() -> None:
    from tinyagents_nb.harness import ConfigurationError

    with pytest.raises(ConfigurationError, match="requires_approval"):
        MCPServer.stdio("calc", sys.executable, ["x.py"], requires_approval=3)  # type: ignore[arg-type]


def test_a_helper_process_the_server_started_does_not_outlive_close(stdio_server: Factory) -> None:
    server = stdio_server()

    async def helper_pid() -> int:
        return int((await server.call_tool("spawn_helper", {})).text)

    helper = asyncio.run(helper_pid())
    assert not gone(helper, within_s=0.2)
    server.close()  # the server exits at the end of its stdin; its helper must go too
    assert gone(helper), f"helper process {helper} outlived the MCP server's close()"


def test_a_helper_process_the_server_started_does_not_outlive_the_interpreter(markers: Path) -> None:
    code = (
        "import sys, asyncio\n"
        "from tinyagents_nb.harness import MCPServer\n"
        f"server = MCPServer.stdio('calc', sys.executable, [{str(SERVER)!r}], env={{'MARKER_DIR': {str(markers)!r}}})\n"
        "print(asyncio.run(server.call_tool('spawn_helper', {})).text, flush=True)\n"
    )  # no close(): interpreter exit must end the server and what it started
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, check=True)
    helper = int(out.stdout.strip())
    assert gone(helper), f"helper process {helper} outlived the interpreter"


def _reader_model() -> FunctionModel:
    """Calls ``calc_big`` for 10 MB, then reads the kept raw output back from offset 5,000,000."""

    def answer(request: ModelRequest) -> ModelResponse:
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not results:
            return ScriptedModel.tool_call("calc_big", {"megabytes": 10})
        if len(results) == 1:
            match = re.search(r"under key '([^']+)'", results[0].text)
            if match is None:
                return ScriptedModel.text("not cut")
            return ScriptedModel.tool_call("read_tool_output", {"key": match.group(1), "offset": 5_000_000})
        return ScriptedModel.text("read")

    return FunctionModel(answer, model_name="reader")


def test_a_10_mb_result_is_cut_at_arrival_kept_raw_and_readable_by_default(stdio_server: Factory) -> None:
    model = _reader_model()
    run = AgentHarness(model=model, tools=[stdio_server()]).run_sync("read the log")
    first, page = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert len(first.text) <= 20_000
    assert "of 10,000,000 chars" in first.text or "of 10000000 chars" in first.text
    assert "read_tool_output" not in {s.name for s in model.requests[0].tools}  # offered only once needed
    assert "read_tool_output" in {s.name for s in model.requests[1].tools}
    assert page.text.startswith("[chars 5000000-5020000 of 10000000")
    assert run.final_text == "read"


def test_the_default_result_limit_is_configurable(stdio_server: Factory) -> None:
    server = stdio_server()
    small = AgentHarness(model=_reader_model(), tools=[server], policy=RunPolicy(tool_result_limit=5_000))
    assert len(next(m for m in small.run_sync("go").messages if isinstance(m, ToolMessage)).text) <= 5_000
    whole = AgentHarness(model=_reader_model(), tools=[server], policy=RunPolicy(tool_result_limit=None))
    run = whole.run_sync("go")
    assert len(next(m for m in run.messages if isinstance(m, ToolMessage)).text) == 10_000_000
    assert run.final_text == "not cut"
