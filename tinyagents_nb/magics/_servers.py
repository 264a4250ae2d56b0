"""The MCP servers a ``NotebookSession`` holds, kept below the session so it can own them.

The session owns its servers: a run's harness sees them through ``ServerSet``, a ``ToolProvider``
whose ``aclose`` does nothing, so finishing a run (which closes its harness) leaves them running for
the next cell. They stop with ``%agent mcp remove`` and at kernel exit (the harness's atexit hook).
``%agent mcp`` (in ``_mcp``, above the session) edits them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tinyagents_nb.harness import MCPServer, RunContext, Tool

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ServerSet", "SessionServers"]


class ServerSet:
    """Some of the session's servers as one ``ToolProvider`` for a run; closing it leaves them running."""

    name = "notebook MCP servers"

    def __init__(self, servers: Sequence[MCPServer]) -> None:
        self._servers = tuple(servers)
        self._key: tuple[int, ...] = ()
        self._tools: tuple[Tool, ...] = ()

    async def list_tools(self, ctx: RunContext[Any]) -> Sequence[Tool]:
        listed = [await server.list_tools(ctx) for server in self._servers]
        key = tuple(id(tools) for tools in listed)
        if key != self._key:  # a server's list changed: a new tuple, so the registry rebuilds
            self._key, self._tools = key, tuple(t for tools in listed for t in tools)
        return self._tools

    async def aclose(self) -> None:
        return None  # the session's servers outlive each run's harness


class SessionServers:
    """The session's MCP servers, by name."""

    def __init__(self) -> None:
        self._servers: dict[str, MCPServer] = {}

    def __len__(self) -> int:
        return len(self._servers)

    def names(self) -> list[str]:
        return sorted(self._servers)

    def add(self, server: MCPServer, *, start: bool = True) -> MCPServer:
        """Register ``server`` (replacing, and stopping, one of the same name); ``start`` checks it now.

        Raises:
            MCPConnectionError: ``start`` and the server did not start; it is not registered then.
        """
        if start:
            try:
                server.start()
            except BaseException:
                server.close()
                raise
        old = self._servers.pop(server.name, None)
        if old is not None and old is not server:
            old.close()
        self._servers[server.name] = server
        return server

    def remove(self, name: str) -> MCPServer:
        """Stop and forget the server ``name``.

        Raises:
            KeyError: No server has that name.
        """
        server = self._servers.pop(name, None)
        if server is None:
            raise KeyError(f"no MCP server named {name!r}; registered: {', '.join(self.names()) or 'none'}")
        server.close()
        return server

    def close_all(self) -> None:
        """Stop and forget every server (the extension is unloaded: this session is discarded)."""
        for name in self.names():
            self.remove(name)

    def split(self, names: Sequence[str] | None) -> tuple[Sequence[str] | None, list[ServerSet]]:
        """``--tools`` names → (the names that are not servers, the providers a run gets).

        No names: every server. Otherwise a server's name in the list selects all of its tools.
        """
        if names is None:
            return None, [ServerSet(list(self._servers.values()))] if self._servers else []
        chosen = [self._servers[n] for n in names if n in self._servers]
        rest = [n for n in names if n not in self._servers]
        return rest, [ServerSet(chosen)] if chosen else []

    def frame(self) -> pd.DataFrame:
        """One row per server: name, transport, where it runs, whether it is up, its tools and stderr log."""
        import pandas as pd

        rows = [
            {
                "server": s.name,
                "transport": s.transport,
                "target": s.target,
                "status": "running" if s.running else "stopped",
                "tools": ", ".join(t.name for t in s.tools),
                "stderr log": s.log_path or "",
            }
            for s in (self._servers[n] for n in self.names())
        ]
        return pd.DataFrame(rows, columns=["server", "transport", "target", "status", "tools", "stderr log"])
