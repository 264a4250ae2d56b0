"""Real MCP servers for the tests: ``calc_server.py`` over stdio, and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tinyagents_nb.harness import MCPServer

SERVER = Path(__file__).with_name("calc_server.py")
SECRET = "s3cr3t-value-for-the-tests-9f8e7d"


def gone(pid: int, *, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (a reaped or zombie process counts as ended) within the bound."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


@pytest.fixture
def stdio_server(markers: Path) -> Iterator[Callable[..., MCPServer]]:
    """A factory of stdio calc servers; every one is closed after the test."""
    made: list[MCPServer] = []

    def make(name: str = "calc", **kwargs: Any) -> MCPServer:
        env = {"MARKER_DIR": str(markers), "CALC_SECRET": SECRET, **kwargs.pop("env", {})}
        server = MCPServer.stdio(name, sys.executable, [str(SERVER)], env=env, **kwargs)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The calc server over streamable HTTP, in a subprocess on a free 127.0.0.1 port."""
    port = _free_port()
    log = (tmp_path_factory.mktemp("http") / "server.log").open("w")
    env = {**os.environ, "MARKER_DIR": str(tmp_path_factory.mktemp("http-markers"))}
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the HTTP MCP server did not start (exit {proc.poll()})") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
