"""A real llama.cpp ``llama-server`` serving SmolLM2-135M-Instruct on a free 127.0.0.1 port.

``./dev test`` builds the server once (tests/realserver/setup_server.sh, cached by version under the
user's cache directory) and exports ``TINYAGENTS_LLAMA_SERVER_DIR``; there a broken build or server
fails the tier. Run on its own, the tier uses the cache when it exists and is skipped, with the
reason shown, when nothing was built yet. The server starts once per session (0.2 s) and is stopped
by its PID.

The 135M model is tiny: these tests check protocol behaviour (usage, streaming, cancellation,
errors, tool-call round trips, overflow), never the quality of its answers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

SETUP = Path(__file__).with_name("setup_server.sh")
_RUNNING: dict[int, subprocess.Popen[bytes]] = {}
ALIAS = "smollm2"
N_CTX = 2048


@dataclass(frozen=True)
class LlamaServer:
    """One running ``llama-server``: where it listens and how to ask it about itself."""

    pid: int
    port: int
    log: Path

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def get(self, path: str) -> Any:
        response = httpx.get(self.root + path, timeout=10)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.root + path, json=body, timeout=60)

    def busy_slots(self) -> int:
        return sum(1 for slot in self.get("/slots") if slot.get("is_processing"))

    def wait_idle(self, timeout_s: float = 5.0) -> float:
        """Seconds until no slot is processing (raises after ``timeout_s``)."""
        start = time.monotonic()
        while self.busy_slots():
            if time.monotonic() - start > timeout_s:
                raise AssertionError(f"a slot still generates after {timeout_s} s: {self.get('/slots')}")
            time.sleep(0.01)
        return time.monotonic() - start


def _cache_dir() -> Path | None:
    given = os.environ.get("TINYAGENTS_LLAMA_SERVER_DIR")
    if given:
        path = Path(given)
        if not (path / "llama-server").is_file():
            pytest.fail(f"TINYAGENTS_LLAMA_SERVER_DIR={given} holds no llama-server (./dev test builds it)")
        return path
    probe = subprocess.run(["bash", str(SETUP), "--cached-only"], capture_output=True, text=True, check=False)
    return Path(probe.stdout.strip()) if probe.returncode == 0 and probe.stdout.strip() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(directory: Path, log: Path, *extra: str) -> LlamaServer:
    """Start ``llama-server`` on a free port and wait for ``/health``."""
    port = _free_port()
    argv = [
        str(directory / "llama-server"),
        "-m", str(directory / "SmolLM2-135M-Instruct.Q4_1.gguf"),
        "--host", "127.0.0.1", "--port", str(port),
        "-a", ALIAS, "-c", str(N_CTX), "-np", "1", "-t", "2",
        "--no-webui", "--chat-template-file", str(directory / "chatml-tools.jinja"),
        "--cache-ram", "64", "--slots", "-n", "256",  # a request's max_tokens overrides the 256 default
        *extra,
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    _RUNNING[proc.pid] = proc  # held until stop_server reaps it (a dropped Popen of a live process warns)
    server = LlamaServer(pid=proc.pid, port=port, log=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(server.root + "/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    stop_server(server)
    pytest.fail(f"llama-server did not become healthy in 30 s:\n{log.read_text(errors='replace')[-3000:]}")


def stop_server(server: LlamaServer) -> None:
    """Stop the server by its PID: SIGTERM, then SIGKILL after 5 s."""
    proc = _RUNNING.pop(server.pid, None)
    if proc is None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def llama_dir() -> Path:
    directory = _cache_dir()
    if directory is None:
        pytest.skip("llama-server is not built yet: ./dev test builds it (or run tests/realserver/setup_server.sh)")
    return directory


@pytest.fixture(scope="session")
def llama(llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = start_server(llama_dir, tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _unpriced_local_model_is_expected() -> Iterator[None]:
    """The local model has no price (its cost is honestly unknown): the warning saying so is expected here."""
    from tinyagents_nb.harness.runtime import CostUnknownWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostUnknownWarning)
        yield
