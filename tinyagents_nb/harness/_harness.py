"""``AgentHarness``: the facade that runs the agent loop.

It resolves and holds what every run reads (the model and its fallbacks, tools, middleware, the
``RunPolicy``, structured output, the ``ContextFitter``) and starts a ``RunLoop`` per run: waited
for (``invoke``), streamed through an ``AgentStream``, or blocking (``run_sync``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from ._agent_stream import AgentStream
from ._approval import ApprovalDesk
from ._calibration import PromptTokenCounter
from ._clock import RANDOM_IDS
from ._config import RunConfig
from ._context import RunContext
from ._errors import ConfigurationError
from ._events import AgentEvent
from ._loop import RunLoop
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ._middleware import Middleware, MiddlewareStack
from ._middleware_events import trace_hook
from ._model import ChatModel
from ._policy import RunPolicy
from ._profile import ModelProfile
from ._run import AgentRun, HarnessRunStatus
from ._run_sync import run_blocking as _run_blocking
from ._stream import run_tree_filter as _run_tree_filter
from ._structured import OutputSpec, StructuredStrategy, strategy_for_profile
from ._tool_registry import ToolProvider, ToolRegistry
from ._tool_results import ToolResultLimit
from ._tools import Tool
from ._window import ContextWindow
from .durable import RunStore
from .memory import ContextFitter, ContextPressureChain
from .providers import resolve_model
from .stores import ResponseCache

__all__ = ["AgentHarness", "AgentInput"]

DataT = TypeVar("DataT")

AgentInput: TypeAlias = str | Message | Sequence[Message]
"""A prompt string, one message, or a whole transcript to continue."""


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
        limit = self.policy.tool_result_limit
        default: ToolResultLimit | None = None
        if limit is not None and not any(isinstance(m, ToolResultLimit) for m in middleware):
            # no tool result goes into the transcript whole (a 10 MB MCP result): cut at arrival, raw kept
            default = ToolResultLimit(limit)
            middleware = [*middleware, default]
            self.tools.add_provider(default.on_demand_reader())

        def traced(mw: Middleware, hook: str) -> Middleware:
            return mw if mw is default else trace_hook(mw, hook)  # the built-in default is not the user's

        self.middleware = MiddlewareStack(middleware, wrap=traced if self.policy.middleware_events else None)
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
        window = self._window(context_window)
        relief = (ContextPressureChain() if pressure == "default" else pressure) if window is not None else None
        model, exact = self.model, self.policy.token_counting == "exact"
        counter = model if exact and isinstance(model, PromptTokenCounter) else None
        self.fitter = ContextFitter(model.model_name, window, relief, provider=model.provider, counter=counter)

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

    # ---------------------------------------------------------------------------- what runs read (LoopHarness)
    def response_cache_for(self, ctx: RunContext[Any]) -> ResponseCache | None:
        """The response cache this run may use: the policy's own, else the context's; none when disabled."""
        if not self.policy.cache.response_cache:
            return None
        if self.policy.response_cache is not None:
            return self.policy.response_cache
        cache = ctx.cache.response_cache
        if cache is None:
            return None
        return cache if isinstance(cache, ResponseCache) else None

    @property
    def context_window(self) -> ContextWindow | None:
        """The window each request is fitted to (``None``: unknown, requests are only measured)."""
        return self.fitter.window

    @property
    def pressure(self) -> ContextPressureChain | None:
        """The chain that relieves a request over the window (``None``: measure only)."""
        return self.fitter.pressure

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
        loop = self._loop(ctx, input, streaming=streaming)
        return await loop.run(), loop.status

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
        return AgentStream(self._loop(ctx, input, streaming=True))

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
        return AgentStream(self._loop(ctx, input, streaming=True), raises=False)

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

    async def resume(
        self,
        run_id: str,
        *,
        store: RunStore | str | os.PathLike[str],
        config: RunConfig | None = None,
        data: Any = None,
        approvals: ApprovalDesk | None = None,
        note: str | None = None,
    ) -> AgentRun:
        """Continue a run a crash or restart interrupted, from the last step its ``DurableJournal`` recorded.

        The transcript, tool results and spend come from ``store``; the spend counts against this
        run's budgets. A tool call that started and never finished runs again by itself only for a
        tool marked ``idempotent=True``; any other is asked about at ``approvals`` (run again, or skip
        with a note to the model), and so is a call whose approval was pending. With no desk, or an
        unattended one, ``policy.unattended_approval`` decides (``None`` skips). ``note`` is told to
        the model before it continues (what changed while the run was down). Journal the resumed
        run too by giving this harness a ``DurableJournal`` on the same store. The calls answered
        before the interruption are reported as ``tool.replayed`` events and counted in the run's
        ``tool_calls``, as its ``usage`` counts the spend before it.

        Raises:
            ConfigurationError: The run is unknown, completed, already resumed or still running.
            RunStoreCorrupt: The store is damaged (it is not modified).
            RunStoreVersionError: The store is from a newer version (it is not modified).
        """
        from .durable import resume_run

        return await resume_run(self, run_id, store=store, config=config, data=data, approvals=approvals, note=note)

    def resume_sync(
        self,
        run_id: str,
        *,
        store: RunStore | str | os.PathLike[str],
        config: RunConfig | None = None,
        data: Any = None,
    ) -> AgentRun:
        """Blocking twin of ``resume`` (see ``run_sync``)."""
        ctx = self._context(config, data)

        async def resume_and_close() -> AgentRun:
            try:
                return await self.resume(run_id, store=store, config=ctx.config, data=data)
            finally:
                await self._release_models()

        return _run_blocking(resume_and_close, ctx)

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

    def _loop(self, ctx: RunContext[Any], input: AgentInput, *, streaming: bool) -> RunLoop:
        return RunLoop(self, ctx, self._messages(input), streaming=streaming, status=self._status(ctx))

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
