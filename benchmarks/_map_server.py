"""A minimal keep-alive HTTP/1.1 chat-completions server for ``bench_map``, run in its own process.

``python -m benchmarks._map_server DELAY_S`` prints its port, then answers every POST after
``DELAY_S`` with one fixed structured completion. Its own process (and asyncio, no thread per
connection) keeps the server's CPU out of the client's figures.
"""

from __future__ import annotations

import asyncio
import json
import sys

_BODY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": json.dumps({"label": "pos", "score": 4})},
            }
        ],
        "usage": {"prompt_tokens": 60, "completion_tokens": 12, "total_tokens": 72},
    }
).encode()
_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(_BODY)).encode() + b"\r\n\r\n"
)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for raw in head.split(b"\r\n"):
                if raw.lower().startswith(b"content-length:"):
                    length = int(raw.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            if delay:
                await asyncio.sleep(delay)
            writer.write(_HEAD + _BODY)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(delay: float) -> None:
    server = await asyncio.start_server(lambda r, w: _serve(r, w, delay), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1])))
