"""Built-in middleware: logging, message trimming, usage accounting and a prompt-cache guard."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._cache_policy import CacheLayoutEvent, PrefixStatus
from ._errors import ConfigurationError
from ._messages import Message, ToolCall, stable_prefix_len
from ._middleware import Middleware
from ._model import ModelRequest, ModelResponse
from ._tokens import TokenEstimator
from ._usage import Usage
from .memory import TrimStrategy, trim_messages

if TYPE_CHECKING:
    from ._context import RunContext
    from ._run import AgentRun
    from ._tools import ToolResult

__all__ = ["LoggingMiddleware", "MessageTrimMiddleware", "PromptCacheGuardMiddleware", "UsageAccountingMiddleware"]


class LoggingMiddleware(Middleware):
    """Logs each run, model call and tool call (ids, models, tool names; never message content)."""

    def __init__(self, logger: logging.Logger | None = None, *, level: int = logging.INFO) -> None:
        self.logger = logger or logging.getLogger("tinyagents_nb.run")
        self.level = level

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        self.logger.log(self.level, "run %s started (depth %d, %d messages)", ctx.run_id, ctx.depth, len(messages))

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        self.logger.log(self.level, "run %s completed: %r", ctx.run_id, run)

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        self.logger.log(self.level, "run %s: model call with %d messages", ctx.run_id, len(request.messages))
        return request

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        calls = [c.name for c in response.message.tool_calls]
        self.logger.log(
            self.level, "run %s: %s answered (%s tokens, tools=%s)", ctx.run_id, response.model,
            response.usage.total_tokens, calls,
        )  # fmt: skip
        return response

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall:
        self.logger.log(self.level, "run %s: tool %s (%s)", ctx.run_id, call.name, call.id)
        return call

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        self.logger.log(self.level, "run %s: tool %s done (error=%s)", ctx.run_id, call.name, result.is_error)
        return result

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self.logger.log(self.level, "run %s ended with %s: %s", ctx.run_id, type(error).__name__, error)


class MessageTrimMiddleware(Middleware):
    """Trims each request's messages with a ``TrimStrategy`` (the run's own transcript is untouched)."""

    def __init__(self, strategy: TrimStrategy, *, estimator: TokenEstimator | None = None) -> None:
        self.strategy = strategy
        self.estimator = estimator

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        trimmed = trim_messages(request.messages, self.strategy, estimator=self.estimator)
        if len(trimmed) == len(request.messages):
            return request
        return request.with_messages(tuple(trimmed))


class UsageAccountingMiddleware(Middleware):
    """Counts calls and tokens per model across every run that uses this middleware instance."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.usage: dict[str, Usage] = {}

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        model = response.model or "unknown"
        with self._lock:
            self.calls[model] = self.calls.get(model, 0) + 1
            self.usage[model] = self.usage.get(model, Usage()) + response.usage
        return response

    @property
    def total(self) -> Usage:
        with self._lock:
            return sum(self.usage.values(), Usage())


def _prefix_fingerprint(request: ModelRequest) -> str:
    # the stable prefix only: a summary or retrieved context after it is history, checked as such
    system = [m.text for m in request.messages[: stable_prefix_len(request.messages)]]
    tools = [[t.name, t.description, dict(t.parameters)] for t in request.tools]
    blob = json.dumps([system, tools], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _prefix_status(
    previous: tuple[str, Sequence[Message]] | None, fingerprint: str, messages: Sequence[Message]
) -> tuple[PrefixStatus, int]:
    """How ``messages`` relate to the previous request, and how many leading messages they share.

    Append-only growth (every earlier message unchanged) keeps the provider's cache: ``appended``.
    Compared by identity first, so the loop's unchanged messages cost one pointer check each.
    """
    if previous is None:
        return "first", 0
    old_fingerprint, old = previous
    shared = 0
    for a, b in zip(old, messages, strict=False):
        if a is not b and a != b:
            break
        shared += 1
    if old_fingerprint != fingerprint:
        return "prefix_changed", shared
    if shared < len(old):
        return "rewritten", shared
    return ("same" if len(messages) == len(old) else "appended"), shared


class PromptCacheGuardMiddleware(Middleware):
    """Detects changes that break a provider's prompt cache within a run.

    Providers cache the longest stable prefix of a request. Two things silently defeat that: the
    stable prefix (leading system messages and tool schemas) changing between calls, and earlier
    messages being rewritten rather than appended to. Each is recorded in ``violations`` (and
    logged); with ``strict=True`` the model call is refused instead. Append-only growth is stable.
    Every call emits a ``cache.layout`` event (``CacheLayoutEvent``) saying which it was.

    The check runs in ``before_send``, on the request as it is sent: after every middleware's
    ``before_model`` and after the context-pressure chain, whose trimming, summaries and compaction
    rewrite exactly the prefix the provider caches.
    """

    def __init__(self, *, strict: bool = False, logger: logging.Logger | None = None) -> None:
        self.strict = strict
        self.logger = logger or logging.getLogger("tinyagents_nb.cache")
        self.violations: list[str] = []
        self._last: dict[str, tuple[str, Sequence[Message]]] = {}

    async def before_send(self, ctx: RunContext[Any], request: ModelRequest) -> None:
        fingerprint = _prefix_fingerprint(request)
        previous = self._last.get(ctx.run_id)
        self._last[ctx.run_id] = (fingerprint, request.messages)
        status, shared = _prefix_status(previous, fingerprint, request.messages)
        ctx.emit(
            CacheLayoutEvent,
            status=status,
            stable_messages=stable_prefix_len(request.messages),
            shared_messages=shared,
            messages=len(request.messages),
            tools=len(request.tools),
            prompt_cache=request.prompt_cache,
        )
        problem = None
        if status == "prefix_changed":
            problem = "the stable prompt prefix (system messages or tool schemas) changed"
        elif status == "rewritten":
            problem = "earlier messages were rewritten instead of appended to"
        if problem is not None:
            note = f"run {ctx.run_id}: {problem}; the provider's prompt cache will miss"
            self.violations.append(note)
            self.logger.warning(note)
            if self.strict:
                raise ConfigurationError(note)

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        self._last.pop(ctx.run_id, None)

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self._last.pop(ctx.run_id, None)
