"""Opt-in: the llama-cpp-python server's habits checked live, as the recordings show them.

``./dev test`` never builds llama-cpp-python (minutes of compiling); it replays the recorded bytes
(tests/harness/providers/test_llama_cpp_python.py). Where the server is installed, point
``TINYAGENTS_LCP_PYTHON`` at the venv's python to run these against it: they start the server on
a free 127.0.0.1 port with the cached SmolLM2 model (the llama-server tier's cache) and stop it by
its PID. Skipped otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from tests.harness.recorded import Recording
from tinyagents_nb.harness import (
    AgentHarness,
    ContextLimitError,
    ModelRequest,
    RetryPolicy,
    RunContext,
    RunPolicy,
    UserMessage,
)
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = pytest.mark.anyio

PYTHON = os.environ.get("TINYAGENTS_LCP_PYTHON", "")
ALIAS = "smollm2"
N_CTX = 2048


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Weather(BaseModel):
    """The structured answer the structured-output recordings ask for."""

    city: str
    celsius: float


@pytest.fixture(scope="module")
def lcp_url(llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not PYTHON or not Path(PYTHON).is_file():
        pytest.skip("set TINYAGENTS_LCP_PYTHON to a python with llama-cpp-python[server] installed")
    port = _free_port()
    argv = [
        PYTHON, "-m", "llama_cpp.server", "--model", str(llama_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", "2",
        "--model_alias", ALIAS, "--chat_format", "chatml-function-calling", "--seed", "0",
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("lcp") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            try:
                proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        else:
            pytest.fail(f"the server did not answer in 2 minutes:\n{log.read_text(errors='replace')[-3000:]}")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def model(url: str) -> OpenAIChatModel:
    return OpenAIChatModel(ALIAS, provider=ProviderSpec.compatible(base_url=url))


async def test_a_stream_reports_no_usage_and_the_run_records_an_estimate(lcp_url: str) -> None:
    harness: AgentHarness[None] = AgentHarness(model=model(lcp_url), policy=RunPolicy(max_output_tokens=8))
    run, _ = await harness.invoke_with_status(RunContext(), "Say hi.", streaming=True)
    assert run.status == "completed", run.error
    assert run.usage.estimated
    assert run.usage.output_tokens > 0


async def test_structured_output_falls_back_to_the_tool_call_live(lcp_url: str) -> None:
    url = lcp_url.replace("127.0.0.1", "localhost")  # its own key for the learned strategy
    ctx = RunContext()
    events = EventRecorder(ctx.events)
    policy = RunPolicy(retry=RetryPolicy(max_attempts=2), max_output_tokens=48)
    harness: AgentHarness[None] = AgentHarness(model=model(url), output_type=Weather, policy=policy)
    run, _ = await harness.invoke_with_status(ctx, "The weather in Rome is 21 C. Report it.")
    assert run.status == "completed", run.error
    assert isinstance(run.structured.value if run.structured else None, Weather)
    (switch,) = [e for e in events.of_kind("structured.repair") if e.attempt == 0]  # type: ignore[attr-defined]
    assert switch.strategy == "tool"  # type: ignore[attr-defined]
    recorded = Recording.load("llama-cpp-python", "structured_json_schema").json()["error"]["message"]
    assert "Input should be 'text' or 'json_object'" in recorded
    assert "Input should be 'text' or 'json_object'" in switch.error  # type: ignore[attr-defined]


async def test_a_streamed_overflow_is_a_context_limit_error_live(lcp_url: str) -> None:
    text = "Summarise this. " + "The quick brown fox jumps over the lazy dog. " * 260
    chat = model(lcp_url)
    with pytest.raises(ContextLimitError) as info:
        async for _ in chat.stream(ModelRequest(messages=[UserMessage(text=text)], max_output_tokens=8)):
            pass
    await chat.aclose()
    assert info.value.limit_tokens == N_CTX
    assert info.value.estimated_tokens is not None
    assert info.value.estimated_tokens > N_CTX


def test_null_content_is_still_rejected_and_empty_content_accepted(lcp_url: str) -> None:
    body = Recording.load("llama-cpp-python", "tool_result_content_empty").request
    accepted = httpx.post(f"{lcp_url}/chat/completions", json=body, timeout=300)
    assert accepted.status_code == 200, accepted.text
    (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
    assistant["content"] = None
    rejected = httpx.post(f"{lcp_url}/chat/completions", json=body, timeout=300)
    assert rejected.status_code == 500
    assert "Input should be a valid string" in json.dumps(rejected.json())
