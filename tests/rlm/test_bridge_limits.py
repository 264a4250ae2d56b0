"""The 127.0.0.1 bridge holds nothing for a peer that has not proved the token, and bounds what it holds after."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import tracemalloc

import pytest

from tinyagents_nb.harness import AgentHarness, RunContext
from tinyagents_nb.rlm import BridgeServer, RLMLimits, SubQueries

from ._scripts import sub_model

pytestmark = pytest.mark.anyio

_ATTACK = 128 << 20  # 128 MB without a newline


def _flood(port: int, sent: list[int], hello: bytes = b"") -> None:
    """An attacker: connect, optionally say hello, then stream 128 MB with no newline; records bytes sent."""
    chunk = b"x" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.settimeout(10)
        total = 0
        try:
            if hello:
                conn.sendall(hello)
            while total < _ATTACK:
                conn.sendall(chunk)
                total += len(chunk)
        except OSError:  # the bridge hung up: what we wanted
            pass
        sent.append(total)


async def _attack(hello: bytes) -> tuple[int, int]:
    """Bytes the attacker got out before the bridge hung up, and the peak Python memory meanwhile."""
    queries = SubQueries(RunContext(), AgentHarness(model=sub_model()), RLMLimits())
    bridge = BridgeServer(queries)
    await bridge.start()
    sent: list[int] = []
    tracemalloc.start()
    try:
        attacker = threading.Thread(target=_flood, args=(bridge.port, sent, hello))
        attacker.start()
        await asyncio.to_thread(attacker.join)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await bridge.close()
    return sent[0], peak


async def test_an_unauthenticated_peer_sending_128_mb_without_a_newline_is_cut_off_with_bounded_memory() -> None:
    sent, peak = await _attack(b"")
    assert sent < 32 << 20, f"the bridge read {sent:,} bytes of an unauthenticated line"
    assert peak < 16 << 20, f"peak {peak:,} bytes"


async def test_an_authenticated_request_line_over_the_limit_closes_the_channel_unanswered() -> None:
    queries = SubQueries(RunContext(), AgentHarness(model=sub_model()), RLMLimits())
    bridge = BridgeServer(queries)
    await bridge.start()
    try:
        sent: list[int] = []
        hello = json.dumps({"token": bridge.token}).encode() + b"\n" + b'{"op": "llm", "prompts": ["'
        attacker = threading.Thread(target=_flood, args=(bridge.port, sent, hello))
        attacker.start()
        await asyncio.to_thread(attacker.join)
        assert sent[0] < _ATTACK  # cut off (at 64 MiB, the request limit), not read to its end
        assert queries.count == 0
        # a prompt under the limit still works (a large chunk of context is normal)
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
        writer.write(json.dumps({"token": bridge.token}).encode() + b"\n")
        writer.write(json.dumps({"op": "llm", "prompts": ["count:" + "z" * (1 << 20)]}).encode() + b"\n")
        await writer.drain()
        assert json.loads(await reader.readline()) == {"ok": True, "results": ["0"]}
        writer.close()
    finally:
        await bridge.close()
