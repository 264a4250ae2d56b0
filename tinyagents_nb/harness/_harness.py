"""``AgentHarness``: the facade that runs the agent loop, and ``RunPolicy``, its harness-wide settings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from ._approval import ApprovalDecision, ApprovalDesk, ApprovalRequest, UnattendedApproval
from ._cache_policy import CachePolicy
from ._child_steering import SubAgentHandle, find_child
from ._clock import RANDOM_IDS, SYSTEM_CLOCK, Clock, IdSource
from ._config import RunConfig
from ._context import RunContext
from ._errors import ConfigurationError, SteeringError
from ._events import AgentEvent
from ._limits import RunLimits
from ._loop import RunLoop
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ._middleware import Middleware, MiddlewareStack
from ._middleware_events import trace_hook
from ._model import ChatModel, ModelRequest, ToolSchema
from ._profile import ModelProfile
from ._retry import FallbackPolicy, RateLimiter, RetryPolicy
from ._run import AgentRun, HarnessRunStatus
from ._run_sync import run_blocking as _run_blocking
from ._sink import EventSubscription
from ._steering import InjectMessage, Pause, Redirect, Resume, SteeringCommand, SteeringReceipt
from ._stream import StreamChunk, iter_chunks, run_tree_filter as _run_tree_filter, stream_modes
from ._structured import OutputSpec, StructuredStrategy, strategy_for_profile
from ._tokens import TokenEstimator
from ._tool_registry import ToolProvider, ToolRegistry
from ._tools import Tool
from ._window import ContextWindow
from .memory import ContextPressureChain
from .providers import resolve_model
from .stores import ResponseCache

__all__ = ["AgentHarness", "AgentInput", "AgentStream", "RunPolicy"]

DataT = TypeVar("DataT")
T = TypeVar("T")

AgentInput: TypeAlias = str | Message | Sequence[Message]
"""A prompt string, one message, or a whole transcript to continue."""

ErrorPolicy = Literal["return_error", "fail"]
_TERMINAL = frozenset({"run.completed", "run.failed", "run.cancelled"})
_TOOL_TOKEN_SETS = 16  # distinct tool sets whose schema token count is remembered


@dataclass(frozen=True, kw_only=True)
class RunPolicy:
    """Harness-wide settings for every run.

    Attributes:
        limits: Caps on model calls, tool calls, wall clock, retries, concurrency and depth.
        retry: Backoff for retryable provider errors.
        fallback: Models to try, in order, when the primary model keeps failing.
        unknown_tool: ``return_error`` tells the model the tool does not exist; ``fail`` ends the run.
        invalid_args: The same choice for arguments that do not parse or validate.
        tool_errors: The same choice for a tool that raises.
        tool_timeout_s: Default per-tool timeout (a tool's own ``timeout_s`` wins); expiry is reported to the model.
        output: Structured output to extract from the final answer (a type, JSON schema or ``OutputSpec``).
        structured_strategy: ``auto`` chooses from the model profile.
        structured_retries: How many times an invalid structured answer is sent back to the model
            with its validation error before the run fails with ``StructuredOutputError``; each
            repair is one more model call under the usual limits (0: no repair).
        reactive_compactions: How many times one model call is compacted and re-sent after the
            provider rejects its prompt as too long (``ContextLimitError``) despite the estimate;
            0 lets that error end the run.
        max_output_tokens: Cap on each request's output tokens.
        temperature: Sampling temperature passed to the model.
        model_settings: Extra provider parameters for every request.
        response_cache: A local response cache (else the context's ``cache.response_cache`` is used, if any).
        cache: Which caches are used at all: the response cache and provider prompt-cache breakpoints.
        rate_limiter: Throttles model calls.
        clock: Time source (the testkit's ``DeterministicClock`` makes durations reproducible).
        ids: Id source for call ids and child run ids (``DeterministicIds`` in tests).
        middleware_events: Emit ``middleware.started``/``middleware.completed`` around every
            middleware hook (off by default: it doubles the events of a round trip).
        unattended_approval: How a tool call that needs approval is decided when nobody can answer
            (no run handle, or an unattended session): ``deny``, ``approve``, or ``None`` (deny).
    """

    limits: RunLimits = field(default_factory=RunLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    fallback: FallbackPolicy | None = None
    unknown_tool: ErrorPolicy = "return_error"
    invalid_args: ErrorPolicy = "return_error"
    tool_errors: ErrorPolicy = "return_error"
    tool_timeout_s: float | None = None
    output: OutputSpec | None = None
    structured_strategy: Literal["auto"] | StructuredStrategy = "auto"
    structured_retries: int = 2
    reactive_compactions: int = 2
    max_output_tokens: int | None = None
    temperature: float | None = None
    model_settings: Mapping[str, Any] = field(default_factory=dict)
    response_cache: ResponseCache | None = None
    cache: CachePolicy = field(default_factory=CachePolicy)
    rate_limiter: RateLimiter | None = None
    clock: Clock = SYSTEM_CLOCK
    ids: IdSource = RANDOM_IDS
    unattended_approval: UnattendedApproval | None = None
    middleware_events: bool = False

    def __post_init__(self) -> None:
        for name in ("unknown_tool", "invalid_args", "tool_errors"):
            if getattr(self, name) not in ("return_error", "fail"):
                raise ConfigurationError(f"{name} must be 'return_error' or 'fail', got {getattr(self, name)!r}")
        if self.tool_timeout_s is not None and self.tool_timeout_s <= 0:
            raise ConfigurationError("tool_timeout_s must be > 0")
        if self.unattended_approval not in (None, "deny", "approve"):
            raise ConfigurationError(
                f"unattended_approval must be 'deny', 'approve' or None, got {self.unattended_approval!r}"
            )
        retries: object = self.structured_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"structured_retries must be an int >= 0, got {retries!r}")
        reactive: object = self.reactive_compactions
        if isinstance(reactive, bool) or not isinstance(reactive, int) or reactive < 0:
            raise ConfigurationError(f"reactive_compactions must be an int >= 0, got {reactive!r}")
        output: object = self.output
        if output is not None and not isinstance(output, OutputSpec):  # a type or a schema, for convenience
            object.__setattr__(self, "output", OutputSpec.of(output))


class AgentHarness(Generic[DataT]):
    """Runs the model → tool → model loop for one model, a set of tools and a middleware stack.

    Args:
        model: A ``ChatModel`` or a model string such as ``"openai:gpt-4o-mini"``.
        tools: Tools, plain typed functions (wrapped with ``@tool``), or ``ToolProvider``s such as an
            ``MCPServer``, whose tools are listed when a run starts.
        middleware: Hooks around the agent, model and tool calls.
        policy: Limits, retry, fallback, error handling, structured output.
        system_prompt: Prepended to the input unless it already starts with a system message.
        context_window: The model's window (or its size in tokens); taken from the model profile when omitted.
        name: A label for this agent (used by sub-agents and the dashboard).
        pressure: The context-pressure chain applied before every model call when a context window is
            known: ``"default"`` (drop retrieved context, trim, summarize, compact tool outputs, then
            fail with ``ContextLimitError``), a ``ContextPressureChain`` of your own, or ``None`` to
            only measure (the provider then has the last word).
        output_type: Structured output to extract (a pydantic model, any type pydantic validates, or a
            JSON schema); overrides ``policy.output``.
    """

    def __init__(
        self,
        *,
        model: ChatModel | str,
        tools: Iterable[Tool | ToolProvider | Callable[..., Any]] = (),
        middleware: Sequence[Middleware] = (),
        policy: RunPolicy | None = None,
        system_prompt: str | None = None,
        context_window: ContextWindow | int | None = None,
        name: str | None = None,
        output_type: OutputSpec | type[Any] | Mapping[str, Any] | None = None,
        pressure: ContextPressureChain | Literal["default"] | None = "default",
    ) -> None:
        self.model: ChatModel = resolve_model(model)
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.policy = policy if policy is not None else RunPolicy()
        self.middleware = MiddlewareStack(middleware, wrap=trace_hook if self.policy.middleware_events else None)
        self.system_prompt = system_prompt
        self.name = name or self.model.model_name
        fallback = self.policy.fallback
        chain = [self.model]
        if fallback is not None:
            chain.extend(resolve_model(m) for m in fallback.models)
        self.model_chain: tuple[ChatModel, ...] = tuple(chain)
        self.profile: ModelProfile | None = getattr(self.model, "profile", None)
        output = self.policy.output if output_type is None else OutputSpec.of(output_type)
        self.output: OutputSpec | None = output
        requested = output.strategy if output is not None and output.strategy != "auto" else None
        self.structured_strategy: StructuredStrategy | None = (
            strategy_for_profile(self.profile, requested or self.policy.structured_strategy)
            if output is not None
            else None
        )
        if output is not None and output.name in self.tools:
            raise ConfigurationError(f"structured output name {output.name!r} collides with a tool of that name")
        self.context_window = self._window(context_window)
        self.pressure: ContextPressureChain | None = (
            (ContextPressureChain() if pressure == "default" else pressure) if self.context_window is not None else None
        )
        self._estimator: TokenEstimator | None = None
        # tool-schema token counts by the identity of the schemas sent (kept alive, so ids stay unique)
        self._tool_tokens: dict[tuple[int, ...], tuple[tuple[ToolSchema, ...], int]] = {}
        self._last_tools: tuple[tuple[ToolSchema, ...], int] = ((), 0)  # the same tuple again: no lookup
        self._last_estimate: tuple[ModelRequest, int] | None = None

    def _window(self, window: ContextWindow | int | None) -> ContextWindow | None:
        if isinstance(window, ContextWindow):
            return window
        if isinstance(window, int):
            return ContextWindow(model=self.model.model_name, max_tokens=window, reserved_output_tokens=window // 8)
        if self.profile is not None and self.profile.context_window:
            size = self.profile.context_window
            reserved = min(self.profile.max_output_tokens or 4_096, size // 4)
            return ContextWindow(model=self.model.model_name, max_tokens=size, reserved_output_tokens=reserved)
        return None

    # ---------------------------------------------------------------------------- hooks used by the loop
    def response_cache_for(self, ctx: RunContext[Any]) -> ResponseCache | None:
        if not self.policy.cache.response_cache:
            return None
        if self.policy.response_cache is not None:
            return self.policy.response_cache
        cache = ctx.cache.response_cache
        if cache is None:
            return None
        return cache if isinstance(cache, ResponseCache) else None

    async def fit_context(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        """Make the request fit the context window (the pressure chain) and publish the estimate.

        The run's own transcript is not changed: relief applies to what is sent, and the chain's
        summaries are reused across calls so re-relieving the same history is cheap. The final
        estimate lands on ``ctx.context_window``, where the notebook's gauge reads it.
        """
        window = self.context_window
        if window is None:
            return request
        if self._estimator is None:
            self._estimator = TokenEstimator.for_model(self.model.model_name)
        estimator = self._estimator
        tool_tokens = self._schema_tokens(estimator, tuple(request.tools))
        estimate = estimator.estimate(request.messages, tools_schema_tokens=tool_tokens)
        if self.pressure is not None and not window.fits(estimate):
            relieved = await self.pressure.relieve(
                ctx, request.messages, window=window, estimator=estimator, tools_schema_tokens=tool_tokens
            )
            request = request.with_messages(tuple(relieved))
            estimate = estimator.estimate(request.messages, tools_schema_tokens=tool_tokens)
        ctx.context_window = window.with_estimate(estimate)
        self._last_estimate = (request, estimate)
        return request

    def request_tokens(self, request: ModelRequest) -> int:
        """The prompt tokens ``request`` is estimated at (``fit_context``'s estimate when it made this request)."""
        last = self._last_estimate
        if last is not None and last[0] is request:
            return last[1]
        if self._estimator is None:
            self._estimator = TokenEstimator.for_model(self.model.model_name)
        estimator = self._estimator
        return estimator.estimate(
            request.messages, tools_schema_tokens=self._schema_tokens(estimator, tuple(request.tools))
        )

    def _schema_tokens(self, estimator: TokenEstimator, tools: tuple[ToolSchema, ...]) -> int:
        """Tokens the tool schemas cost, counted once per distinct tool set.

        The set can change between calls (tools registered or removed, the structured-output tool
        added, a middleware narrowing the tools), so the count is keyed by the schemas' identity:
        the registry hands out the same schema objects until it changes, which keeps a hit to one
        tuple of ``id``s and one dict lookup.
        """
        last = self._last_tools
        if last[0] is tools:
            return last[1]
        key = tuple(map(id, tools))
        hit = self._tool_tokens.get(key)
        if hit is not None:
            self._last_tools = hit
            return hit[1]
        text = "".join(f"{s.name}{s.description}{dict(s.parameters)}" for s in tools)
        tokens = estimator.counter.count(text) if text else 0
        if len(self._tool_tokens) >= _TOOL_TOKEN_SETS:
            self._tool_tokens.pop(next(iter(self._tool_tokens)))  # oldest first
        self._tool_tokens[key] = self._last_tools = (tools, tokens)
        return tokens

    # ---------------------------------------------------------------------------- entry points
    def _messages(self, input: AgentInput) -> list[Message]:
        if isinstance(input, str):
            if not input.strip():
                raise ConfigurationError("the input is empty", hint="pass a prompt or a list of messages")
            messages: list[Message] = [UserMessage(text=input)]
        elif isinstance(input, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
            messages = [input]
        else:
            messages = list(input)
        if not messages:
            raise ConfigurationError("the input has no messages")
        if self.system_prompt and not isinstance(messages[0], SystemMessage):
            messages.insert(0, SystemMessage(text=self.system_prompt))
        return messages

    def _context(self, config: RunConfig | None, data: Any) -> RunContext[Any]:
        ids = self.policy.ids
        if config is None and ids is not RANDOM_IDS:  # a deterministic id source names the root too
            config = RunConfig(run_id=ids.run_id())
        return RunContext(config=config, data=data)

    async def invoke(self, input: AgentInput, *, config: RunConfig | None = None, data: Any = None) -> AgentRun:
        """Run to completion in a fresh root context; raises the run's error (``RunCancelled``, ...)."""
        return await self.invoke_in_context(self._context(config, data), input)

    async def invoke_in_context(self, ctx: RunContext[Any], input: AgentInput) -> AgentRun:
        """Run inside an existing context (how nested runs inherit identity, sink, token and trackers)."""
        run, _ = await self.invoke_with_status(ctx, input)
        if run.error is not None:
            raise run.error
        return run

    async def invoke_with_status(
        self, ctx: RunContext[Any], input: AgentInput, *, streaming: bool = False
    ) -> tuple[AgentRun, HarnessRunStatus]:
        """Run and return the result with its final status; never raises a run error (see ``run.error``)."""
        status = self._status(ctx)
        run = await RunLoop(self, ctx, self._messages(input), streaming=streaming, status=status).run()
        return run, status

    async def invoke_with_events(
        self, input: AgentInput, *, config: RunConfig | None = None, data: Any = None
    ) -> tuple[AgentRun, list[AgentEvent]]:
        """Run to the end and return the result with every event of its run tree, in order.

        Like ``invoke_with_status`` it never raises a run error (see ``run.error``): the events of a
        failed run are exactly what one wants to look at.
        """
        ctx = self._context(config, data)
        events: list[AgentEvent] = []
        member = _run_tree_filter(ctx)
        remove = ctx.events.add_listener(lambda _offset, e: events.append(e) if member(e) else None)
        try:
            run, _ = await self.invoke_with_status(ctx, input)
        finally:
            remove()
        return run, events

    def invoke_streaming(
        self,
        input: AgentInput,
        *,
        config: RunConfig | None = None,
        data: Any = None,
        context: RunContext[Any] | None = None,
    ) -> AgentStream:
        """Start a streaming run; iterate the returned ``AgentStream`` for events, ending with the terminal one."""
        ctx = context if context is not None else self._context(config, data)
        return AgentStream(self, ctx, self._messages(input))

    def invoke_streaming_with_status(
        self,
        input: AgentInput,
        *,
        config: RunConfig | None = None,
        data: Any = None,
        context: RunContext[Any] | None = None,
    ) -> AgentStream:
        """The streaming twin of ``invoke_with_status``: awaiting the handle never raises a run error.

        ``await handle`` and ``handle.result()`` return the ``AgentRun`` whatever its outcome;
        ``handle.error`` holds a failure or cancel and ``handle.status`` the live ``HarnessRunStatus``.
        """
        ctx = context if context is not None else self._context(config, data)
        return AgentStream(self, ctx, self._messages(input), raises=False)

    def run_sync(self, input: AgentInput, *, config: RunConfig | None = None, data: Any = None) -> AgentRun:
        """Blocking twin of ``invoke``; inside a running event loop (Jupyter) it runs on a worker thread.

        Inside a running loop, Ctrl-C (a kernel interrupt) cancels the run cooperatively and raises
        ``RunCancelled`` with the partial transcript; without one, asyncio ends the run at once and
        ``KeyboardInterrupt`` propagates.
        """
        ctx = self._context(config, data)

        async def run_and_close() -> AgentRun:
            try:
                return await self.invoke_in_context(ctx, input)
            finally:  # the private loop ends with this call: release clients bound to it
                await self._release_models()

        return _run_blocking(run_and_close, ctx)

    async def aclose(self) -> None:
        """Close the models' HTTP clients for the running loop and every tool provider (MCP servers)."""
        await self._release_models()
        for provider in self.tools.providers:
            await provider.aclose()

    def close(self) -> None:
        """Blocking twin of ``aclose`` (works inside a running Jupyter loop too)."""
        _run_blocking(self.aclose, RunContext())

    async def _release_models(self) -> None:
        # Models' clients are bound to the loop that made them; providers outlive loops (see harness.mcp).
        for model in self.model_chain:
            closer = getattr(model, "aclose", None)
            if closer is not None:
                await closer()

    def _status(self, ctx: RunContext[Any]) -> HarnessRunStatus:
        return HarnessRunStatus(
            run_id=ctx.run_id,
            parent_run_id=ctx.parent_run_id,
            root_run_id=ctx.root_run_id,
            thread_id=ctx.thread_id,
            depth=ctx.depth,
            started_at=self.policy.clock.time(),
        )

    def __repr__(self) -> str:
        return f"AgentHarness(name={self.name!r}, model={self.model.model_name!r}, tools={self.tools.names()!r})"


class AgentStream(AsyncIterator[AgentEvent]):
    """A streaming run: async-iterate its events (ending with its terminal event), await ``result()``.

    The run starts on the first iteration or ``result()`` call, as a task on the running loop.
    ``chunks(*modes)`` views the same run tree through stream modes instead.
    """

    def __init__(
        self, harness: AgentHarness[Any], ctx: RunContext[Any], messages: list[Message], *, raises: bool = True
    ) -> None:
        if ctx.approvals is None:  # a handle exists, so someone can answer approvals
            ctx.approvals = ApprovalDesk()
        self.context = ctx
        self.approvals: ApprovalDesk = ctx.approvals
        self._raises = raises
        self.run_id = ctx.run_id
        self.status = harness._status(ctx)
        self._events: EventSubscription | None = None
        self._since = 0
        self._loop = RunLoop(harness, ctx, messages, streaming=True, status=self.status)
        self._task: asyncio.Task[AgentRun] | None = None

    def start(self) -> asyncio.Task[AgentRun]:
        """Start the run if it has not started; returns its task."""
        if self._task is None:
            self._since = self.context.events.next_offset
            self._task = asyncio.get_running_loop().create_task(self._loop.run(), name=f"tinyagents-run-{self.run_id}")
        return self._task

    def _subscription(self) -> EventSubscription:
        # Subscribed on first iteration, catching up from the sink's retained history since the
        # start: a run that is only started (e.g. by a dashboard) buffers nothing.
        if self._events is None:
            run_id = self.run_id
            self._events = self.context.events.subscribe(
                since=self._since,
                until=lambda e: e.run_id == run_id and e.kind in _TERMINAL,
                where=_run_tree_filter(self.context),
            )
        return self._events

    def __aiter__(self) -> AgentStream:
        return self

    async def __anext__(self) -> AgentEvent:
        self.start()
        return await self._subscription().__anext__()

    async def wait(self) -> AgentRun:
        """The run's result, whatever its outcome (``run.error`` holds a failure or cancel)."""
        return await asyncio.shield(self.start())

    async def result(self) -> AgentRun:
        """The completed run; raises its error (e.g. ``RunCancelled``) otherwise.

        A handle from ``invoke_streaming_with_status`` returns the run whatever its outcome.
        """
        run = await self.wait()
        if run.error is not None and self._raises:
            raise run.error
        return run

    @property
    def error(self) -> BaseException | None:
        """The error that ended the run (``None`` while it runs, or when it completed)."""
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result().error

    def chunks(self, *modes: str) -> AsyncIterator[StreamChunk]:
        """Iterate this run tree's stream in the given modes (none: all five); starts the run.

        Each call is an independent view (its own subscription, caught up from the run's start), so
        several consumers can read different modes of one run. Only this handle's run and its
        descendants appear, never another run sharing the sink. ``final`` comes last, once.

        Raises:
            ConfigurationError: An unknown mode (at once, before the run starts).
        """
        chosen = stream_modes(modes)
        self.start()
        run_id = self.run_id
        events = self.context.events.subscribe(
            since=self._since,
            until=lambda e: e.run_id == run_id and e.kind in _TERMINAL,
            where=_run_tree_filter(self.context),
        )
        ctx = self.context
        return iter_chunks(events, chosen, self.wait, parent_run_id=ctx.parent_run_id, depth=ctx.depth)

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def cancel(self, reason: str | None = None) -> None:
        """Request cooperative cancellation (thread-safe)."""
        self.context.cancellation.cancel(reason)

    def steer(self, command: SteeringCommand | str) -> SteeringReceipt:
        """Send a steering command (a string is an injected user message); thread-safe.

        Returns:
            The receipt the run resolves at its next checkpoint (applied, or rejected with why).

        Raises:
            SteeringError: The run was started without a ``SteeringHandle`` on its context.
        """
        handle = self.context.steering
        if handle is None:
            raise SteeringError(
                "this run accepts no steering",
                hint="start it with a context that has a SteeringHandle (RunContext.with_steering)",
            )
        return handle.send(InjectMessage(message=UserMessage(text=command)) if isinstance(command, str) else command)

    def children(self) -> list[SubAgentHandle]:
        """Steerable handles of the sub-agents this run is running now (empty without a ``SteeringHandle``)."""
        handle = self.context.steering
        return [] if handle is None else list(handle._children())

    def child(self, run_id: str) -> SubAgentHandle:
        """The running sub-agent ``run_id`` (a child or any deeper descendant), to steer or cancel.

        Raises:
            SteeringError: None such is running.
        """
        return find_child(self.children(), run_id)

    def pause(self, reason: str | None = None) -> SteeringReceipt:
        """Hold the run at its next checkpoint (before its next model call)."""
        return self.steer(Pause(reason=reason))

    def resume(self) -> SteeringReceipt:
        return self.steer(Resume())

    def redirect(self, instruction: str) -> SteeringReceipt:
        return self.steer(Redirect(instruction=instruction))

    def approve(
        self, call_id: str | None = None, *, arguments: Mapping[str, Any] | None = None, by: str | None = None
    ) -> ApprovalDecision:
        """Approve a tool call waiting in this run's tree (see ``ApprovalDesk.approve``); thread-safe."""
        return self.approvals.approve(call_id, arguments=arguments, by=by)

    def deny(self, call_id: str | None = None, reason: str | None = None, *, by: str | None = None) -> ApprovalDecision:
        """Deny a waiting tool call; the model gets an error result saying ``reason``; thread-safe."""
        return self.approvals.deny(call_id, reason, by=by)

    def pending_approvals(self) -> list[ApprovalRequest]:
        return self.approvals.pending()

    def __await__(self) -> Generator[Any, None, AgentRun]:
        return self.result().__await__()

    async def aclose(self) -> None:
        """Stop listening; a run still going is cancelled and awaited."""
        if self._events is not None:
            await self._events.aclose()
        if self._task is not None and not self._task.done():
            self.cancel("stream closed")
            await self.wait()
