"""A tee on the HTTP client: what the server really sent and received, to compare the harness against.

The harness reads usage, text and tool calls from the wire; these tests check them against the bytes
the server actually answered, kept by an ``httpx`` transport that copies each response as it streams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx


class _TeeStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class Exchange:
    """One request and the response bytes that arrived for it (so far, for a stream cut short)."""

    body: dict[str, Any]
    path: str = ""
    status: int = 0
    raw: bytearray = field(default_factory=bytearray)

    def events(self) -> list[dict[str, Any]]:
        """The JSON of each SSE ``data:`` line (``[DONE]`` left out), or the one JSON body."""
        text = self.raw.decode("utf-8", "replace")
        if "data:" not in text:
            return [json.loads(text)] if text.strip() else []
        out = []
        for line in text.splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                out.append(json.loads(line[5:]))
        return out

    def openai_usage(self) -> dict[str, Any]:
        (usage,) = [e["usage"] for e in self.events() if e.get("usage")][-1:]
        return dict(usage)

    def openai_text(self) -> str:
        events = self.events()
        if len(events) == 1 and "message" in events[0]["choices"][0]:
            return str(events[0]["choices"][0]["message"].get("content") or "")
        return "".join(
            str(choice.get("delta", {}).get("content") or "") for e in events for choice in e.get("choices") or ()
        )


class Tee(httpx.AsyncBaseTransport):
    """A real transport that records every exchange."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = Exchange(body=json.loads(request.content or b"{}"), path=request.url.path)
        self.exchanges.append(exchange)
        response = await self._inner.handle_async_request(request)
        exchange.status = response.status_code
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_TeeStream(response.stream, exchange.raw),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def client(tee: Tee) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=tee, timeout=60)
