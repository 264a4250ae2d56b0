"""Tool results controlled at arrival: a size limit per tool, with the raw output kept and readable.

Context pressure compacts old tool results only when a request no longer fits; one huge result
(a whole web page, a 10 MB log) should not get that far. ``ToolResultLimit`` cuts every result
longer than its tool's limit as it arrives (in ``after_tool``, before the model or the transcript
sees it), saves the raw result in the store under the same namespace and key scheme as
``CompactToolOutputs`` (so ``load_tool_output`` reads either), and tells the model where it is.
``reader_tool()`` gives the model a ``read_tool_output`` tool that pages through it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._context import RunContext
from ._errors import ConfigurationError
from ._messages import dump_messages
from ._middleware import Middleware
from ._tools import FunctionTool, ToolResult, tool
from .memory import TOOL_OUTPUT_NAMESPACE, load_tool_output

if TYPE_CHECKING:
    from ._messages import ToolCall, ToolMessage
    from .stores import Store

__all__ = ["TRUNCATED_TAG", "ReaderOnDemand", "ToolResultLimit"]

TRUNCATED_TAG = "truncated"
"""Marks (in ``ToolResult.data``) a result cut at arrival; ``data["raw_key"]`` names the raw output."""
DEFAULT_NOTE = (
    "\n[tool output truncated: showing {shown} of {chars} chars; the full output is kept under key "
    "{key!r}; call read_tool_output(key, offset) to read the rest]"
)


_GAP = "\n…\n"  # between the kept head and tail


def tool_output_key(scope: str, message: ToolMessage) -> str:
    """``{thread or root run}/{tool_call_id}/{content hash}``: the key scheme ``CompactToolOutputs`` uses."""
    blob = json.dumps(dump_messages([message])[0], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return f"{scope}/{message.tool_call_id}/{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def _scope(ctx: RunContext[Any]) -> str:
    return str(ctx.thread_id or ctx.root_run_id)


class ToolResultLimit(Middleware):
    """Truncate oversized tool results at arrival; keep the raw result in the store.

    Args:
        max_chars: The default limit per result, in characters (the seed's 20,000, about 5k tokens).
        per_tool: Limits by tool name, overriding ``max_chars``; ``None`` exempts a tool.
        store: Where raw results go (default: the run's ``ctx.stores.default``).
        keep_raw: Save raw results at all (without it the rest is gone; the note says so).
        head_fraction: The share of the kept characters taken from the start; the rest comes from the
            end (errors and totals are often at the end of a log).
    """

    def __init__(
        self,
        max_chars: int = 20_000,
        *,
        per_tool: Mapping[str, int | None] | None = None,
        store: Store | None = None,
        keep_raw: bool = True,
        head_fraction: float = 0.8,
    ) -> None:
        limits = {"max_chars": max_chars, **{f"per_tool[{k!r}]": v for k, v in (per_tool or {}).items()}}
        for label, raw in limits.items():
            value: object = raw
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 500):
                raise ConfigurationError(f"{label} must be an int >= 500 (or None in per_tool), got {value!r}")
        if not 0.0 < head_fraction <= 1.0:
            raise ConfigurationError(f"head_fraction must be in (0, 1], got {head_fraction!r}")
        self.max_chars = max_chars
        self.per_tool: dict[str, int | None] = dict(per_tool or {})
        self.store = store
        self.keep_raw = keep_raw
        self.head_fraction = head_fraction
        self.cut_scopes: set[str] = set()
        """Threads (or root runs) in which a result was cut and kept: where a reader is worth offering."""

    def limit_for(self, tool_name: str) -> int | None:
        return self.per_tool[tool_name] if tool_name in self.per_tool else self.max_chars

    def _store(self, ctx: RunContext[Any]) -> Store:
        return self.store if self.store is not None else ctx.stores.default

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        limit = self.limit_for(call.name)
        text = result.text
        if limit is None or len(text) <= limit:
            return result
        key = None
        if self.keep_raw:
            message = result.to_message(call)
            key = tool_output_key(_scope(ctx), message)
            self._store(ctx).put(TOOL_OUTPUT_NAMESPACE, key, dump_messages([message])[0])
            self.cut_scopes.add(_scope(ctx))
        note = DEFAULT_NOTE if key is not None else "\n[tool output truncated: showing {shown} of {chars} chars]"
        budget = max(limit - len(note.format(shown=limit, chars=len(text), key=key or "")) - len(_GAP), 100)
        head = int(budget * self.head_fraction)
        tail = budget - head
        kept = text[:head] + (_GAP + text[-tail:] if tail else "")
        data = {TRUNCATED_TAG: True, "raw_key": key, "chars": len(text)}
        return ToolResult(
            text=kept + note.format(shown=budget, chars=len(text), key=key or ""),
            is_error=result.is_error,
            data=data if result.data is None else {**data, "data": result.data},
            blocks=result.blocks,
        )

    def reader_tool(self, *, page_chars: int | None = None) -> FunctionTool[..., Any]:
        """A ``read_tool_output(key, offset=0)`` tool returning one page of a raw result.

        Its own results are exempt from this middleware's limit (unless ``per_tool`` already names
        it), or a page would be truncated and stored all over again.

        Args:
            page_chars: Characters per page (default: this middleware's ``max_chars``), so reading
                back never brings in more than the limit at once.
        """
        page: object = page_chars if page_chars is not None else self.max_chars
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise ConfigurationError(f"page_chars must be an int >= 1, got {page!r}")
        owner, size = self, page
        self.per_tool.setdefault("read_tool_output", None)

        async def read_tool_output(ctx: RunContext[Any], key: str, offset: int = 0) -> str:
            """Read a page of a tool output that was truncated; the truncation note gives the key.

            Args:
                ctx: The run (injected; not shown to the model).
                key: The key from the truncation note.
                offset: The character to start from (0 for the beginning).
            """
            # a key is scoped to its thread (or root run): a model cannot read another thread's outputs
            raw = load_tool_output(owner._store(ctx), key) if key.startswith(_scope(ctx) + "/") else None
            if raw is None:
                return f"no stored tool output under key {key!r}"
            text = raw.text
            offset = max(0, offset)
            end = min(len(text), offset + size)
            more = f"; continue with offset={end}" if end < len(text) else "; end of output"
            return f"[chars {offset}-{end} of {len(text)}{more}]\n{text[offset:end]}"

        return tool(read_tool_output)

    def on_demand_reader(self) -> ReaderOnDemand:
        """A tool provider offering ``read_tool_output`` only in a thread where a result was cut.

        The harness's default limit (``RunPolicy.tool_result_limit``) uses it, so a run whose tools
        never return much sees no extra tool (and pays no tokens for it).
        """
        return ReaderOnDemand(self)

    def __repr__(self) -> str:
        return f"ToolResultLimit(max_chars={self.max_chars}, per_tool={self.per_tool!r}, keep_raw={self.keep_raw})"


class ReaderOnDemand:
    """``ToolProvider`` of a ``ToolResultLimit``'s reader tool, listed once the limit cut a result in the run's thread."""

    name = "read_tool_output"

    def __init__(self, limit: ToolResultLimit) -> None:
        self.limit = limit
        self._offered: tuple[FunctionTool[..., Any], ...] = (limit.reader_tool(),)
        self._none: tuple[FunctionTool[..., Any], ...] = ()

    async def list_tools(self, ctx: RunContext[Any]) -> tuple[FunctionTool[..., Any], ...]:
        # the same tuple objects each time: the registry skips all work when nothing changed
        return self._offered if _scope(ctx) in self.limit.cut_scopes else self._none

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"ReaderOnDemand({self.limit!r})"
