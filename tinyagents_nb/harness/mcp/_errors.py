"""The errors of the MCP family, under the harness's one tree.

```
TinyAgentsError
├── ConfigurationError
│   └── MCPUnavailableError      the optional ``mcp`` SDK is not installed
└── MCPError                     an MCP server could not be used
    └── MCPConnectionError       it did not start, or its connection or process ended
```

A failing tool call surfaces to the model as an error tool result (the run's ``tool_errors`` policy);
a server that cannot list its tools at run start fails the run. Messages never hold a server's
secrets (environment values, header values): they pass through the server's redactor first.
"""

from __future__ import annotations

from .._errors import ConfigurationError, TinyAgentsError

__all__ = ["MCPConnectionError", "MCPError", "MCPUnavailableError"]

INSTALL_HINT = "pip install 'tinyagents-nb[mcp]'"


class MCPUnavailableError(ConfigurationError):
    """The ``mcp`` SDK that MCP servers need is not installed (it is the optional extra ``[mcp]``)."""

    def __init__(self) -> None:
        super().__init__(f"MCP servers need the optional `mcp` package: {INSTALL_HINT}")


class MCPError(TinyAgentsError):
    """An MCP server answered with a protocol error, or could not be used.

    Attributes:
        server: The server's name.
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class MCPConnectionError(MCPError):
    """The server did not start, or its process or connection ended; the next use starts it again.

    Attributes:
        stderr_tail: The last lines the (stdio) server wrote to stderr, redacted; ``""`` if none.
    """

    def __init__(self, message: str, *, server: str, stderr_tail: str = "") -> None:
        text = f"{message}\n--- last lines of its stderr ---\n{stderr_tail}" if stderr_tail else message
        super().__init__(text, server=server)
        self.stderr_tail = stderr_tail
