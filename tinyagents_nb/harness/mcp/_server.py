"""``MCPServer``: a Model Context Protocol server as a ``ToolProvider``, and ``MCPTool``, one of its tools.

Lifecycle. A server starts lazily, when a run first lists its tools, and stays up across runs and
across event loops: its connection lives on its own owner loop (``_owner``), reached from whichever
loop runs the harness. Its tool list is cached until the server announces a change
(``notifications/tools/list_changed``), so a run start costs nothing once it is up. A connection that
breaks (the process died, the HTTP session ended) fails the call in flight with an
``MCPConnectionError`` carrying the tail of the server's stderr; the next use starts it again (a
stdio server that exits while idle is noticed when its stdout ends, so no call fails for it).
``aclose``/``close`` (``AgentHarness.aclose`` calls them), ``%agent mcp remove`` and interpreter
exit (``atexit``) stop it; the SDK closes a stdio server's stdin, then terminates its process tree.

Cancellation. A call runs inside the run's cancellation scope; Stop cancels it on the owner loop,
where the SDK sends ``notifications/cancelled`` to the server, and the run ends cancelled.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import logging
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias, TypeVar

import anyio.to_thread

from .._context import RunContext
from .._errors import Cancelled, ConfigurationError
from .._model import ToolSchema
from .._tools import ToolResult
from ._errors import MCPConnectionError, MCPError, MCPUnavailableError
from ._owner import OwnerLoop, OwnerStopped
from ._spec import ServerSpec, Transport

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["MCPServer", "MCPTool"]

T = TypeVar("T")
_log = logging.getLogger("tinyagents_nb.mcp")

_TAIL_BYTES = 16_384
_TAIL_LINES = 20
_CLOSE_TIMEOUT_S = 15.0
_START_MARK = "--- tinyagents: server started "


def _require_sdk() -> None:
    try:
        found = importlib.util.find_spec("mcp") is not None
    except ValueError:  # ``sys.modules["mcp"] = None``: deliberately blocked
        found = False
    if not found:
        raise MCPUnavailableError()


ApprovalRule: TypeAlias = bool | Collection[str] | Callable[..., Any]


def _approval_rule(rule: object) -> bool | frozenset[str] | Callable[..., Any]:
    if isinstance(rule, bool) or callable(rule):
        return rule  # a callable is the tool-level rule, kept as given
    if isinstance(rule, Collection) and not isinstance(rule, str) and all(isinstance(n, str) for n in rule):
        return frozenset(rule)
    raise ConfigurationError(
        f"requires_approval must be a bool, a collection of tool names or a callable, got {rule!r}"
    )


class MCPTool:
    """One tool of an ``MCPServer``, offered to the model as ``{server}_{tool}``.

    Arguments go to the server as the model wrote them (the server validates them against the
    schema it published); nothing from the run context is sent. ``requires_approval`` comes from the
    server (``MCPServer.stdio(..., requires_approval=...)``): every tool, some tools by name, or a rule.
    """

    __slots__ = ("_schema", "remote_name", "server")

    def __init__(self, server: MCPServer, remote_name: str, schema: ToolSchema) -> None:
        self.server = server
        self.remote_name = remote_name
        self._schema = schema

    @property
    def name(self) -> str:
        return self._schema.name

    @property
    def description(self) -> str:
        return self._schema.description

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    @property
    def timeout_s(self) -> float | None:
        return self.server.timeout_s

    @property
    def requires_approval(self) -> bool | Callable[..., Any]:
        """The server's approval rule as it applies to this tool (read by the loop before each call)."""
        rule = self.server.requires_approval
        if isinstance(rule, frozenset):
            return self.remote_name in rule
        return rule

    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult:
        """Call the tool on its server; raises ``MCPError`` (or ``MCPConnectionError``) when it cannot."""
        return await self.server.call_tool(self.remote_name, arguments, ctx=ctx)

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.server.name!r})"


class MCPServer:
    """A Model Context Protocol server whose tools an agent may call; pass it in ``AgentHarness(tools=[…])``.

    Build one with ``MCPServer.stdio`` (a local process speaking over stdin/stdout) or
    ``MCPServer.http`` (a streamable-HTTP endpoint). Needs the optional extra: ``pip install
    'tinyagents-nb[mcp]'``.
    """

    def __init__(self, spec: ServerSpec, *, requires_approval: ApprovalRule = False) -> None:
        _require_sdk()
        self._spec = spec
        self.requires_approval: bool | frozenset[str] | Callable[..., Any] = _approval_rule(requires_approval)
        """Which calls wait for a person: ``True`` (all), tool names as the server calls them, or a
        ``(ctx, arguments)`` rule as for ``tool(requires_approval=...)``; ``False`` (default): none."""
        self._guard = threading.Lock()
        self._owner: OwnerLoop | None = None
        # owner-loop state: touched only there, read elsewhere as plain references
        self._lock: asyncio.Lock | None = None
        self._conn: Connection | None = None
        self._tools: tuple[MCPTool, ...] | None = None
        self._stale = False
        self._errlog: TextIO | None = None
        self._log_path: str | None = None
        self.starts = 0
        """How many times the server was started (or connected to); a restart after a crash adds one."""

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        timeout_s: float | None = None,
        startup_timeout_s: float = 30.0,
        requires_approval: ApprovalRule = False,
    ) -> MCPServer:
        """A server run as a subprocess, spoken to over its stdin/stdout.

        Args:
            name: Prefix of its tools' names (``{name}_{tool}``): 1-32 letters, digits, ``_``, ``-``.
            command: The executable (``sys.executable``, ``npx``, ``uvx``, ...).
            args: Its arguments.
            env: Variables added to the SDK's minimal inherited environment (``PATH``, ``HOME``, ...);
                the values are secret: they never appear in events, reprs or errors.
            cwd: The process's working directory.
            timeout_s: Per-call time limit (else the harness's ``RunPolicy.tool_timeout_s``).
            startup_timeout_s: How long starting and negotiating may take.
            requires_approval: Calls that wait for a person's approval: ``True`` (every tool), a
                collection of the server's tool names, or a ``(ctx, arguments)`` rule.

        Raises:
            MCPUnavailableError: The ``mcp`` extra is not installed.
            ConfigurationError: A bad name, command or argument.
        """
        _require_sdk()
        spec = ServerSpec.stdio(
            name,
            command,
            args,
            env,
            cwd=None if cwd is None else os.fspath(cwd),
            timeout_s=timeout_s,
            startup_timeout_s=startup_timeout_s,
        )
        return cls(spec, requires_approval=requires_approval)

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        timeout_s: float | None = None,
        startup_timeout_s: float = 30.0,
        requires_approval: ApprovalRule = False,
    ) -> MCPServer:
        """A streamable-HTTP server at ``url``; ``headers`` (e.g. ``Authorization``) are secret (see ``stdio``).

        Raises:
            MCPUnavailableError: The ``mcp`` extra is not installed.
            ConfigurationError: A bad name or URL.
        """
        _require_sdk()
        spec = ServerSpec.http(name, url, headers, timeout_s=timeout_s, startup_timeout_s=startup_timeout_s)
        return cls(spec, requires_approval=requires_approval)

    # ------------------------------------------------------------------ description (never secrets)
    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def transport(self) -> Transport:
        return self._spec.transport

    @property
    def target(self) -> str:
        """The command line, or the URL without credentials and query."""
        return self._spec.target

    @property
    def timeout_s(self) -> float | None:
        return self._spec.timeout_s

    @property
    def running(self) -> bool:
        conn = self._conn
        return conn is not None and conn.usable

    @property
    def tools(self) -> tuple[MCPTool, ...]:
        """The tools as last listed (empty before the first run or ``list_tools``)."""
        return self._tools or ()

    @property
    def log_path(self) -> str | None:
        """The file a stdio server's stderr goes to (``None`` before its first start, or for HTTP)."""
        return self._log_path

    def stderr_tail(self, lines: int = _TAIL_LINES) -> str:
        """The last ``lines`` the server wrote to stderr since it last started, secrets masked."""
        path = self._log_path
        if path is None:
            return ""
        try:
            with open(path, "rb") as file:
                file.seek(max(0, os.path.getsize(path) - _TAIL_BYTES))
                text = file.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        text = text.rsplit(_START_MARK, 1)[-1].split("\n", 1)[-1] if _START_MARK in text else text
        kept = [line for line in text.splitlines() if line.strip()][-lines:]
        redacted: str = self._spec.redact("\n".join(kept))
        return redacted

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"MCPServer(name={self.name!r}, transport={self.transport!r}, target={self.target!r}, {state})"

    # ------------------------------------------------------------------ ToolProvider
    async def list_tools(self, ctx: RunContext[Any] | None = None) -> tuple[MCPTool, ...]:
        """The server's tools, starting it if needed; answered from a cache until the server announces a change.

        Raises:
            MCPConnectionError: The server did not start or its connection broke.
            MCPError: The server answered ``tools/list`` with an error.
        """
        tools = self._tools
        if tools is not None and not self._stale and self.running:
            return tools
        return await self._run(self._list_on_owner, ctx)

    def start(self) -> tuple[MCPTool, ...]:
        """Start the server now, not at the first run, and return its tools; blocking, from any thread.

        Raises:
            MCPConnectionError: The server did not start (the message holds its stderr tail).
        """
        owner = self._owner_loop()
        try:
            return owner.call_blocking(self._list_on_owner, self._spec.startup_timeout_s + _CLOSE_TIMEOUT_S)
        except OwnerStopped:
            raise MCPConnectionError(f"MCP server `{self.name}` was closed while starting", server=self.name) from None

    async def call_tool(
        self, remote_name: str, arguments: Mapping[str, Any], *, ctx: RunContext[Any] | None = None
    ) -> ToolResult:
        """Call the server's tool ``remote_name`` (its own name, without the prefix); cancellable through ``ctx``."""
        payload = dict(arguments)

        async def call() -> ToolResult:
            return await self._call_on_owner(remote_name, payload)

        return await self._run(call, ctx)

    async def aclose(self) -> None:
        """Stop the server (close the session, end the process); it starts again if used later."""
        owner = self._detach()
        if owner is not None:
            try:
                await owner.call(self._close_on_owner)
            finally:
                await anyio.to_thread.run_sync(owner.stop)

    def close(self) -> None:
        """Blocking twin of ``aclose``, usable from any thread (``%agent mcp remove``, atexit)."""
        owner = self._detach()
        if owner is not None:
            try:
                owner.call_blocking(self._close_on_owner, _CLOSE_TIMEOUT_S)
            finally:
                owner.stop()

    # ------------------------------------------------------------------ crossing to the owner loop
    def _owner_loop(self) -> OwnerLoop:
        with self._guard:
            if self._owner is None or not self._owner.alive:
                self._owner = OwnerLoop(self.name)
                _live.add(self)
            return self._owner

    def _detach(self) -> OwnerLoop | None:
        with self._guard:
            owner, self._owner = self._owner, None
            _live.discard(self)
        return owner if owner is not None and owner.alive else None

    async def _run(self, fn: Callable[[], Awaitable[T]], ctx: RunContext[Any] | None) -> T:
        owner = self._owner_loop()
        try:
            if ctx is None:
                return await owner.call(fn)
            with ctx.cancellation.scope():
                return await owner.call(fn)
        except OwnerStopped:
            raise MCPConnectionError(f"MCP server `{self.name}` was closed during the call", server=self.name) from None
        raise Cancelled(ctx.cancellation.reason)  # not reached: the scope raises; for the type checker

    # ------------------------------------------------------------------ on the owner loop
    async def _connected(self) -> Connection:
        from ._connection import Connection, describe  # the SDK loads with the first server start

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.usable:
                return conn
            if conn is not None:
                await conn.close()
            errlog = self._open_errlog()
            conn = Connection(self._spec, errlog=errlog, on_tools_changed=self._mark_stale)
            try:
                await conn.open()
            except Exception as exc:
                raise self._connection_error(f"did not start: {describe(exc)}") from None
            self._conn = conn
            self.starts += 1
            return conn

    def _mark_stale(self) -> None:
        self._stale = True

    async def _list_on_owner(self) -> tuple[MCPTool, ...]:
        from ._convert import local_name, tool_schema, unique_name

        conn = await self._connected()
        self._stale = False  # before listing: a change announced meanwhile marks it stale again
        try:
            listed = await conn.list_tools()
        except Exception as exc:
            raise await self._failure(conn, "could not list its tools", exc) from None
        # The server's text reaches every model request (descriptions, schemas): masked like its results.
        # Names that collide once made provider-safe (``a b``, ``a.b``, ``a_b``) all stay callable: a name
        # that needed no change keeps it, the others get a suffix from their own name's hash.
        taken: set[str] = set()
        named: dict[int, str] = {}
        exact = {i for i, item in enumerate(listed) if local_name(self.name, item.name) == f"{self.name}_{item.name}"}
        for index in sorted(range(len(listed)), key=lambda i: i not in exact):  # unchanged names first
            name = unique_name(local_name(self.name, listed[index].name), listed[index].name, taken)
            taken.add(name)
            named[index] = name
        tools = [MCPTool(self, item.name, self._masked(tool_schema(named[i], item))) for i, item in enumerate(listed)]
        self._tools = tuple(tools)
        return self._tools

    def _masked(self, schema: ToolSchema) -> ToolSchema:
        redact = self._spec.redact
        return replace(schema, description=redact(schema.description), parameters=redact(schema.parameters))

    async def _call_on_owner(self, remote_name: str, arguments: dict[str, Any]) -> ToolResult:
        from ._convert import tool_result

        conn = await self._connected()
        try:
            result = await conn.call_tool(remote_name, arguments)
        except Exception as exc:
            raise await self._failure(conn, f"failed while calling `{remote_name}`", exc) from None
        converted = tool_result(result)
        return ToolResult(
            text=self._spec.redact(converted.text), is_error=converted.is_error, data=self._spec.redact(converted.data)
        )

    async def _failure(self, conn: Connection, what: str, exc: BaseException) -> MCPError:
        from ._connection import connection_lost, describe

        if not conn.usable or connection_lost(exc):
            await conn.close()
            if self._conn is conn:
                self._conn = None
            await anyio.sleep(0.05)  # let the last stderr lines of a dying process reach the file
            return self._connection_error(f"{what}: the connection ended ({describe(exc)})")
        return MCPError(self._spec.redact(f"MCP server `{self.name}` {what}: {describe(exc)}"), server=self.name)

    def _connection_error(self, message: str) -> MCPConnectionError:
        text = self._spec.redact(f"MCP server `{self.name}` ({self.transport}: {self.target}) {message}")
        return MCPConnectionError(text, server=self.name, stderr_tail=self.stderr_tail())

    async def _close_on_owner(self) -> None:
        conn, self._conn = self._conn, None
        self._tools = None
        self._stale = False
        self._lock = None  # bound to this owner loop, which stops now; a later start builds a new one
        if conn is not None:
            await conn.close()
        errlog, self._errlog = self._errlog, None
        if errlog is not None:
            errlog.close()
        path, self._log_path = self._log_path, None
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass

    def _open_errlog(self) -> TextIO | None:
        if self.transport != "stdio":
            return None
        if self._errlog is None:
            fd, path = tempfile.mkstemp(prefix=f"tinyagents-mcp-{self.name}-", suffix=".stderr.log")
            self._errlog = os.fdopen(fd, "a", encoding="utf-8", errors="replace")
            self._log_path = path
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        self._errlog.write(f"{_START_MARK}{stamp} ---\n")
        self._errlog.flush()
        return self._errlog


_live: weakref.WeakSet[MCPServer] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At interpreter (kernel) exit, stop every server still running: no orphan processes."""
    for server in list(_live):
        try:
            server.close()
        except Exception:
            _log.warning("MCP server %s did not close cleanly at exit", server.name, exc_info=True)
