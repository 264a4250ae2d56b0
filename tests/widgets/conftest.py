"""Fixtures for headless widget tests: a comm recorder (no kernel needed) and small run helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import comm
import pytest


@dataclass
class CommLog:
    """Every message the widgets would have sent to a frontend: (comm_id, msg_type, data)."""

    messages: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def updates(self, widget: Any, key: str | None = None) -> list[dict[str, Any]]:
        """The ``update`` states sent for ``widget`` (only those that carry ``key``, if given)."""
        comm_id = widget.comm.comm_id
        return [
            data["state"]
            for cid, kind, data in self.messages
            if cid == comm_id
            and kind == "comm_msg"
            and data.get("method") == "update"
            and (key is None or key in data["state"])
        ]

    def opens(self, widget: Any) -> int:
        return sum(1 for cid, kind, _ in self.messages if cid == widget.comm.comm_id and kind == "comm_open")

    def comm_msgs(self) -> int:
        return sum(1 for _, kind, _ in self.messages if kind == "comm_msg")

    def clear(self) -> None:
        self.messages.clear()


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> CommLog:
    """Swap ``comm.create_comm`` for a recording comm, as ipywidgets' own tests do; restored after."""
    log = CommLog()

    class RecordingComm(comm.DummyComm):
        def publish_msg(
            self,
            msg_type: str,
            data: dict[str, Any] | None = None,
            metadata: dict[str, Any] | None = None,
            buffers: Any = None,
            **keys: Any,
        ) -> None:
            log.messages.append((self.comm_id, msg_type, dict(data or {})))

    monkeypatch.setattr(comm, "create_comm", lambda *args, **kwargs: RecordingComm(*args, **kwargs))
    return log


def row_text(row: Any) -> str:
    """What a transcript or tool row shows: an ``HTML`` row's value, or an ``Output`` row's Markdown source."""
    if hasattr(row, "value"):
        return str(row.value)
    outputs = row.outputs
    return str(outputs[0]["data"]["text/markdown"]) if outputs else ""


async def until(predicate: Callable[[], bool], *, limit_s: float = 5.0) -> None:
    """Poll on a real timer (never a busy loop) until ``predicate()`` holds."""
    with anyio.fail_after(limit_s):
        while not predicate():  # noqa: ASYNC110 - polls plain state that has no event to wait on
            await anyio.sleep(0.005)
