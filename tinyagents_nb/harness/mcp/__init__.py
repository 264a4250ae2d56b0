"""Model Context Protocol servers as agent tools: ``AgentHarness(tools=[MCPServer.stdio(...)])``.

``MCPServer.stdio`` runs a local server process; ``MCPServer.http`` reaches a streamable-HTTP
endpoint. Each of its tools is offered to the model as ``{server}_{tool}``. Built on the official
``mcp`` SDK, an optional extra: ``pip install 'tinyagents-nb[mcp]'``; this namespace imports
without it, and building a server without it raises ``MCPUnavailableError``.
"""

from __future__ import annotations

from ._errors import (
    MCPConnectionError as MCPConnectionError,
    MCPError as MCPError,
    MCPUnavailableError as MCPUnavailableError,
)
from ._server import (
    MCPServer as MCPServer,
    MCPTool as MCPTool,
)

__all__ = ["MCPConnectionError", "MCPError", "MCPServer", "MCPTool", "MCPUnavailableError"]
