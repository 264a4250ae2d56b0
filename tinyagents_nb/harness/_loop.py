"""The step machine of one run: model → tools → model, until the model answers without tools.

Hot-path rules: no copies of the context, no task per step or per stream chunk (cancellation is a
scope cancelled by the token, not a racing task), events built once, and tool calls of one turn
run concurrently only when there are several.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._budget_check import bind_budgets
from ._cancel import RunCancelled
from ._clock import RANDOM_IDS, SYSTEM_CLOCK
from ._configurable import ModelOverrides
from ._controls import take_stop
from ._errors import Cancelled, ContextLimitError, GuardrailTripped, LimitExceeded, RunTimeout, describe_error
from ._event_text import error_text, last_user_text, preview
from ._events import (
    CacheHit,
    CacheMiss,
    FallbackUsed,
    LimitReached,
    ModelCompleted,
    ModelDelta,
    ModelDiscarded,
    ModelFailed,
    ModelSelected,
    ModelStarted,
    RateLimitWaited,
    RetryScheduled,
    RunCancelledEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
)
from ._limits import LimitKind, LimitTracker, tighter
from ._loop_harness import LoopHarness
from ._messages import AssistantMessage, Message, TextDelta, ThinkingDelta, ToolCall, ToolCallDelta
from ._metering import CallMeter
from ._model import ChatModel, ModelRequest, ModelResponse, StreamAccumulator
from ._retraction import retract_answer
from ._retry import call_with_retry
from ._run import AgentRun, HarnessRunStatus
from ._selection import fit_images, refit_for, route_call, with_resolved
from ._steering_batch import checkpoint
from ._structured import StructuredOutput, prepare_request
from ._structured_turn import StructuredTurn
from ._tool_phase import ToolPhase
from .memory import compact_rejected
from .stores import lookup_response, store_response

if TYPE_CHECKING:
    from ._config import RunConfig
    from ._context import RunContext

__all__ = ["LoopHarness", "RunLoop"]

_log = logging.getLogger("tinyagents_nb")


class RunLoop:
    """One run of an ``AgentHarness`` inside one ``RunContext``."""

    def __init__(
        self,
        harness: LoopHarness,
        ctx: RunContext[Any],
        messages: list[Message],
        *,
        streaming: bool,
        status: HarnessRunStatus,
    ) -> None:
        self.harness = harness
        self.ctx = ctx
        self.messages = messages
        self.streaming = streaming
        self.status = status
        policy = harness.policy
        self.clock = policy.clock if policy.clock is not SYSTEM_CLOCK else ctx.clock  # the policy's, else the tree's
        self.ids = policy.ids if policy.ids is not RANDOM_IDS else ctx.ids  # (a deterministic root stays so)
        self.limits = LimitTracker.for_run(policy.limits, ctx.config, clock=self.clock.monotonic, deadline=ctx.deadline)
        self.partial: StreamAccumulator | None = None
        self.structured: StructuredOutput | None = None
        self.model_calls = 0
        self.attempt = 0  # stream attempts of the current model call (retries and fallbacks included)
        self.streamed = False  # whether the current attempt has emitted a delta
        self.serving: Any = "configured"  # why the current model serves the call (a ModelResolutionSource)
        self.answer_call: str | None = None  # the last model call, whose answer a guardrail may retract
        self.answer_at: int | None = None  # where its message sits in ``messages`` once appended
        self.started = self.clock.monotonic()
        self.overrides = ModelOverrides()  # read from ctx.config.configurable when the run starts
        self.meter = CallMeter(ctx, lambda: harness.fitter.estimator, harness.fitter.request_tokens)
        self.resolved: dict[str, ChatModel] = {}  # models named by request.model, built once per run
        self.tool_phase = ToolPhase(
            ctx,
            tools=harness.tools,
            middleware=harness.middleware,
            policy=policy,
            limits=self.limits,
            clock=self.clock,
            check_limit=self._check_limit,
            timeout=self._timeout,
        )

    @property
    def tool_calls(self) -> int:
        """Tool calls that ended with a result so far."""
        return self.tool_phase.completed

    # ---------------------------------------------------------------------------- driver
    async def run(self) -> AgentRun:
        """Run to the end; returns the ``AgentRun`` whatever the outcome (errors are in ``run.error``)."""
        ctx = self.ctx
        saved = ctx.deadline, ctx.streaming, ctx.budgets, ctx.clock, ctx.ids, ctx.count_model_call
        ctx.deadline, ctx.streaming = self.limits.deadline, self.streaming
        ctx.budgets = bind_budgets(ctx, self.harness.policy.limits)  # spending limits bind the subtree too
        ctx.count_model_call = functools.partial(self._check_limit, self.limits.record_model_call)
        ctx.clock, ctx.ids = self.clock, self.ids  # event ts and child run ids
        max_depth = ctx.config.max_depth
        ctx.config = self._bound_config(ctx.config)
        try:
            return await self._drive()
        finally:
            self.meter.release()  # a hold still open (a middleware failed after the answer) is given back
            ctx.deadline, ctx.streaming, ctx.budgets, ctx.clock, ctx.ids, ctx.count_model_call = saved
            if ctx.config.max_depth != max_depth:  # steering may have replaced the config meanwhile: keep that
                ctx.config = replace(ctx.config, max_depth=max_depth)

    def _bound_config(self, config: RunConfig) -> RunConfig:
        """The run's config with its effective depth cap, so every child it spawns inherits it.

        The harness's ``max_depth`` binds the whole tree below this run: a sub-agent's harness may be
        looser, but ``RunContext.child`` copies this cap and nothing deeper may start. (The wall clock
        binds the tree through ``ctx.deadline``; call counts stay per-run budgets.)
        """
        cap = max(self.limits.max_depth, config.depth)  # a run already at its depth just spawns nothing
        return config if cap >= config.max_depth else replace(config, max_depth=cap)

    async def _drive(self) -> AgentRun:
        harness, ctx = self.harness, self.ctx
        ctx.emit(
            RunStarted,
            thread_id=ctx.config.thread_id,
            model=harness.model.model_name,
            input=preview(last_user_text(self.messages)),
            agent=harness.name,
            provider=harness.model.provider,
        )
        try:
            final = await self._body()
        except Cancelled as exc:
            return await self._finish_cancelled(exc)
        except Exception as exc:
            return await self._finish_failed(exc)
        except BaseException as exc:  # the task itself was cancelled (kernel shutdown, cell re-run): report, re-raise
            self._keep_partial()
            ctx.emit(
                RunCancelledEvent, reason=f"{type(exc).__name__} (the task was cancelled)", duration_s=self._elapsed()
            )
            self._close_status("cancelled", exc)
            raise
        run = self._result("completed", final_text=final)
        try:
            await harness.middleware.after_agent(ctx, run)
        except Exception as exc:
            return await self._finish_failed(exc)
        ctx.emit(
            RunCompleted,
            final_text=preview(final),
            usage=run.usage,
            model_calls=self.model_calls,
            tool_calls=self.tool_calls,
            duration_s=run.duration_s,
        )
        self._close_status("completed")
        return run

    async def _body(self) -> str:
        harness, ctx, limits, policy = self.harness, self.ctx, self.limits, self.harness.policy
        self.overrides = overrides = ModelOverrides.read(ctx.config.configurable, harness.model_chain, depth=ctx.depth)
        await harness.middleware.before_agent(ctx, self.messages)
        tools = harness.tools
        providers = bool(tools.providers)  # tools listed at run time (MCP servers): re-asked every turn
        tool_schemas = await tools.refresh(ctx) if providers else tools.schemas()
        turn = StructuredTurn.start(harness.output, harness.structured_strategy, policy, harness.model)
        ctx.stop_request = None
        while True:
            if (stop := take_stop(ctx)) is not None:  # a hook ended the run after the last round trip
                return stop
            ctx.cancellation.raise_if_cancelled()
            if ctx.steering is not None:
                await checkpoint(ctx, ctx.steering, self.messages, self.status, self.limits.remaining_s, self._timeout)
            self._check_limit(limits.check_deadline)
            self._check_limit(limits.record_model_call)
            if providers and self.model_calls:
                tool_schemas = await tools.refresh(ctx)
            request = ModelRequest(
                messages=tuple(self.messages),
                tools=tool_schemas,
                model=harness.model.model_name,
                max_output_tokens=tighter(
                    overrides.max_output_tokens or policy.max_output_tokens, ctx.config.max_turn_output_tokens
                ),
                temperature=policy.temperature if overrides.temperature is None else overrides.temperature,
                settings=overrides.settings(policy.model_settings),
                thread_id=ctx.config.thread_id,
                prompt_cache=policy.cache.prompt_cache,
            )
            if turn is not None:
                request = prepare_request(request, turn.spec, turn.strategy)
            request = await harness.middleware.before_model(ctx, request)
            if (stop := take_stop(ctx)) is not None:
                return stop
            request = await harness.fitter.fit(ctx, request)
            await harness.middleware.before_send(ctx, request)
            call_id = self.answer_call = str(self.ids.call_id())
            self.answer_at = None
            self.status.phase = "model"
            self.status.active_model_call = call_id
            response = await self._call_turn(request, call_id, turn)
            self.model_calls += 1
            self.status.model_calls = self.model_calls
            self.status.active_model_call = None
            if response is None:
                continue  # the host rejected the structured-output format: ask again by the next strategy
            message = response.message
            self.answer_at = len(self.messages)
            self.messages.append(message)

            calls: Sequence[ToolCall] = message.tool_calls
            if turn is not None:
                settled = turn.settle(ctx, response, self.messages, forced=request.tool_choice == turn.spec.name)
                self.structured = turn.value
                if isinstance(settled, str):
                    return settled
                if not settled:
                    continue  # a structured-output repair: ask the model again
                calls = settled
            elif not calls:
                return stop if (stop := take_stop(ctx)) is not None else message.text
            self.status.phase = "tools"
            self.messages.extend(await self.tool_phase.run(calls))
            self.status.tool_calls = self.tool_calls
            if self.tool_phase.exhausted is not None:  # every call was answered; now the cap ends the run
                raise self.tool_phase.exhausted

    # ---------------------------------------------------------------------------- model calls
    async def _call_turn(
        self, request: ModelRequest, call_id: str, turn: StructuredTurn | None
    ) -> ModelResponse | None:
        """One model call; ``None`` when the host rejected the structured-output strategy (the turn fell back)."""
        try:
            response = await self._call_compacting(request, call_id)
        except Exception as exc:  # re-raised unless it is the host rejecting the structured-output strategy
            if turn is not None and turn.unsupported(self.ctx, exc):
                return None
            raise
        self.harness.fitter.observe(self.ctx, request, response.usage, served=self.serving == "configured")
        return response

    async def _call_compacting(self, request: ModelRequest, call_id: str) -> ModelResponse:
        """``_call_model``, compacting and re-sending when the provider rejects the prompt as too long."""
        allowed = self.harness.policy.reactive_compactions
        attempt = 0
        while True:
            try:
                return await self._call_model(request, call_id)
            except ContextLimitError as exc:
                attempt += 1
                if attempt > allowed:
                    raise
                self._discard(call_id, "compaction")
                request = await compact_rejected(
                    self.harness.fitter, self.ctx, request, exc, attempt=attempt, of=allowed
                )

    async def _call_model(self, request: ModelRequest, call_id: str) -> ModelResponse:
        harness, ctx, policy = self.harness, self.ctx, self.harness.policy
        cache = harness.response_cache_for(ctx)
        chain: Sequence[ChatModel] = harness.model_chain
        first = self.overrides.model
        if first:  # configurable picked a fallback model to go first
            chain = (chain[first], *chain[:first], *chain[first + 1 :])
        models, why = route_call(chain, request, harness.model, self.resolved)  # capabilities, request.model
        last_error: BaseException | None = None
        self.attempt = 0
        for index, model in enumerate(models):
            if index:
                ctx.cancellation.raise_if_cancelled()
                self._discard(call_id, "fallback")
                ctx.emit(
                    FallbackUsed,
                    call_id=call_id,
                    from_model=models[index - 1].model_name,
                    to_model=model.model_name,
                    error=error_text(last_error),
                )
            if index or model is not harness.model:  # a smaller window than the one it was fitted to
                request = await refit_for(harness.fitter, ctx, request, model)
            reason = "fallback" if index else why or ("configurable" if first is not None else None)
            if reason is not None:  # a choice was made: the primary model is the quiet default
                ctx.emit(ModelSelected, call_id=call_id, model=model.model_name, provider=model.provider, reason=reason)
            self.serving = "fallback" if index else "capabilities" if why == "capabilities" else "configured"
            key = hit = None
            if cache is not None:
                key, hit = lookup_response(cache, request, model=f"{model.provider}:{model.model_name}")
            if hit is None:  # checked by the model that will serve it; a cache hit is free; refused: never sent
                self.meter.reserve(model, request, call_id, self.messages)
            ctx.emit(ModelStarted, call_id=call_id, model=model.model_name, provider=model.provider)
            started = self.clock.monotonic()
            if hit is not None and key is not None:
                ctx.emit(CacheHit, call_id=call_id, key=key)
                if self.streaming and hit.message.text:
                    delta = TextDelta(text=hit.message.text)
                    ctx.emit(ModelDelta, call_id=call_id, delta=delta, attempt=self.attempt + 1)
                    harness.middleware.on_model_delta(ctx, delta)
                return await self._completed(hit, model, call_id, started, cached=True)
            if key is not None:
                ctx.emit(CacheMiss, call_id=call_id, key=key)
            try:
                response = await call_with_retry(
                    functools.partial(self._attempt, model, request, call_id),
                    policy=policy.retry,
                    cancellation=ctx.cancellation,
                    on_retry=functools.partial(self._on_retry, call_id),
                    max_retries=policy.limits.max_retries_per_call,
                    remaining_s=self.limits.remaining_s,
                    on_deadline=self._timeout,
                    rng=random.Random(f"{ctx.run_id}/{call_id}/{index}") if policy.retry.jitter else None,
                )
            except Exception as exc:
                if not isinstance(exc, Cancelled):
                    ctx.emit(
                        ModelFailed,
                        call_id=call_id,
                        model=model.model_name,
                        error_type=type(exc).__name__,
                        error=error_text(exc),
                        attempt=max(self.attempt, 1),
                    )
                fallback = policy.fallback
                if fallback is None or index + 1 >= len(models) or not fallback.should_fall_back(exc):
                    raise
                last_error = exc
                continue
            if cache is not None and key is not None:
                store_response(cache, key, response)
            return await self._completed(response, model, call_id, started, cached=False)
        raise AssertionError("unreachable: the model chain is never empty")

    def _on_retry(self, call_id: str, attempt: int, delay: float, error: BaseException) -> None:
        self._discard(call_id, "retry")
        self.ctx.emit(RetryScheduled, call_id=call_id, attempt=attempt, delay_s=delay, error=error_text(error))

    def _discard(self, call_id: str, reason: str) -> None:
        """A failed attempt that streamed is followed by another: tell consumers to drop its deltas."""
        if self.streamed:
            self.ctx.emit(ModelDiscarded, call_id=call_id, attempt=self.attempt, reason=reason)
            self.streamed = False
        self.partial = None  # its text is not the answer, nor a partial answer to keep

    async def _completed(
        self, response: ModelResponse, model: ChatModel, call_id: str, started: float, *, cached: bool
    ) -> ModelResponse:
        ctx = self.ctx
        self.partial = None
        # record who actually served the call (model, provider, ResolvedModel)
        response = with_resolved(response, model, "cache" if cached else self.serving)
        response = await self.harness.middleware.after_model(ctx, response)  # raising: the run's end releases the hold
        if not cached:
            self.meter.completed(response, model, call_id)
        ctx.emit(
            ModelCompleted,
            call_id=call_id,
            model=response.model,
            usage=response.usage,
            finish_reason=response.finish_reason,
            duration_s=self.clock.monotonic() - started,
            cached=cached,
            provider=response.provider,
            response_id=response.response_id,
        )
        return response

    async def _attempt(self, model: ChatModel, request: ModelRequest, call_id: str) -> ModelResponse:
        request = fit_images(request, model)  # a model without vision reads the tools' text, not their images
        self.meter.reserve(model, request, call_id, self.messages)  # a retry reserves again
        try:
            return await self._send(model, request, call_id)
        except BaseException as exc:  # billed or not, the hold is settled
            self.meter.ended_early(exc, self.partial.response() if self.partial else None, model, call_id)
            raise

    async def _send(self, model: ChatModel, request: ModelRequest, call_id: str) -> ModelResponse:
        ctx, harness = self.ctx, self.harness
        self._check_limit(self.limits.check_deadline)
        self.attempt += 1
        limiter = harness.policy.rate_limiter
        if limiter is not None:
            try:
                waited = await limiter.acquire(cancellation=ctx.cancellation, timeout_s=self.limits.remaining_s())
            except TimeoutError:  # the wait for a token cannot end before the run's deadline
                raise self._timeout() from None
            if waited > 0:
                ctx.emit(RateLimitWaited, call_id=call_id, waited_s=waited)
        with ctx.cancellation.scope(timeout_s=self.limits.remaining_s()):
            self.meter.sent = True
            if not self.streaming:
                return await model.invoke(request)
            acc = self.partial = StreamAccumulator(model=model.model_name, provider=model.provider)
            self.streamed = False
            attempt = self.attempt
            on_delta = harness.middleware.on_model_delta if harness.middleware.has("on_model_delta") else None
            async for item in model.stream(request):
                acc.add(item)
                if isinstance(item, TextDelta | ThinkingDelta | ToolCallDelta):
                    self.streamed = True
                    ctx.emit(ModelDelta, call_id=call_id, delta=item, attempt=attempt)
                    if on_delta is not None:
                        on_delta(ctx, item)
            return acc.response()
        # only reached when the run's deadline ended the call (a cancel raises inside the scope)
        raise self._timeout()

    # ---------------------------------------------------------------------------- limits and exits
    def _check_limit(self, check: Any) -> None:
        try:
            check()
        except LimitExceeded as exc:
            self.ctx.emit(LimitReached, limit=LimitKind.of(exc.limit), maximum=exc.maximum)
            raise

    def _timeout(self) -> RunTimeout:
        raw = self.limits.wall_clock_s
        limit = round(raw, 3) if raw is not None else None
        self.ctx.emit(LimitReached, limit=LimitKind.WALL_CLOCK, maximum=limit)
        shown = f"{limit:g} s" if limit is not None else "inherited"
        return RunTimeout(f"run {self.ctx.run_id} ran out of its {shown} budget", timeout_s=limit)

    def _result(self, status: Any, *, final_text: str = "", error: BaseException | None = None) -> AgentRun:
        ctx = self.ctx
        return AgentRun(
            run_id=ctx.run_id,
            messages=self.messages,
            final_text=final_text,
            structured=self.structured,
            usage=ctx.usage.for_subtree(ctx.run_id),
            cost=ctx.costs.for_subtree(ctx.run_id),
            status=status,
            error=error,
            model_calls=self.model_calls,
            tool_calls=self.tool_calls,
            duration_s=self.clock.monotonic() - self.started,
        )

    def _keep_partial(self) -> None:
        """A stream cut short still showed text to the user: keep it, tagged, without unanswered tool calls."""
        partial, self.partial = self.partial, None
        if partial is not None and partial.text:
            self.messages.append(AssistantMessage(text=partial.text, tags=("partial",)))

    def _elapsed(self) -> float:
        return self.clock.monotonic() - self.started

    def _close_status(self, status: Any, error: BaseException | None = None) -> None:
        self.status.status = status
        self.status.phase = "done"
        self.status.active_model_call = None
        self.status.ended_at = self.clock.time()
        if error is not None:
            self.status.error = describe_error(error)

    async def _finish_cancelled(self, exc: Cancelled) -> AgentRun:
        self._keep_partial()
        run = self._result("cancelled")
        run.error = RunCancelled(exc.reason, run_id=self.ctx.run_id, messages=self.messages, usage=run.usage)
        self.ctx.emit(RunCancelledEvent, reason=exc.reason, duration_s=run.duration_s)
        await self.harness.middleware.on_error(self.ctx, run.error)
        self._close_status("cancelled", run.error)
        return run

    async def _finish_failed(self, exc: Exception) -> AgentRun:
        if isinstance(exc, GuardrailTripped) and exc.stage == "output":  # the answer is withdrawn, everywhere
            self.partial = None
            retract_answer(self.ctx, self.messages, self.answer_at, self.answer_call, exc)
        self._keep_partial()
        run = self._result("failed", error=exc)
        self.ctx.emit(RunFailed, error_type=type(exc).__name__, error=error_text(exc), duration_s=run.duration_s)
        await self.harness.middleware.on_error(self.ctx, exc)
        self._close_status("failed", exc)
        return run
