"""A scripted OpenAI-compatible chat-completions server for ``bench_rlm_vs_rlms``, run in its own process.

``python -m benchmarks._rlm_server SUB_DELAY_S`` prints its port. Both RLM implementations talk to
it and get byte-for-byte the same replies, so they differ only in their harness:

- the root model's reply is chosen by the request's model name (the scenario) and the number of
  assistant turns already in the request (the iteration), so the server keeps no state and the two
  implementations' different prompts get the same code;
- model ``sub`` answers every sub-call with ``ok`` after ``SUB_DELAY_S``.

Replies use ```` ```repl ```` blocks and the ``answer`` dict, which both implementations accept.
Streaming requests get the same text as one SSE chunk. asyncio, one process: the server's CPU is
never in the client's figures.
"""

from __future__ import annotations

import asyncio
import json
import sys


def _repl(code: str) -> str:
    return f"Next step.\n```repl\n{code}\n```"


_ANSWER = 'answer["content"] = "done"\nanswer["ready"] = True'
OVERHEAD_ITERATIONS = 20
SCRIPTS: dict[str, list[str]] = {
    # per-iteration overhead: trivial blocks, then the answer
    "overhead": [_repl(f"x = {i}\nprint(x)") for i in range(OVERHEAD_ITERATIONS)] + [_repl(_ANSWER)],
    # 1,000 sub-calls in one batched call
    "batch": [
        _repl("r = llm_query_batched([f'question {i}' for i in range(1000)])\nprint(len(r), r[0])"),
        _repl(_ANSWER),
    ],
    # Stop while a block sleeps
    "sleep": [_repl("import time\ntime.sleep(60)"), _repl(_ANSWER)],
    # a 10 MB context: look at it, search it, answer
    "memory": [
        _repl("print(len(context), context[:100])"),
        _repl(
            "hits = [i for i, line in enumerate(context.splitlines()) if 'NEEDLE' in line]\nprint(hits)\n"
            "print('VmHWM', open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"
        ),
        _repl(_ANSWER),
    ],
}


def _body(model: str, text: str, stream: bool) -> bytes:
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    if not stream:
        return json.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": usage,
            }
        ).encode()
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": usage},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def reply_for(request: dict[str, object]) -> str:
    model = str(request.get("model", ""))
    if model == "sub":
        return "ok"
    messages = request.get("messages")
    turns = (
        sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        if isinstance(messages, list)
        else 0
    )
    script = SCRIPTS.get(model.removeprefix("root-"), [_repl(_ANSWER)])
    return script[min(turns, len(script) - 1)]


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for raw in head.split(b"\r\n"):
                if raw.lower().startswith(b"content-length:"):
                    length = int(raw.split(b":", 1)[1])
            request = json.loads(await reader.readexactly(length)) if length else {}
            text = reply_for(request)
            if request.get("model") == "sub" and delay:
                await asyncio.sleep(delay)
            stream = bool(request.get("stream"))
            body = _body(str(request.get("model")), text, stream)
            kind = b"text/event-stream" if stream else b"application/json"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: "
                + kind
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(delay: float) -> None:
    server = await asyncio.start_server(lambda r, w: _serve(r, w, delay), "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.0))
