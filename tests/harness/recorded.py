"""Wire recordings of real servers (tests/fixtures/HOST/NAME.json), served again by the replay server.

A recording keeps the request body that was sent, the status, the response headers without the
volatile ones and the body split where the network reads split it (tests/fixtures/*/README.md says
how each host was recorded). ``Recording.enqueue`` scripts the replay server to answer with exactly
those bytes; ``Recording.answer`` gives the same as a ``respond_with`` answer, for a responder that
picks a recording from what the request looks like.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.replay_server import ReplayServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

__all__ = ["FIXTURES", "Recording"]


@dataclass(frozen=True)
class Recording:
    """One recorded exchange."""

    name: str
    note: str
    request: Any  # the request body as sent
    status: int
    headers: dict[str, str]
    chunks: list[bytes]
    chunked: bool
    cut: bool

    @classmethod
    def load(cls, host: str, name: str) -> Recording:
        data = json.loads((FIXTURES / host / f"{name}.json").read_text(encoding="utf-8"))
        response = data["response"]
        chunks = [
            piece["text"].encode() if "text" in piece else bytes.fromhex(piece["hex"]) for piece in response["chunks"]
        ]
        return cls(
            name=data["name"],
            note=data["note"],
            request=data["request"]["body"],
            status=response["status"],
            headers=dict(response["headers"]),
            chunks=chunks,
            chunked=response["chunked"],
            cut=response["cut"],
        )

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[Any]:
        """The JSON of each SSE ``data:`` line (``[DONE]`` left out)."""
        lines = self.body.decode().splitlines()
        return [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip() != "[DONE]"]

    def enqueue(self, server: ReplayServer) -> None:
        """Script ``server``'s next answer as these bytes (a stream when the host sent one)."""
        if self.chunked:
            drop = len(self.chunks) if self.cut else None
            server.enqueue(self.status, list(self.chunks), headers=self.headers, drop_after=drop)
        else:
            server.enqueue(self.status, self.body, headers=self.headers)

    def answer(self) -> tuple[int, bytes | list[bytes], dict[str, str]]:
        """The same bytes as a ``ReplayServer.respond_with`` answer (a cut stream is not supported there)."""
        assert not self.cut, f"{self.name}: a responder cannot cut a stream; enqueue it"
        return self.status, list(self.chunks) if self.chunked else self.body, self.headers
