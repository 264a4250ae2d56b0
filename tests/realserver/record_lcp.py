"""Record llama-cpp-python's server (``llama_cpp.server``) into wire fixtures the replay tests serve.

llama-cpp-python's server has habits llama.cpp's ``llama-server`` lacks (no usage on streams, HTTP
500 for ``"content": null``, a named ``tool_choice`` honoured, ``json_schema`` rejected), and it
takes minutes to build, so ``./dev test`` never builds it: it replays these recordings instead.
Run by hand where the server is installed (it starts the server on a free 127.0.0.1 port, sends
short requests, stops the server by its PID and rewrites ``tests/fixtures/llama-cpp-python/``)::

    .venv/bin/python -m tests.realserver.record_lcp --python /tmp/lcp/bin/python --model MODEL.gguf

Most requests are built by the harness's own adapter (what it really sends); the ones it no longer
sends (``"content": null``, a stream without ``stream_options``) are written out by hand. Each
fixture keeps the request body, the status, the response headers without the volatile ones and the
body as it arrived, split where the network reads split it.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ModelRequest,
    RetryPolicy,
    RunContext,
    RunPolicy,
    TinyAgentsError,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llama-cpp-python"
ALIAS = "smollm2"
N_CTX = 2048
CUT = b"\x00cut"  # marks a message the server ended without its final chunk
VOLATILE = frozenset({"date", "x-request-id", "openai-processing-ms"})  # differ on every response
FRAMING = frozenset({"content-length", "transfer-encoding", "connection"})  # the replay server sets its own

WEATHER_TOOL = ToolSchema(
    name="get_weather",
    description="The current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class Weather(BaseModel):
    """The structured answer the structured-output recordings ask for."""

    city: str
    celsius: float


@dataclass
class Exchange:
    """One request and its response, as the wire carried them."""

    body: Any
    path: str
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False
    reads: list[bytes] = field(default_factory=list)


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, reads: list[bytes]) -> None:
        self._inner = inner
        self._reads = reads

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._inner:
                self._reads.append(bytes(piece))
                yield piece
        except httpx.HTTPError:
            self._reads.append(CUT)  # the server cut the message short (no final chunk)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class Recorder(httpx.AsyncBaseTransport):
    """An ``httpx`` transport that keeps every exchange it carries."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = await request.aread()
        exchange = Exchange(body=json.loads(raw) if raw else None, path=request.url.path)
        self.exchanges.append(exchange)
        response = await self._inner.handle_async_request(request)
        exchange.status = response.status_code
        exchange.headers = {k.decode().lower(): v.decode() for k, v in response.headers.raw}
        exchange.chunked = exchange.headers.get("transfer-encoding", "").lower() == "chunked"
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, exchange.reads),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()

    def take(self) -> list[Exchange]:
        taken, self.exchanges = self.exchanges, []
        return taken


def save(name: str, note: str, exchange: Exchange) -> None:
    """Write one fixture; a read that is not UTF-8 on its own is kept as hex."""
    chunks: list[dict[str, str]] = []
    cut = exchange.reads[-1:] == [CUT]
    reads = exchange.reads[:-1] if cut else exchange.reads
    for read in reads:
        try:
            chunks.append({"text": read.decode("utf-8")})
        except UnicodeDecodeError:
            chunks.append({"hex": read.hex()})
    record = {
        "name": name,
        "note": note,
        "request": {"method": "POST", "path": exchange.path, "body": exchange.body},
        "response": {
            "status": exchange.status,
            "headers": {k: v for k, v in exchange.headers.items() if k not in VOLATILE | FRAMING},
            "chunked": exchange.chunked,
            "cut": cut,
            "chunks": chunks,
        },
    }
    path = FIXTURES / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    body = b"".join(reads)
    print(f"{name}: HTTP {exchange.status}, {len(reads)} reads, {len(body)} bytes, cut: {cut}", file=sys.stderr)


async def raw_post(client: httpx.AsyncClient, base_url: str, body: dict[str, Any]) -> None:
    """Send a hand-written body (one the adapter no longer sends) and read the answer whole."""
    async with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        await response.aread()


def ask(text: str, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text=text)], temperature=0.0, **fields)


async def record(base_url: str) -> None:
    tee = Recorder()
    client = httpx.AsyncClient(transport=tee, timeout=600)
    spec = ProviderSpec.compatible(base_url=base_url)
    model = OpenAIChatModel(ALIAS, provider=spec, http_client=client)
    FIXTURES.mkdir(parents=True, exist_ok=True)

    await model.invoke(ask("Say hi.", max_output_tokens=8))
    (unary,) = tee.take()
    save("unary_text", "a plain answer: the unary body reports usage", unary)

    async for _ in model.stream(ask("Say hi.", max_output_tokens=8)):
        pass
    (streamed,) = tee.take()
    save("stream_include_usage", "the adapter asks for usage (stream_options.include_usage); none comes", streamed)

    plain = copy.deepcopy(streamed.body)
    plain.pop("stream_options")
    await raw_post(client, base_url, plain)
    (bare,) = tee.take()
    save("stream_plain", "a stream without stream_options: no usage either", bare)

    named = ask("What is the weather in Oslo?", tools=(WEATHER_TOOL,), tool_choice="get_weather", max_output_tokens=32)
    called = await model.invoke(named)
    (tool_unary,) = tee.take()
    save("tool_choice_named", "a named tool_choice is honoured: the call comes back with its id", tool_unary)

    async for _ in model.stream(named):
        pass
    (tool_stream,) = tee.take()
    save("tool_choice_named_stream", "the same, streamed: the call comes as tool_calls deltas, no usage", tool_stream)

    (call,) = called.message.tool_calls
    follow_up = ModelRequest(
        messages=[
            UserMessage(text="What is the weather in Oslo?"),
            AssistantMessage(text="", tool_calls=[ToolCall(id=call.id, name=call.name, arguments=call.arguments)]),
            ToolMessage(tool_call_id=call.id, name=call.name, text="3 C and light snow"),
        ],
        tools=(WEATHER_TOOL,),
        temperature=0.0,
        max_output_tokens=16,
    )
    await model.invoke(follow_up)
    (second,) = tee.take()
    save("tool_result_content_empty", "the tool loop's second request as the adapter sends it: accepted", second)

    null_body = copy.deepcopy(second.body)
    (assistant,) = [m for m in null_body["messages"] if m["role"] == "assistant"]
    assistant["content"] = None
    await raw_post(client, base_url, null_body)
    (rejected,) = tee.take()
    save("tool_result_content_null", 'the same request with "content": null: rejected with HTTP 500', rejected)

    long_text = "Summarise this. " + "The quick brown fox jumps over the lazy dog. " * 260
    for stream in (False, True):
        try:
            if stream:
                async for _ in model.stream(ask(long_text, max_output_tokens=8)):
                    pass
            else:
                await model.invoke(ask(long_text, max_output_tokens=8))
        except TinyAgentsError as exc:
            print(f"overflow (stream={stream}): {type(exc).__name__}: {exc}", file=sys.stderr)
        (overflow,) = tee.take()[-1:]
        save(f"overflow{'_stream' if stream else ''}", "a prompt over the 2048-token window", overflow)

    for streaming in (False, True):
        # another spelling of the same address: the fallback learned by the first run would skip json_schema
        url = base_url.replace("127.0.0.1", "localhost") if streaming else base_url
        structured = OpenAIChatModel(ALIAS, provider=ProviderSpec.compatible(base_url=url), http_client=client)
        policy = RunPolicy(retry=RetryPolicy(max_attempts=1), max_output_tokens=48)
        harness: AgentHarness[None] = AgentHarness(model=structured, output_type=Weather, policy=policy)
        prompt = "The weather in Rome is 21 C. Report it."
        run, _ = await harness.invoke_with_status(RunContext(), prompt, streaming=streaming)
        print(f"structured run (streaming={streaming}): {run.status} {run.error!r}", file=sys.stderr)
        exchanges = tee.take()
        suffix = "_stream" if streaming else ""
        save(f"structured_json_schema{suffix}", "the default strategy for a compatible host: rejected", exchanges[0])
        save(f"structured_tool{suffix}", "the fallback the harness then sends: a forced tool call", exchanges[1])
    await client.aclose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the python of a venv with llama-cpp-python[server]")
    parser.add_argument("--model", required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    args = parser.parse_args()
    port = _free_port()
    argv = [
        args.python, "-m", "llama_cpp.server", "--model", args.model, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(N_CTX), "--n_threads", "2", "--model_alias", ALIAS,
        "--chat_format", "chatml-function-calling", "--seed", "0",
    ]  # fmt: skip
    log = Path(tempfile.gettempdir()) / f"llama-cpp-python-{port}.log"
    print(f"server log: {log}", file=sys.stderr)
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start; see {log}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        asyncio.run(record(f"http://127.0.0.1:{port}/v1"))
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


if __name__ == "__main__":
    main()
