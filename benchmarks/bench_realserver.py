"""Against a real llama.cpp server: streaming through the harness vs a bare httpx client, and Stop.

Needs the llama-server that ``./dev test`` builds (tests/realserver/setup_server.sh, cached under
the user's cache directory); it is not part of the default set. Three figures:

(a) time to first token and tokens/s, the same streamed request (128 output tokens, ``ignore_eos``
    so every run generates all of them) sent by a bare ``httpx`` SSE client and by
    ``AgentHarness.invoke_streaming``, interleaved so the server's state is the same for both;
(b) the client CPU each path spends per run, hence the harness's cost per streamed chunk;
(c) Stop: from ``cancel()`` after 10 deltas to the run ending, and to the server's ``/slots``
    showing the slot idle (the server stops generating when the stream closes).

Run: ``python -m benchmarks realserver [--quick]`` or ``python -m benchmarks.bench_realserver``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import header, line, spread
from tinyagents_nb.harness import AgentHarness, ModelDelta, RunPolicy
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec

SETUP = Path(__file__).resolve().parent.parent / "tests" / "realserver" / "setup_server.sh"
PROMPT = "Write a long story about a lighthouse keeper and a storm."
TOKENS = 128


def _server_dir() -> Path:
    given = os.environ.get("TINYAGENTS_LLAMA_SERVER_DIR")
    if given:
        return Path(given)
    probe = subprocess.run(["bash", str(SETUP), "--cached-only"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise SystemExit("llama-server is not built: run ./dev test or tests/realserver/setup_server.sh first")
    return Path(probe.stdout.strip())


def _start(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [
        str(directory / "llama-server"), "-m", str(directory / "SmolLM2-135M-Instruct.Q4_1.gguf"),
        "--host", "127.0.0.1", "--port", str(port), "-a", "smollm2", "-c", "2048", "-np", "1", "-t", "2",
        "--no-webui", "--chat-template-file", str(directory / "chatml-tools.jinja"), "--cache-ram", "64",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(root + "/health", timeout=1).status_code == 200:
                return proc, root
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("llama-server did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _body() -> dict[str, Any]:
    return {
        "model": "smollm2",
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": TOKENS,
        "temperature": 0.0,
        "ignore_eos": True,
    }


async def _bare(client: httpx.AsyncClient, root: str) -> tuple[float, float, float]:
    """(ttft s, tokens/s after the first token, client CPU s) for one bare SSE request."""
    cpu, start = time.process_time(), time.perf_counter()
    first = None
    tokens = 0
    async with client.stream("POST", root + "/v1/chat/completions", json=_body()) as response:
        async for raw in response.aiter_lines():
            if not raw.startswith("data:") or raw[5:].strip() == "[DONE]":
                continue
            chunk = json.loads(raw[5:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices") or ():
                if (choice.get("delta") or {}).get("content") and first is None:
                    first = time.perf_counter()
    end = time.perf_counter()
    assert first is not None
    return first - start, (tokens - 1) / (end - first), time.process_time() - cpu


async def _harness(harness: AgentHarness[None]) -> tuple[float, float, float]:
    cpu, start = time.process_time(), time.perf_counter()
    first = None
    stream = harness.invoke_streaming(PROMPT)
    async for event in stream:
        if isinstance(event, ModelDelta) and first is None:
            first = time.perf_counter()
    run = await stream
    end = time.perf_counter()
    assert first is not None
    assert run.status == "completed", run.error
    return first - start, (run.usage.output_tokens - 1) / (end - first), time.process_time() - cpu


def _busy(root: str) -> bool:
    return any(slot.get("is_processing") for slot in httpx.get(root + "/slots", timeout=5).json())


async def _stop_latency(harness: AgentHarness[None], root: str) -> tuple[float, float]:
    """(cancel → run ended, cancel → slot idle) in seconds."""
    stream = harness.invoke_streaming_with_status(PROMPT)
    seen = 0
    async for event in stream:
        if isinstance(event, ModelDelta):
            seen += 1
            if seen == 10:
                break
    pressed = time.perf_counter()
    stream.cancel("benchmark stop")
    run = await stream
    ended = time.perf_counter() - pressed
    while _busy(root):  # noqa: ASYNC110 - polling the server's /slots is the measurement
        await asyncio.sleep(0.002)
    idle = time.perf_counter() - pressed
    assert run.status == "cancelled"
    return ended, idle


async def main(quick: bool) -> None:
    header("real server: harness vs bare httpx on llama.cpp (SmolLM2-135M, 128 tokens)")
    proc, root = _start(_server_dir())
    try:
        model = OpenAIChatModel("smollm2", provider=ProviderSpec.compatible(base_url=root + "/v1"))
        policy = RunPolicy(temperature=0.0, max_output_tokens=TOKENS, model_settings={"ignore_eos": True})
        harness: AgentHarness[None] = AgentHarness(model=model, policy=policy)
        stopper: AgentHarness[None] = AgentHarness(
            model=model, policy=RunPolicy(temperature=0.8, max_output_tokens=1500)
        )
        runs = 3 if quick else 12
        bare: list[tuple[float, float, float]] = []
        ours: list[tuple[float, float, float]] = []
        async with httpx.AsyncClient(timeout=120) as client:
            await _bare(client, root)  # warm the server's prompt cache and both clients
            await _harness(harness)
            for _ in range(runs):
                bare.append(await _bare(client, root))
                ours.append(await _harness(harness))
        for label, samples in (("bare httpx", bare), ("AgentHarness", ours)):
            ttft = spread([s[0] * 1000 for s in samples])
            rate = spread([s[1] for s in samples])
            cpu = spread([s[2] * 1000 for s in samples])
            line(
                f"(a) {label:<12} TTFT median {ttft.median:6.1f} ms (IQR {ttft.p25:.1f}-{ttft.p75:.1f}) · "
                f"{rate.median:6.1f} tok/s (IQR {rate.p25:.1f}-{rate.p75:.1f}) · client CPU {cpu.median:5.1f} ms/run"
            )
        extra = spread([(o[2] - b[2]) * 1000 / TOKENS for b, o in zip(bare, ours, strict=True)])
        line(f"(b) harness client CPU per streamed chunk: {extra.median * 1000:.0f} µs (median over {runs} pairs)")
        stops = [await _stop_latency(stopper, root) for _ in range(3 if quick else 10)]
        ended = spread([s[0] * 1000 for s in stops])
        idle = spread([s[1] * 1000 for s in stops])
        line(
            f"(c) Stop after 10 deltas: run ended in {ended.median:.1f} ms (max {ended.maximum:.1f}) · "
            f"server slot idle in {idle.median:.1f} ms (max {idle.maximum:.1f})"
        )
        await harness.aclose()
        await stopper.aclose()
    finally:
        _stop(proc)


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="no price known")  # a local model is unpriced: not a figure
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
