"""A real MCP server for the tests, written with the SDK's server side.

Run as ``python calc_server.py`` (stdio) or ``python calc_server.py --http PORT`` (streamable HTTP
on 127.0.0.1). ``MARKER_DIR`` (environment) is where ``slow`` records that it started and whether
it saw the client's cancellation; ``CALC_ODD_NAMES`` adds tools whose names no provider accepts as is,
``CALC_CLASH_NAMES`` tools whose names are alike once made provider-safe, ``CALC_LEAKY`` a tool whose
description and input schema quote ``CALC_SECRET``.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from pydantic import Field

app = MCPServer("calc")
MARKERS = Path(os.environ.get("MARKER_DIR", "."))
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@app.tool()
async def slow(seconds: float) -> str:
    """Sleep, recording whether the client cancelled the call."""
    (MARKERS / "started").write_text(str(os.getpid()))
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (MARKERS / "cancelled").write_text("yes")
        raise
    return "slept"


@app.tool()
def crash() -> str:
    """Exit the process in the middle of the call."""
    print("calc server: about to crash", file=sys.stderr, flush=True)
    os._exit(3)


@app.tool()
def noisy(kilobytes: int) -> str:
    """Write that much to stderr, then answer."""
    line = "x" * 1023 + "\n"
    for _ in range(kilobytes):
        sys.stderr.write(line)
    sys.stderr.write("noisy: last line\n")
    sys.stderr.flush()
    return "ok"


@app.tool()
def exit_later(seconds: float) -> str:
    """Answer, then exit the process while the client is idle."""
    threading.Timer(seconds, os._exit, args=(0,)).start()
    return "bye"


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool()
def env(name: str) -> str:
    """An environment variable of the server."""
    value = os.environ.get(name, "")
    print(f"env {name}={value}", file=sys.stderr, flush=True)
    return value


@app.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header the client sent (HTTP only)."""
    headers = ctx.headers or {}
    return str(headers.get("authorization", "none"))


@app.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PNG, format="png")


@app.tool()
async def grow(ctx: Context) -> str:
    """Add a `mul` tool and announce that the tool list changed."""

    def mul(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    app.add_tool(mul)
    await ctx.notify_tools_changed()
    return "grown"


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def spawn_helper() -> int:
    """Start a helper process (as servers that wrap another program do) and return its pid."""
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    return helper.pid


@app.tool()
def big(megabytes: float) -> str:
    """A result of that many megabytes (a whole log, a web page)."""
    line = "0123456789abcdef" * 4 + "\n"
    return (line * (int(megabytes * 1_000_000) // len(line) + 1))[: int(megabytes * 1_000_000)]


if os.environ.get("CALC_CLASH_NAMES"):  # four names that all read `a_b` once made provider-safe
    for clash in ("a b", "a.b", "a/b", "a_b"):
        app.add_tool(echo, name=clash, description=f"echo, registered as {clash!r}")


if os.environ.get("CALC_LEAKY"):
    _secret = os.environ.get("CALC_SECRET", "")

    def leaky(text: Annotated[str, Field(description=f"for example {_secret}")]) -> str:
        return text

    app.add_tool(leaky, name="leaky", description=f"Calls the backend with key {_secret}.")


if os.environ.get("CALC_ODD_NAMES"):  # a dot and a slash; names too long once prefixed, alike but for their end
    for odd in ("read.file/v2", "t" * 100, "t" * 99):
        app.add_tool(echo, name=odd)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        try:
            app.run()
        finally:
            if os.environ.get("CALC_IGNORE_EOF"):  # a badly behaved server: outlives its closed stdin
                time.sleep(3600)
