"""The REPL protocol on top of the harness loop: fenced code is a call of the ``repl`` tool.

The harness loop already does everything an RLM run needs around the model (limits, deadline,
retry, streaming, events, usage and cost, Stop, steering, the dashboard), but it continues only
while the model calls tools. ``REPLDialect`` wraps the root model so the loop sees the protocol as
tool calls, like the text dialects for models without native tool calling:

- on the way out, a reply's fenced ``python``/``repl`` blocks become one ``repl`` call (the
  reply's text is kept as is), so the loop runs them with ``REPLTool``;
- on the way in, those calls are removed again and each ``repl`` result becomes a **user**
  message, so the model sees exactly the protocol: code in its replies, output as the next turn;
- after the answer (``answer["ready"]``, ``FINAL``), the next "model call" answers with the final
  text without calling the model, which ends the loop with that answer (it is recorded as a model
  call with no usage).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ChatModel,
    LimitExceeded,
    Message,
    Middleware,
    ModelRequest,
    ModelResponse,
    RunContext,
    StructuredOutputError,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolMessage,
    ToolResult,
    ToolSchema,
    UserMessage,
)
from tinyagents_nb.harness.events import LimitReached
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish

from ._blocks import final_from_text, split_reply
from ._bridge import SubQueries
from ._config import RLMLimits
from ._events import RLMCode, RLMOutput, RLMStarted

if TYPE_CHECKING:
    from tinyagents_nb.harness import AgentRun
    from tinyagents_nb.harness.models import StructuredOutput

    from ._environment import Environment
    from ._typed import AnswerType

__all__ = ["REPL_TOOL", "CodeApproval", "REPLDialect", "REPLTool", "RLMMiddleware", "RLMRunState"]

REPL_TOOL = "repl"
CodeApproval = Callable[[RunContext[Any], str], Awaitable[bool]]
"""``approve(ctx, code) -> bool``: a hook run before each block; ``False`` skips the block (the model is told)."""
Spawn = Callable[[RunContext[Any], str, Any, int], Awaitable["AgentRun"]]
"""``spawn(ctx, prompt, context, depth) -> AgentRun``: one child RLM run of the run ``ctx``."""

_NUDGE = (
    "No code block found. Reply with a fenced ```python block to run in the REPL, "
    'or set answer["content"] and answer["ready"] = True in one to answer.'
)


_NOT_RUN_ON_RESUME = (
    "This block was not run: the run was interrupted and resumed in a new REPL. Run again what you still need."
)


@dataclass(kw_only=True)
class RLMRunState:
    """What one RLM run's dialect, tool and middleware share."""

    environment: Environment
    prepared: Any
    limits: RLMLimits
    sub_harness: AgentHarness[Any]
    approve: CodeApproval | None = None
    queries: SubQueries | None = None
    iterations: int = 0
    nudges_used: int = 0
    consecutive_errors: int = 0
    final: str | None = None
    started: bool = False
    depth: int = 0
    """This run's RLM depth (the root is 0; an ``rlm_query`` child is its parent's + 1)."""
    spawn: Spawn | None = None
    """Starts one ``rlm_query`` child run (the ``RLM`` sets it; ``None``: ``rlm_query`` is refused)."""
    typed: AnswerType | None = None
    """The type the final answer must validate against (``RLM(output_type=...)``)."""
    structured: StructuredOutput | None = None
    failure: Exception | None = None
    """An error that ends the run at its next model call (a typed answer that failed twice)."""
    last_output: str = ""
    """What the last block printed (a marked partial answer when a limit ends the run without one)."""


class REPLDialect:
    """The root model, speaking the REPL protocol to the harness loop (see the module docstring)."""

    def __init__(self, inner: ChatModel, state: RLMRunState) -> None:
        self.inner = inner
        self.state = state
        self.profile = getattr(inner, "profile", None)

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def provider(self) -> str:
        return self.inner.provider

    def _final(self) -> ModelResponse | None:
        final = self.state.final
        if final is None:
            return None
        return ModelResponse(
            message=AssistantMessage(text=final, tags=("rlm-final",)),
            finish_reason="rlm_final",
            model=self.inner.model_name,
            provider=self.inner.provider,
        )

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        final = self._final()
        if final is not None:
            return final
        return self._read(await self.inner.invoke(_to_wire(request)))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        final = self._final()
        if final is not None:
            yield TextDelta(text=final.message.text)
            yield StreamFinish(finish_reason=final.finish_reason, model=final.model)
            return
        text: list[str] = []
        finish: StreamFinish | None = None
        async for item in self.inner.stream(_to_wire(request)):
            if isinstance(item, ToolCallDelta):
                continue  # the protocol has no native tools
            if isinstance(item, StreamFinish):
                finish = item
                continue
            if isinstance(item, TextDelta):
                text.append(item.text)
            yield item
        message = self._read(ModelResponse(message=AssistantMessage(text="".join(text)))).message
        if message.tool_calls:
            call = message.tool_calls[0]
            yield ToolCallDelta(index=0, id=call.id, name=call.name, arguments=_json(call.arguments))
        yield finish or StreamFinish(finish_reason="stop")

    def _read(self, response: ModelResponse) -> ModelResponse:
        """Turn the reply's code blocks into one ``repl`` call (or a nudge, or a prose ``FINAL``)."""
        state, message = self.state, response.message
        blocks, prose = split_reply(message.text)
        if blocks:
            state.iterations += 1
            state.nudges_used = 0
            arguments = {"blocks": blocks, "prose": prose}
            call = ToolCall(id=f"rlm-{state.iterations}", name=REPL_TOOL, arguments=arguments)
            return replace(response, message=replace(message, tool_calls=(call,)))
        answer = final_from_text(message.text)
        if answer is not None:  # through the tool too, so streamed and whole replies end the same way
            call = ToolCall(id="rlm-final", name=REPL_TOOL, arguments={"blocks": [], "final": answer})
            return replace(response, message=replace(message, tool_calls=(call,)))
        if state.nudges_used < state.limits.nudges:
            state.nudges_used += 1
            call = ToolCall(id=f"rlm-nudge-{state.nudges_used}", name=REPL_TOOL, arguments={"blocks": []})
            return replace(response, message=replace(message, tool_calls=(call,)))
        return replace(response, message=replace(message, tool_calls=()))

    async def aclose(self) -> None:
        for model in (self.inner, self.state.sub_harness.model):
            closer = getattr(model, "aclose", None)
            if closer is not None:
                await closer()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _to_wire(request: ModelRequest) -> ModelRequest:
    """The request as the model sees it: ``repl`` calls removed, their results as user messages."""
    messages: list[Message] = []
    for message in request.messages:
        if isinstance(message, AssistantMessage) and any(c.name == REPL_TOOL for c in message.tool_calls):
            messages.append(replace(message, tool_calls=tuple(c for c in message.tool_calls if c.name != REPL_TOOL)))
        elif isinstance(message, ToolMessage) and message.name == REPL_TOOL:
            messages.append(UserMessage(text=message.text))
        else:
            messages.append(message)
    tools = tuple(t for t in request.tools if t.name != REPL_TOOL)
    return replace(request, messages=tuple(messages), tools=tools)


class REPLTool:
    """Runs one reply's code blocks in order in the run's environment and reports their output."""

    def __init__(self, state: RLMRunState) -> None:
        self.state = state
        self._schema = ToolSchema(
            name=REPL_TOOL,
            description="Run Python code blocks in the REPL (the RLM protocol's fenced code, as a call).",
            parameters={
                "type": "object",
                "properties": {"blocks": {"type": "array", "items": {"type": "string"}}},
                "required": ["blocks"],
            },
        )

    @property
    def name(self) -> str:
        return REPL_TOOL

    @property
    def description(self) -> str:
        return self._schema.description

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    @property
    def timeout_s(self) -> float | None:
        return None  # the per-block timeout is the environment's: it must interrupt the block, not abandon it

    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult:
        state = self.state
        blocks = arguments.get("blocks")
        final = arguments.get("final")
        if isinstance(final, str):
            state.final = final
            return ToolResult.ok(self._review() or "[answer received: the run ends]")
        if not blocks:
            return ToolResult.ok(_NUDGE)
        assert isinstance(blocks, list | tuple)
        queries = state.queries
        if queries is None:  # a resumed run settling a block its old REPL never finished: the REPL is not up
            return ToolResult.error(_NOT_RUN_ON_RESUME)
        limits, env = state.limits, state.environment
        iteration, call_id = state.iterations, f"rlm-{state.iterations}"
        prose = arguments.get("prose")
        prose = prose if isinstance(prose, list) and len(prose) == len(blocks) + 1 else [""] * (len(blocks) + 1)
        outputs: list[str] = []
        failed = False

        def should_stop() -> bool:
            return ctx.cancellation.is_cancelled or queries.fatal is not None

        for index, code in enumerate(blocks):
            ctx.cancellation.raise_if_cancelled()
            label = f"[block {index + 1}] " if len(blocks) > 1 else ""
            if state.approve is not None and not await state.approve(ctx, str(code)):
                outputs.append(f"{label}[not approved: the block did not run]")
                continue
            ctx.emit(
                RLMCode,
                call_id=call_id,
                iteration=iteration,
                index=index,
                code=code,
                environment=env.name,
                prose=str(prose[index]),
                prose_after=str(prose[-1]) if index == len(blocks) - 1 else "",
            )
            result = await env.execute(str(code), timeout_s=limits.block_timeout_s, should_stop=should_stop)
            if result.stopped is not None:  # what the block was waiting for ends before the run goes on
                await queries.drain()
            shown, truncated = truncate(result.output, limits.max_output_chars)
            ctx.emit(
                RLMOutput,
                call_id=call_id,
                iteration=iteration,
                index=index,
                output=shown,
                error_type=result.error_type,
                duration_s=result.duration_s,
                truncated=truncated,
            )
            ctx.cancellation.raise_if_cancelled()
            if queries.fatal is not None:
                raise queries.fatal
            if result.stopped == "timeout":
                cap = limits.block_timeout_s
                ctx.emit(LimitReached, limit="rlm_block_timeout", maximum=cap)
                raise LimitExceeded("rlm_block_timeout", f"a code block ran longer than {cap:g} s", maximum=cap)
            outputs.append(label + (result.output.rstrip("\n") or "(no output)"))
            if result.output.strip():
                state.last_output = shown
            if queries.final is not None:
                state.final = queries.final
                break
            if result.error_type is not None:
                failed = True
                if index + 1 < len(blocks):
                    outputs.append(f"[the remaining {len(blocks) - index - 1} block(s) did not run]")
                break
        self._count_errors(ctx, failed)
        text, _ = truncate("\n".join(outputs), limits.max_output_chars)
        if state.final is not None:
            text += "\n" + (self._review() or "[answer received: the run ends]")
        return ToolResult.ok(text)

    def _review(self) -> str | None:
        """Validate a typed answer: ``None`` when it ends the run, a re-ask (the run goes on), or raises."""
        state = self.state
        if state.typed is None or state.final is None:
            return None
        try:
            state.structured, reask = state.typed.review(state.final)
        except StructuredOutputError as exc:  # a tool's error would only be shown to the model: end the run
            state.final, state.failure = None, exc
            return f"[{exc}]"
        if reask is not None:
            state.final = None
            if state.queries is not None:
                state.queries.final = None
        return reask

    def _count_errors(self, ctx: RunContext[Any], failed: bool) -> None:
        state = self.state
        state.consecutive_errors = state.consecutive_errors + 1 if failed else 0
        cap = state.limits.max_consecutive_errors
        if state.final is None and state.consecutive_errors > cap:
            ctx.emit(LimitReached, limit="rlm_consecutive_errors", maximum=cap)
            raise LimitExceeded(
                "rlm_consecutive_errors", f"{state.consecutive_errors} replies in a row raised errors", maximum=cap
            )


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text, False
    marker = f"\n[… {len(text) - limit:,} more characters cut: print less, e.g. a slice or a count]"
    return text[: max(0, limit - len(marker))] + marker, True


class RLMMiddleware(Middleware):
    """Sets the run's environment up before the first model call, enforces the iteration cap, tears down."""

    def __init__(self, state: RLMRunState) -> None:
        self.state = state

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        state = self.state
        state.queries = SubQueries(ctx, state.sub_harness, state.limits)
        ctx.emit(RLMStarted, tool_name=REPL_TOOL, environment=state.environment.name)
        await state.environment.start_run(state.prepared, state.queries)
        state.started = True

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        state = self.state
        if state.failure is not None:
            raise state.failure
        cap = state.limits.max_iterations
        if state.final is None and state.iterations >= cap:
            ctx.emit(LimitReached, limit="rlm_iterations", maximum=cap)
            raise LimitExceeded("rlm_iterations", f"{cap} replies with code and no ready answer", maximum=cap)
        return request

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        if self.state.structured is not None:
            run.structured = self.state.structured
        await self._end()

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        await self._end()

    async def _end(self) -> None:
        if self.state.queries is not None:
            await self.state.queries.drain()
        if self.state.started:
            self.state.started = False
            await self.state.environment.end_run()
