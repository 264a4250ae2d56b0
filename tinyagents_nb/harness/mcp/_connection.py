"""``Connection``: one live session with one MCP server, on the official ``mcp`` SDK.

Everything here runs on the server's owner loop (see ``_owner``), and one task there opens and
closes the SDK's context managers, as anyio requires. This module and ``_convert`` are the only
ones that import the SDK, and they load only when a server first starts: ``mcp`` stays optional.

A stdio server's stderr goes to ``errlog``, a real file: the SDK hands it to the child process as a
file descriptor, which a notebook kernel's ``sys.stderr`` (a ZMQ stream object) cannot provide,
and a file never fills up and blocks a chatty server the way a pipe nobody reads would.

No process a server started survives it. The SDK starts a stdio server as the leader of its own
process group, but kills that group only when the server itself will not exit; a server that exits
politely at the end of its stdin leaves its helpers (``npx`` wrappers, language servers, browsers)
running under init. So the connection finds its server's group (the child of this process whose
stderr is this connection's own log file) and, once the session is closed, ends what is left in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any, Self, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as SDKError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._spec import ServerSpec

__all__: list[str] = []

_log = logging.getLogger("tinyagents_nb.mcp")

_MAX_PAGES = 100
_CLOSE_TIMEOUT_S = 10.0  # the SDK's stdio shutdown: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection (or the server process) is gone, not a protocol-level answer."""
    if isinstance(exc, SDKError):
        return exc.code == types.CONNECTION_CLOSED
    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError | httpx2.HTTPError)


def describe(exc: BaseException) -> str:
    """A short text for an SDK or transport error (redacted by the caller)."""
    if isinstance(exc, SDKError):
        return f"MCP error {exc.code}: {exc.message}"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _WatchedStream:
    """The transport's read stream, reporting its end: how a server that died while idle is noticed."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    def __getattr__(self, name: str) -> Any:  # ``last_context`` and anything else the SDK reads
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._on_end()
            raise

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result


@asynccontextmanager
async def _watched(transport: AbstractAsyncContextManager[Any], on_end: Callable[[], None]) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield _WatchedStream(read_stream, on_end), write_stream


def server_group(errlog: TextIO) -> int | None:
    """The process group led by the child of this process whose stderr is ``errlog`` (``None`` if not found).

    The log file is private to one connection, so this tells servers started at the same time apart.
    Read from ``/proc`` (Linux); elsewhere ``None``, and the SDK's own shutdown is all there is.
    """
    try:
        log = os.fstat(errlog.fileno())
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat", "rb") as file:
                    stat = file.read()
                ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])  # after "pid (comm) state"
                if ppid != me:
                    continue
                pid = int(entry)
                fd = os.stat(f"/proc/{pid}/fd/2")
                if (fd.st_dev, fd.st_ino) == (log.st_dev, log.st_ino) and os.getpgid(pid) == pid:
                    return pid
    except (OSError, ValueError):
        pass
    return None


async def end_group(group: int, *, grace_s: float = 0.5) -> None:
    """SIGTERM what is left in process group ``group``, then SIGKILL it after ``grace_s``."""
    try:
        os.killpg(group, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        await anyio.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


class Connection:
    """An open ``mcp.Client`` held by one task until ``close``; not ``usable`` once the server is gone."""

    def __init__(self, spec: ServerSpec, *, errlog: TextIO | None, on_tools_changed: Callable[[], None]) -> None:
        self.spec = spec
        self._errlog = errlog
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._stop = anyio.Event()
        self._scope = anyio.CancelScope()
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        self.lost = False  # the server ended the stream (a stdio process that exited): reconnect
        self._group: int | None = None  # a stdio server's process group, ended at close

    @property
    def usable(self) -> bool:
        return not self.closed and not self.lost

    def _mark_lost(self) -> None:
        self.lost = True

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        """Start the server (stdio) or connect (HTTP) and negotiate; raises what went wrong, or ``TimeoutError``."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._ready = ready
        self._task = loop.create_task(self._serve(ready), name=f"tinyagents-mcp-{self.spec.name}")
        try:
            with anyio.move_on_after(self.spec.startup_timeout_s) as waited:
                await asyncio.shield(ready)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.close()
            raise
        if waited.cancelled_caught:
            with anyio.CancelScope(shield=True):
                await self.close()
            raise TimeoutError(f"no answer within {self.spec.startup_timeout_s:g} s")

    def _note_group(self) -> None:
        """Remember the stdio server's process group (it is started as its group's leader)."""
        if self._errlog is not None and self._group is None:
            self._group = server_group(self._errlog)

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    transport = _watched(await self._transport(stack), self._mark_lost)
                    client = Client(transport, message_handler=self._on_message, cache=None)
                    self._client = await stack.enter_async_context(client)
                    self._note_group()  # entering the transport spawned the process: find it now
                    async with anyio.create_task_group() as tg:
                        if self._wants_listen(client):
                            tg.start_soon(self._listen, client)
                        ready.set_result(None)
                        await self._stop.wait()
                        tg.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                _log.info("MCP server %s: connection ended: %s", self.spec.name, self.spec.redact(describe(exc)))
        finally:
            self.closed = True
            self._client = None
            if not ready.done():
                ready.set_exception(ConnectionError("closed before it was ready"))

    async def _transport(self, stack: AsyncExitStack) -> Any:
        spec = self.spec
        if spec.transport == "stdio":
            params = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd
            )
            return stdio_client(params, errlog=self._errlog) if self._errlog is not None else stdio_client(params)
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=dict(spec.headers), timeout=_HTTP_TIMEOUT))
        return streamable_http_client(spec.url, http_client=http)

    async def close(self) -> None:
        """End the session, (stdio) the process and whatever it started; bounded, and safe to call more than once."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            with anyio.move_on_after(_CLOSE_TIMEOUT_S):
                await asyncio.shield(task)
            if not task.done():  # a transport that would not wind down: cut it
                self._scope.cancel()
                with anyio.move_on_after(_CLOSE_TIMEOUT_S):
                    await asyncio.shield(task)
        self.closed = True
        group, self._group = self._group, None
        if group is not None:
            await end_group(group)

    # ------------------------------------------------------------------ requests
    def _require(self) -> Client:
        if self._client is None or not self.usable:
            raise SDKError(code=types.CONNECTION_CLOSED, message="Connection closed")
        return self._client

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists, across pages."""
        client = self._require()
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = await self._require().call_tool(name, arguments)
        if not isinstance(result, types.CallToolResult):  # an extension's claimed result: not ours to read
            raise SDKError(code=types.INTERNAL_ERROR, message=f"unexpected result type {type(result).__name__}")
        return result

    # ------------------------------------------------------------------ tool-list changes
    def _wants_listen(self, client: Client) -> bool:
        """2026-07-28 servers announce list changes only to a ``subscriptions/listen`` stream."""
        caps = client.server_capabilities.tools
        return client.protocol_version in MODERN_PROTOCOL_VERSIONS and caps is not None and bool(caps.list_changed)

    async def _listen(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._on_tools_changed()
        except Exception as exc:  # no stream: changes then show at the next reconnect only
            _log.debug("MCP server %s: no tool-change stream: %s", self.spec.name, describe(exc))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):  # earlier protocols send it unasked
            self._on_tools_changed()
        elif isinstance(message, Exception):
            _log.debug("MCP server %s: transport error: %s", self.spec.name, self.spec.redact(describe(message)))
