"""Item 6: provider adapters' CPU per streamed token, parsing recorded wire bytes only.

Builds a realistic recorded stream for each adapter (OpenAI Chat Completions chunks with the full
per-chunk envelope; Anthropic Messages events with their ``event:`` lines), cuts it into
network-sized reads (1,400 bytes, so lines and UTF-8 characters split across reads), and times
(``time.process_time``) the SSE decoder plus the adapter's parser folding every read into stream
items. No HTTP and no event loop: this is the adapter's own cost per token, the part that runs on
the kernel's thread for every token a model streams.

The second part runs whole agent runs over HTTP: a 127.0.0.1 replay server sends the same recorded
bytes in 1,400-byte chunks, the real adapter (``OpenAIChatModel`` / ``AnthropicModel``) streams them
through the agent loop, once alone and once into a ``RunDashboard`` (widget messages recorded, no
kernel), with the transcript checked against the streamed text. Its figures are process CPU per
token and include the replay server's thread, the same in every row: compare the rows.

Run alone: ``python -m benchmarks.bench_adapters [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from typing import Any

from benchmarks._common import header, line, spread
from tinyagents_nb.harness.providers import ProviderSpec
from tinyagents_nb.harness.providers.wire import ChunkParser, EventParser, SSEDecoder

READ_SIZE = 1400
WORDS = ("the ", "quick ", "brown ", "fox ", "jumps ", "över ", "the ", "lazy ", "dog — ", "🦊 ")


def _token(i: int) -> str:
    return WORDS[i % len(WORDS)]


def openai_stream(n: int) -> bytes:
    """``n`` one-token content chunks as OpenAI sends them, then finish, usage and ``[DONE]``."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1727895263,
            "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "usage": None,
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": _token(i)}) for i in range(n)]
    parts.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 20, "completion_tokens": n, "total_tokens": 20 + n}
    parts.append(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def anthropic_stream(n: int) -> bytes:
    """``n`` one-token ``text_delta`` events as Anthropic sends them, framed by the message events."""

    def event(kind: str, data: dict[str, object]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    usage = {"input_tokens": 20, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5"}
    parts = [event("message_start", {"message": {**message, "usage": usage}})]
    parts.append(event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
    parts += [
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": _token(i)}}) for i in range(n)
    ]
    parts.append(event("content_block_stop", {"index": 0}))
    parts.append(event("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}))
    parts.append(event("message_stop", {}))
    return b"".join(parts)


def _reads(blob: bytes) -> list[bytes]:
    return [blob[at : at + READ_SIZE] for at in range(0, len(blob), READ_SIZE)]


def _openai_pass(reads: list[bytes]) -> int:
    decoder, parser = SSEDecoder(), ChunkParser(spec=ProviderSpec.openai(), model="gpt-4o-mini")
    items = 0
    for read in reads:
        items += len(parser.feed(decoder.feed(read)))
    return items + len(parser.finish())


def _anthropic_pass(reads: list[bytes]) -> int:
    decoder, parser = SSEDecoder(), EventParser(spec=ProviderSpec.anthropic(), model="claude-sonnet-4-5")
    items = 0
    for read in reads:
        items += len(parser.feed(decoder.feed(read)))
    return items + len(parser.finish())


def measure(name: str, blob: bytes, one_pass: Callable[[list[bytes]], int], n: int, repeats: int) -> None:
    reads = _reads(blob)
    one_pass(reads)  # warm up imports and caches
    samples = []
    for _ in range(repeats):
        started = time.process_time()
        items = one_pass(reads)
        samples.append((time.process_time() - started) / n * 1e6)
    assert items >= n, f"{name}: {items} items for {n} tokens"
    s = spread(samples)
    line(
        f"{name}: {s.median:.2f} µs CPU per token (min {s.minimum:.2f}, max {s.maximum:.2f}); "
        f"{len(blob) / n:.0f} wire bytes per token, {len(reads)} reads of {READ_SIZE} B"
    )


def _chunks(blob: bytes) -> list[bytes]:
    return [blob[i : i + READ_SIZE] for i in range(0, len(blob), READ_SIZE)]


async def _run(model_for: Callable[[str], Any], blob: bytes, *, dashboard: bool) -> tuple[float, str]:
    from benchmarks.bench_stream import recording_comms
    from tests.harness.replay_server import ReplayServer
    from tinyagents_nb.harness import AgentHarness

    server = ReplayServer().start()
    try:
        server.enqueue(200, _chunks(blob))
        model = model_for(server.base_url)
        with recording_comms():
            stream = AgentHarness(model=model).invoke_streaming("stream")
            dash = None
            if dashboard:
                from tinyagents_nb.widgets import RunDashboard

                dash = RunDashboard(stream, title="bench")
            cpu = time.process_time()
            if dash is not None:
                await dash.wait_flushed()
            run = await stream.result()
            cpu = time.process_time() - cpu
            if dash is not None:
                assert dash.transcript.text() == run.final_text, "the dashboard lost text"
                dash.close()
        await model.aclose()
    finally:
        server.stop()
    return cpu, run.final_text


def measure_runs(n: int, repeats: int) -> None:
    import anyio

    from tinyagents_nb.harness import AnthropicModel, OpenAIChatModel

    adapters: tuple[tuple[str, bytes, Callable[[str], Any]], ...] = (
        ("OpenAI", openai_stream(n), lambda url: OpenAIChatModel("gpt-4o-mini", base_url=url, api_key="sk-bench")),
        (
            "Anthropic",
            anthropic_stream(n),
            lambda url: AnthropicModel("claude-sonnet-4-5", base_url=url, api_key="sk-ant-bench"),
        ),
    )
    for name, blob, model_for in adapters:
        for dashboard in (False, True):
            anyio.run(functools.partial(_run, model_for, blob, dashboard=dashboard))  # warm-up
            samples = [
                anyio.run(functools.partial(_run, model_for, blob, dashboard=dashboard))[0] / n * 1e6
                for _ in range(repeats)
            ]
            s = spread(samples)
            what = "run + dashboard" if dashboard else "run alone      "
            line(
                f"{name:<9} {what}: {s.median:.2f} µs process CPU per token (min {s.minimum:.2f}, max {s.maximum:.2f})"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n, repeats = (2_000, 3) if args.quick else (50_000, 9)
    header("6. Provider adapters: CPU per streamed token (parse only)")
    line(f"{n:,} one-token deltas per stream, {repeats} passes each; decoder + parser, no HTTP")
    measure("OpenAI Chat Completions", openai_stream(n), _openai_pass, n, repeats)
    measure("Anthropic Messages", anthropic_stream(n), _anthropic_pass, n, repeats)
    runs, run_repeats = (2_000, 2) if args.quick else (20_000, 5)
    line(f"whole runs over 127.0.0.1: {runs:,} tokens replayed per run, {run_repeats} runs each")
    measure_runs(runs, run_repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
