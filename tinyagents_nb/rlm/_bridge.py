"""The harness side of sub-queries and ``FINAL``: ``SubQueries`` and its 127.0.0.1 server.

``SubQueries`` runs each ``llm`` prompt as a child run of the RLM run (``SubAgent.invoke_in_parent``:
depth + 1, the shared sink, token and trackers, so usage and cost roll up exactly and one Stop
cancels them), behind a semaphore, and counts them against ``max_sub_queries``. A limit reached
here is *fatal*: it is remembered and ends the run once the environment has stopped the block.

``BridgeServer`` exposes it to a child kernel: JSON lines over TCP on 127.0.0.1, one random token
per run, checked in constant time before any request is read. Any local process can connect, so
nothing is buffered for a peer before it proves the token: the hello is a short line read under a
deadline, the stream buffer is small, and even an authenticated request line is bounded
(``REQUEST_LIMIT``). It lives on the run's event loop and is closed (with every request still in
flight) when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from tinyagents_nb.harness import AgentHarness, Cancelled, LimitExceeded, RunContext, SubAgent
from tinyagents_nb.harness.events import LimitReached

from ._config import RLMLimits

__all__ = ["BridgeServer", "SubQueries"]

_BUFFER = 1 << 16  # what the stream reads ahead of a line: small, so a peer cannot make it grow
_HELLO_LIMIT = 256  # {"token": "<64 hex>"} and a newline
_HELLO_TIMEOUT_S = 10.0
DRAIN_GRACE_S = 10.0  # a stopped child run ends within its environment's interrupt grace; this bounds the wait
REQUEST_LIMIT = 64 << 20  # one request line: a prompt may carry a large chunk of the context, never more than this


class _LineTooLong(Exception):
    pass


async def _read_line(reader: asyncio.StreamReader, limit: int) -> bytes:
    """One line of at most ``limit`` bytes (``b""`` at the end of the stream); longer raises ``_LineTooLong``.

    ``readuntil`` alone would either refuse lines longer than the stream's (small) buffer or, with a
    large buffer, hold whatever a peer sends without a newline.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # the end of the stream: a partial line is dropped
            if exc.partial or chunks:
                raise ConnectionError("the connection ended inside a line") from None
            return b""
        except asyncio.LimitOverrunError as exc:
            chunk = await reader.readexactly(exc.consumed)
            size += len(chunk)
            if size > limit:
                raise _LineTooLong from None
            chunks.append(chunk)
            continue
        size += len(chunk)
        if size > limit:
            raise _LineTooLong
        chunks.append(chunk)
        return b"".join(chunks)


class SubQueries:
    """One RLM run's sub-query gate (and its ``FINAL`` slot)."""

    def __init__(self, ctx: RunContext[Any], harness: AgentHarness[Any], limits: RLMLimits) -> None:
        self.ctx = ctx
        self.agent = SubAgent("llm", harness, description="A sub-query of a recursive-language-model run.")
        self.limits = limits
        self.loop = asyncio.get_running_loop()
        self.count = 0
        self.fatal: BaseException | None = None
        self.final: str | None = None
        self.partial: str | None = None
        """The last ``answer["content"]`` the REPL reported (the run's best partial answer)."""
        self.ops: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {}
        """More requests the REPL may make (``"rlm"``: child RLM runs), by ``op``."""
        self._semaphore = anyio.Semaphore(limits.max_concurrency)
        self._inflight: set[asyncio.Task[Any]] = set()

    async def drain(self, grace_s: float = DRAIN_GRACE_S) -> None:
        """Wait for the requests still in flight (their child runs), cancelling what is left after ``grace_s``.

        A block stopped while it waited for ``llm``/``rlm_query`` leaves those requests running on the
        loop; their runs end on the shared Stop, and the parent waits for that, so a stopped tree
        has ended (its events emitted, its REPLs released) before the parent's run returns.
        """
        mine = asyncio.current_task()
        pending = {t for t in self._inflight if t is not mine and not t.done()}
        if not pending:
            return
        _, pending = await asyncio.wait(pending, timeout=grace_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=grace_s)

    async def batch(self, prompts: Sequence[str]) -> list[str]:
        """Answer ``prompts`` as child runs, at most ``max_concurrency`` at once; raises the first failure."""
        if self.fatal is not None:
            raise self.fatal
        cap = self.limits.max_sub_queries
        if self.count + len(prompts) > cap:
            exc = LimitExceeded(
                "rlm_sub_queries",
                f"{self.count} sub-queries made, {len(prompts)} more asked, at most {cap} per run",
                maximum=cap,
            )
            self.ctx.emit(LimitReached, limit=exc.limit, maximum=cap)
            self.fatal = exc
            raise exc
        self.count += len(prompts)
        results: list[str] = [""] * len(prompts)
        errors: list[BaseException | None] = [None] * len(prompts)

        async def one(i: int, prompt: str) -> None:
            async with self._semaphore:
                try:
                    self.ctx.cancellation.raise_if_cancelled()
                    run = await self.agent.invoke_in_parent(self.ctx, prompt)
                    results[i] = run.final_text
                except Exception as exc:
                    errors[i] = exc

        async with anyio.create_task_group() as tg:
            for i, prompt in enumerate(prompts):
                tg.start_soon(one, i, prompt)
        for error in errors:
            if isinstance(error, Cancelled):
                raise error
        for i, error in enumerate(errors):
            if error is not None:
                raise RuntimeError(f"sub-query {i} failed: {type(error).__name__}: {error}") from error
        return results

    async def handle(self, payload: Any) -> dict[str, Any]:
        """One request from the REPL; every failure is a reply (the REPL raises it), never an exception here."""
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            return await self._handle(payload)
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def _handle(self, payload: Any) -> dict[str, Any]:
        try:
            op = payload.get("op") if isinstance(payload, dict) else None
            if op == "llm":
                prompts = payload.get("prompts")
                if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
                    raise TypeError("prompts must be a list of str")
                return {"ok": True, "results": await self.batch(prompts)}
            if op == "final":
                self.final = self.partial = str(payload.get("answer", ""))
                return {"ok": True}
            if op == "answer":
                self.partial = str(payload.get("content", ""))
                return {"ok": True}
            handler = self.ops.get(op) if isinstance(op, str) else None
            if handler is not None:
                return await handler(payload)
            raise ValueError(f"unknown request {op!r}")
        except Exception as exc:
            return {"ok": False, "type": type(exc).__name__, "error": str(exc)}

    def handle_threadsafe(self, payload: dict[str, Any], *, poll_s: float = 0.05) -> dict[str, Any]:
        """``handle`` from another thread (the in-process REPL's), waiting in short slices.

        Short waits keep the calling thread at bytecode boundaries, where an asynchronous
        exception (the in-process Stop) can reach it.
        """
        future = asyncio.run_coroutine_threadsafe(self.handle(payload), self.loop)
        try:
            while True:
                try:
                    return future.result(timeout=poll_s)
                except TimeoutError:
                    continue
        except BaseException:
            future.cancel()
            raise


class BridgeServer:
    """``SubQueries`` over 127.0.0.1 for a child kernel: start, hand ``port`` and ``token`` over, close."""

    def __init__(self, queries: SubQueries) -> None:
        self.queries = queries
        self.token = secrets.token_hex(32)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_BUFFER)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._writers.add(writer)
        try:
            try:
                with anyio.fail_after(_HELLO_TIMEOUT_S):
                    hello = await _read_line(reader, _HELLO_LIMIT)
                token = json.loads(hello).get("token", "")
            except (ValueError, AttributeError, _LineTooLong, TimeoutError):
                token = ""
            if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.token.encode()):
                return
            while True:
                try:
                    line = await _read_line(reader, REQUEST_LIMIT)
                except _LineTooLong:
                    too_long = {"ok": False, "type": "ValueError", "error": f"request over {REQUEST_LIMIT:,} bytes"}
                    writer.write(json.dumps(too_long).encode() + b"\n")
                    await writer.drain()
                    return  # the rest of that line cannot be told from a next request: the channel closes
                if not line:
                    return
                try:
                    payload = json.loads(line)
                except ValueError:
                    reply: dict[str, Any] = {"ok": False, "type": "ValueError", "error": "not a JSON request"}
                else:
                    reply = await self.queries.handle(payload)
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            # only ``close()`` cancels these tasks; ending normally keeps asyncio's stream callback quiet
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def close(self) -> None:
        """Stop listening, drop every connection and cancel the requests still in flight."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
