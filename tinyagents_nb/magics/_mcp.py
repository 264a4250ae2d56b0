"""``%agent mcp …``: Model Context Protocol servers whose tools every ``%%agent`` run of the kernel gets.

The command parses its words and edits the session's ``SessionServers`` (see ``_servers``).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from tinyagents_nb.harness import MCPServer

from ._command_host import CommandHost
from ._servers import SessionServers
from ._session import NotebookSession

__all__ = ["mcp_command"]

USAGE = (
    "use %agent mcp list, %agent mcp add NAME -- COMMAND ARGS…, %agent mcp add NAME --url URL, "
    "or %agent mcp remove NAME"
)


def _add(servers: SessionServers, args: list[str]) -> None:
    if len(args) < 3 or args[1] not in ("--", "--url"):
        raise UsageError(USAGE)
    name, how, rest = args[0], args[1], args[2:]
    if how == "--url":
        if len(rest) != 1:
            raise UsageError("%agent mcp add NAME --url URL takes one URL (set headers from Python: MCPServer.http)")
        server = MCPServer.http(name, rest[0])
    else:
        server = MCPServer.stdio(name, rest[0], rest[1:])
    servers.add(server)
    tools = ", ".join(t.name for t in server.tools) or "none"
    print(f"MCP server {name} ({server.transport}: {server.target}): {len(server.tools)} tools: {tools}")


def mcp_command(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    """``%agent mcp [list | add … | remove NAME…]``."""
    servers = session.mcp
    action, rest = (args[0], args[1:]) if args else ("list", [])
    if action == "list" and not rest:
        frame = servers.frame()
        if frame.empty:
            print("no MCP servers yet: add one with %agent mcp add NAME -- COMMAND ARGS… (or --url URL)")
            return None
        return frame
    if action == "add":
        _add(servers, rest)
        return None
    if action == "remove" and rest:
        for name in rest:
            servers.remove(name)
        print(f"removed {', '.join(rest)}; MCP servers: {', '.join(servers.names()) or 'none'}")
        return None
    raise UsageError(USAGE)
