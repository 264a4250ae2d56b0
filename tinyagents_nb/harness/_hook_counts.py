"""``HookCounts``: how many times each middleware hook fired in a run, and the ``HookCounter`` that counts.

Counting is a middleware, not loop bookkeeping, so a run that does not ask pays nothing. Install a
``HookCounter`` and read ``counter.counts(run_id)`` after the run: a test asserts that a retry did
not call ``before_model`` twice, or that ``on_tool_delta`` saw every progress report.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError
from ._messages import Message, MessageDelta, ToolCall
from ._middleware import HOOKS, Middleware
from ._model import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from ._context import RunContext
    from ._run import AgentRun
    from ._tool_progress import ToolDelta
    from ._tools import ToolResult

__all__ = ["HookCounter", "HookCounts"]


class HookCounts(Mapping[str, int]):
    """A read-only count per hook name (every hook is a key; one that never fired counts 0)."""

    __slots__ = ("_counts",)

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        given = dict(counts or {})
        unknown = set(given) - set(HOOKS)
        if unknown:
            raise ConfigurationError(f"not middleware hooks: {', '.join(sorted(unknown))}")
        self._counts = {hook: given.get(hook, 0) for hook in HOOKS}

    def __getitem__(self, hook: str) -> int:
        return self._counts[hook]

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts)

    def __len__(self) -> int:
        return len(self._counts)

    @property
    def total(self) -> int:
        """All hook calls together."""
        return sum(self._counts.values())

    def fired(self) -> dict[str, int]:
        """Only the hooks that fired, in the loop's hook order."""
        return {hook: n for hook, n in self._counts.items() if n}

    def __repr__(self) -> str:
        return f"HookCounts({self.fired()!r})"


class HookCounter(Middleware):
    """Counts every hook call, per run; thread-safe (tools on worker threads may report progress)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, Counter[str]] = {}

    def _count(self, ctx: RunContext[Any], hook: str) -> None:
        with self._lock:
            self._runs.setdefault(str(ctx.run_id), Counter())[hook] += 1

    def counts(self, run_id: str | None = None) -> HookCounts:
        """The counts of one run, or of every run this counter saw when ``run_id`` is ``None``."""
        with self._lock:
            if run_id is not None:
                return HookCounts(self._runs.get(str(run_id), Counter()))
            total: Counter[str] = Counter()
            for counter in self._runs.values():
                total.update(counter)
            return HookCounts(total)

    def runs(self) -> list[str]:
        """The runs counted, in the order they first fired a hook."""
        with self._lock:
            return list(self._runs)

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        self._count(ctx, "before_agent")

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        self._count(ctx, "after_agent")

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        self._count(ctx, "before_model")
        return request

    async def before_send(self, ctx: RunContext[Any], request: ModelRequest) -> None:
        self._count(ctx, "before_send")

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        self._count(ctx, "after_model")
        return response

    def on_model_delta(self, ctx: RunContext[Any], delta: MessageDelta) -> None:
        self._count(ctx, "on_model_delta")

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall:
        self._count(ctx, "before_tool")
        return call

    def on_tool_delta(self, ctx: RunContext[Any], call: ToolCall, delta: ToolDelta) -> None:
        self._count(ctx, "on_tool_delta")

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        self._count(ctx, "after_tool")
        return result

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self._count(ctx, "on_error")

    def __repr__(self) -> str:
        return f"HookCounter(runs={len(self._runs)})"
