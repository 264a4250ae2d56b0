"""``MCPServer.http``: the calc server over streamable HTTP on 127.0.0.1, with a secret header."""

from __future__ import annotations

import asyncio
import json

import pytest

from tinyagents_nb.harness import AgentHarness, RunContext, ToolMessage, event_to_dict
from tinyagents_nb.harness.mcp import MCPConnectionError, MCPServer
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

TOKEN = "Bearer tk-http-secret-0123456789"


def test_calc_add_over_streamable_http(http_url: str) -> None:
    server = MCPServer.http("web", http_url, {"Authorization": TOKEN})
    model = ScriptedModel(
        [
            ScriptedModel.tool_calls([("web_add", {"a": 2, "b": 3}), ("web_whoami", {})]),
            ScriptedModel.text("5"),
        ]
    )
    agent = AgentHarness(model=model, tools=[server])
    ctx = RunContext()
    recorder = EventRecorder(ctx.events)
    try:
        run = asyncio.run(agent.invoke_in_context(ctx, "add"))
        texts = [m.text for m in run.messages if isinstance(m, ToolMessage)]
        assert texts == ["5", "***"]  # the header reached the server, and came back masked
        shown = json.dumps([event_to_dict(e) for e in recorder.events], default=str) + repr(server) + repr(agent)
        assert "tk-http-secret" not in shown
    finally:
        agent.close()
    assert not server.running


def test_an_unreachable_http_server_is_a_typed_error_without_secrets() -> None:
    server = MCPServer.http(
        "gone", "http://127.0.0.1:9/mcp?token=query-secret-123", {"Authorization": TOKEN}, startup_timeout_s=10
    )

    async def main() -> None:
        try:
            await server.list_tools()
        finally:
            await server.aclose()

    with pytest.raises(MCPConnectionError) as caught:
        asyncio.run(main())
    text = str(caught.value)
    assert "did not start" in text
    assert "127.0.0.1:9" in text
    assert "tk-http-secret" not in text
    assert "query-secret-123" not in text
