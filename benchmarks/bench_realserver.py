"""Against a real llama.cpp server: streaming through the harness vs a bare httpx client, and Stop.

Needs the llama-server that ``./dev test`` builds (tests/realserver/setup_server.sh, cached under
the user's cache directory); it is not part of the default set. Three figures:

(a) time to first token and tokens/s, the same streamed request (128 output tokens, ``ignore_eos``
    so every run generates all of them) sent by a bare ``httpx`` SSE client and by
    ``AgentHarness.invoke_streaming``, interleaved so the server's state is the same for both;
(b) the client CPU each path spends per run, hence the harness's cost per streamed chunk;
(c) Stop: from ``cancel()`` after 10 deltas to the run ending, and to the server's ``/slots``
    showing the slot idle (the server stops generating when the stream closes);
(d) exact counts (``RunPolicy(token_counting="exact")``) over a 25-turn conversation: the time per
    step of ``count_prompt_tokens`` (the template rendered once, each new piece tokenized once and
    cached) against the server's one-request ``/v1/chat/completions/input_tokens`` (which tokenizes
    the whole history each time) and against the estimate; every count must equal the server's.

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
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    Message,
    ModelDelta,
    ModelRequest,
    RunPolicy,
    SystemMessage,
    UserMessage,
)
from tinyagents_nb.harness.models import TokenEstimator
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


_TURN = (
    "Kan du se på denne funksjonen igjen? def total(rows): return sum(r['amount'] for r in rows if r['ok']) "
    "It skips the rows that failed, and I want the failed ones counted separately, per customer. "
)
_ANSWER = (
    "Here is a version that keeps both sums: def totals(rows): ok = defaultdict(float); bad = defaultdict(float) "
    "then one loop over the rows adds each amount to the customer's entry in the right dict. Det fungerer fint. "
)


async def _exact_counts(model: OpenAIChatModel, client: httpx.AsyncClient, root: str, turns: int) -> None:
    """(d): per-step cost of exact counts over a growing conversation, checked against the server's count."""
    estimator = TokenEstimator.for_model("smollm2")
    messages: list[Message] = [SystemMessage(text="You review Python code."), UserMessage(text=_TURN)]
    ours: list[float] = []
    whole: list[float] = []
    guess: list[float] = []
    cpu: list[float] = []
    size = 0
    for turn in range(turns):
        request = ModelRequest(messages=tuple(messages), max_output_tokens=64)
        started, clock = time.perf_counter(), time.process_time()
        counted = await model.count_prompt_tokens(request)
        ours.append(time.perf_counter() - started)
        cpu.append(time.process_time() - clock)
        started = time.perf_counter()
        answer = await client.post(root + "/v1/chat/completions/input_tokens", json=model.request_body(request))
        whole.append(time.perf_counter() - started)
        size = answer.json()["input_tokens"]
        assert counted == size, (turn, counted, size)
        started = time.perf_counter()
        estimator.estimate(request.messages)
        guess.append(time.perf_counter() - started)
        messages += [AssistantMessage(text=f"{turn}. {_ANSWER}"), UserMessage(text=f"{turn}. {_TURN}")]
    counter = model.host_token_counter
    tail = max(1, turns // 5)  # the last fifth: the longest histories
    for label, samples in (("cached pieces", ours), ("input_tokens", whole), ("estimate", guess)):
        every, late = spread([x * 1000 for x in samples]), spread([x * 1000 for x in samples[-tail:]])
        line(
            f"(d) {label:<13} per step: median {every.median:6.2f} ms (IQR {every.p25:.2f}-{every.p75:.2f}), "
            f"last {tail} steps {late.median:6.2f} ms"
        )
    line(
        f"(d) {turns} steps to a {size:,}-token prompt: {counter.requests} counting requests "
        f"({counter.cached_pieces} pieces tokenized once), client CPU {spread([c * 1000 for c in cpu]).median:.2f} "
        f"ms per count; every count equal to the server's"
    )


async def main(quick: bool, counts_only: bool = False) -> None:
    header("real server: harness vs bare httpx on llama.cpp (SmolLM2-135M, 128 tokens)")
    proc, root = _start(_server_dir())
    try:
        model = OpenAIChatModel("smollm2", provider=ProviderSpec.compatible(base_url=root + "/v1"))
        if counts_only:  # (d) alone: no generation, so it is quick even on a busy machine
            async with httpx.AsyncClient(timeout=120) as client:
                await _exact_counts(model, client, root, 8 if quick else 25)
            await model.aclose()
            return
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
        async with httpx.AsyncClient(timeout=120) as client:
            await _exact_counts(model, client, root, 8 if quick else 25)
        await harness.aclose()
        await stopper.aclose()
    finally:
        _stop(proc)


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="no price known")  # a local model is unpriced: not a figure
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--counts", action="store_true", help="only (d), the exact-count figures")
    args = parser.parse_args()
    asyncio.run(main(args.quick, args.counts))
