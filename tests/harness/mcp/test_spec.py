"""Building servers: validation, what is shown, the redactor, provider-safe tool names, and the missing extra."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

from tinyagents_nb.harness import AgentHarness, ConfigurationError, ToolMessage
from tinyagents_nb.harness.mcp import MCPServer, MCPUnavailableError
from tinyagents_nb.harness.testkit import ScriptedModel

from .conftest import SECRET


def test_a_stdio_server_shows_its_command_but_never_its_environment() -> None:
    server = MCPServer.stdio("fs", "npx", ["-y", "server-fs"], env={"API_TOKEN": "tok-123456789"})
    assert server.target == "npx -y server-fs"
    assert "tok-123456789" not in repr(server)
    assert repr(server) == "MCPServer(name='fs', transport='stdio', target='npx -y server-fs', stopped)"
    assert not server.running
    assert server.tools == ()
    assert server.log_path is None


def test_an_http_server_hides_credentials_query_and_headers() -> None:
    server = MCPServer.http(
        "docs", "https://user:pa55word-x@example.test:8443/mcp?key=abcdef123456", {"Authorization": "Bearer tk-98765"}
    )
    assert server.target == "https://example.test:8443/mcp?…"
    for secret in ("pa55word-x", "abcdef123456", "tk-98765", "Bearer"):
        assert secret not in repr(server)


def test_the_redactor_masks_every_secret_in_nested_values() -> None:
    server = MCPServer.http("docs", "http://127.0.0.1:1/mcp", {"Authorization": "Bearer tk-98765-abc"})
    redact = server._spec.redact
    assert redact("sent Bearer tk-98765-abc") == "sent ***"
    assert redact("token tk-98765-abc alone") == "token *** alone"
    assert redact({"a": ["x tk-98765-abc"], "n": 1}) == {"a": ["x ***"], "n": 1}
    assert MCPServer.http("h", "http://127.0.0.1:1/mcp", {"X-Flag": "1"})._spec.redact("1 2 3") == "1 2 3"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: MCPServer.stdio("bad name", "python"), "invalid MCP server name"),
        (lambda: MCPServer.stdio("ok", ""), "needs a command"),
        (lambda: MCPServer.stdio("ok", "python", "server.py"), "sequence of strings"),
        (lambda: MCPServer.stdio("ok", "python", env={"K": 1}), "map str to str"),
        (lambda: MCPServer.stdio("ok", "python", timeout_s=0), "timeout_s"),
        (lambda: MCPServer.http("ok", "ftp://host/mcp"), r"http\(s\) URL"),
        (lambda: MCPServer.http("ok", "not a url"), r"http\(s\) URL"),
    ],
)
def test_bad_input_is_a_configuration_error(build: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build()  # type: ignore[operator]


def test_a_bad_env_value_is_reported_without_its_value() -> None:
    with pytest.raises(ConfigurationError) as caught:
        MCPServer.stdio("ok", "python", env={"TOKEN": b"hunter2-secret"})  # type: ignore[dict-item]
    assert "hunter2" not in str(caught.value)


def test_tool_names_are_prefixed_and_made_provider_safe(stdio_server: Callable[..., MCPServer]) -> None:
    server = stdio_server("calc", env={"CALC_ODD_NAMES": "1"})
    tools = {tool.name: tool for tool in server.start()}
    assert tools["calc_add"].remote_name == "add"
    assert tools["calc_read_file_v2"].remote_name == "read.file/v2"
    long = sorted((t for t in tools.values() if t.remote_name.startswith("ttt")), key=lambda t: len(t.remote_name))
    assert [len(t.remote_name) for t in long] == [99, 100]
    assert [len(t.name) for t in long] == [64, 64]
    assert all(t.name.startswith("calc_ttt") and re.fullmatch(r"[A-Za-z0-9_-]+", t.name) for t in long)
    assert long[0].name != long[1].name  # the hash of the remote name tells them apart
    model = ScriptedModel([ScriptedModel.tool_call("calc_read_file_v2", {"text": "hi"}), ScriptedModel.text("ok")])
    run = AgentHarness(model=model, tools=[server]).run_sync("echo")
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["hi"]  # called under its remote name


def test_without_the_extra_the_harness_imports_and_a_server_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None\n"  # as if `mcp` were not installed
        "import tinyagents_nb.harness as h\n"
        "try:\n"
        "    h.MCPServer.stdio('calc', 'python')\n"
        "except h.ConfigurationError as exc:\n"
        "    print(type(exc).__name__, '|', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == (
        "MCPUnavailableError | MCP servers need the optional `mcp` package: pip install 'tinyagents-nb[mcp]'"
    )
    assert issubclass(MCPUnavailableError, ConfigurationError)


def test_tools_that_collide_once_made_provider_safe_all_stay_callable(stdio_server: Callable[..., MCPServer]) -> None:
    server = stdio_server("calc", env={"CALC_CLASH_NAMES": "1"})
    clashing = {
        tool.remote_name: tool.name for tool in server.start() if tool.remote_name in ("a b", "a.b", "a/b", "a_b")
    }
    assert set(clashing) == {"a b", "a.b", "a/b", "a_b"}
    assert clashing["a_b"] == "calc_a_b"  # the name that needed no change keeps it
    assert len(set(clashing.values())) == 4
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in clashing.values())
    calls = [ScriptedModel.tool_call(clashing[remote], {"text": remote}) for remote in ("a b", "a.b", "a/b", "a_b")]
    run = AgentHarness(model=ScriptedModel([*calls, ScriptedModel.text("ok")]), tools=[server]).run_sync("all four")
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["a b", "a.b", "a/b", "a_b"]


def test_secrets_in_tool_descriptions_and_input_schemas_never_reach_the_provider(
    stdio_server: Callable[..., MCPServer],
) -> None:
    server = stdio_server("calc", env={"CALC_LEAKY": "1"})
    model = ScriptedModel([ScriptedModel.tool_call("calc_leaky", {"text": "hi"}), ScriptedModel.text("ok")])
    AgentHarness(model=model, tools=[server]).run_sync("go")
    [leaky] = [s for s in model.requests[0].tools if s.name == "calc_leaky"]
    assert "***" in leaky.description
    assert "***" in json.dumps(leaky.parameters)
    sent = json.dumps([[s.description, s.parameters] for r in model.requests for s in r.tools])
    assert SECRET not in sent
