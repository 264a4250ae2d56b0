"""Guardrails: checks on a run's input, its final output and each tool call, as one middleware.

A guardrail is a named check that either passes or *trips* with a reason. ``GuardrailsMiddleware``
runs them at the four places a policy is usually enforced: the user's input before the first model
call, the final answer (every one: plain text, and a structured answer delivered through a forced
tool call, checked as its JSON when the run ends), a tool call before it runs and a tool result
before the model sees it. A tripped final answer is retracted: the loop emits ``model.retracted``
(the dashboard hides what streamed) and drops it from the transcript and the record. A trip emits ``guardrail.tripped`` and raises
``GuardrailTripped`` (the run fails with it); a tool-output guardrail may instead ``reject``: the
model is told the result was withheld and the run goes on. A check that itself raises fails the
run with that error: a guardrail fails closed.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ._errors import ConfigurationError, GuardrailTripped
from ._events import AgentEvent
from ._middleware import Middleware
from ._model import ModelResponse
from ._tools import ToolResult

if TYPE_CHECKING:
    from ._context import RunContext
    from ._messages import Message, ToolCall
    from ._run import AgentRun

__all__ = [
    "GuardrailResult",
    "GuardrailStage",
    "GuardrailTrippedEvent",
    "GuardrailsMiddleware",
    "InputGuardrail",
    "OutputGuardrail",
    "ToolGuardrail",
]

GuardrailStage: TypeAlias = Literal["input", "output", "tool_input", "tool_output"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardrailResult:
    """What a check decided.

    Attributes:
        tripped: Whether the guardrail blocks.
        reason: Why, for the error, the event and (on ``reject``) the model.
        info: Extra JSON-able facts for audits (scores, matched rule ids).
    """

    tripped: bool = False
    reason: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def passed(cls) -> GuardrailResult:
        return _PASSED

    @classmethod
    def block(cls, reason: str, **info: Any) -> GuardrailResult:
        return cls(tripped=True, reason=reason, info=info)


_PASSED = GuardrailResult()

# A check returns a GuardrailResult, or for brevity None (passes) or a str (trips, with that reason).
_Verdict: TypeAlias = "GuardrailResult | str | None"


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardrailTrippedEvent(AgentEvent):
    """A guardrail tripped; ``action`` is ``"raised"`` (the run fails) or ``"rejected"`` (the model is told)."""

    kind: Literal["guardrail.tripped"] = "guardrail.tripped"
    guardrail: str
    stage: str
    reason: str = ""
    action: str = "raised"
    tool_name: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class InputGuardrail:
    """Checks the run's input (the text of the last user message) before the first model call.

    ``check(ctx, text)`` may be sync or async.
    """

    name: str
    check: Callable[[RunContext[Any], str], _Verdict | Awaitable[_Verdict]]


@dataclass(frozen=True, slots=True)
class OutputGuardrail:
    """Checks every final answer's text before the run completes with it.

    ``check(ctx, text)`` may be sync or async. A plain answer is checked as the model returns it; a
    structured answer (a schema-tool call, or JSON) is checked as its JSON text when the run ends.
    Answers that call real tools are not final.
    """

    name: str
    check: Callable[[RunContext[Any], str], _Verdict | Awaitable[_Verdict]]


@dataclass(frozen=True, slots=True)
class ToolGuardrail:
    """Checks tool calls before they run (``check_call``) and/or their results (``check_result``).

    Args:
        name: Names the guardrail in errors and events.
        check_call: ``(ctx, call)``; a trip always raises: the call never runs.
        check_result: ``(ctx, call, result)``; a trip raises, or with ``on_trip="reject"`` the model
            gets an error result saying the output was withheld, and the run continues.
        tools: Only these tool names are checked (``None``: every tool).
        on_trip: ``"raise"`` or ``"reject"`` (results only).
    """

    name: str
    check_call: Callable[[RunContext[Any], ToolCall], _Verdict | Awaitable[_Verdict]] | None = None
    check_result: Callable[[RunContext[Any], ToolCall, ToolResult], _Verdict | Awaitable[_Verdict]] | None = None
    tools: frozenset[str] | None = None
    on_trip: Literal["raise", "reject"] = "raise"

    def __post_init__(self) -> None:
        if self.check_call is None and self.check_result is None:
            raise ConfigurationError(f"tool guardrail {self.name!r} needs check_call or check_result")
        if self.on_trip not in ("raise", "reject"):
            raise ConfigurationError(f"on_trip must be 'raise' or 'reject', got {self.on_trip!r}")
        names: object = self.tools  # any collection of names is accepted; stored frozen
        if names is not None and not isinstance(names, frozenset):
            object.__setattr__(self, "tools", frozenset(names))  # type: ignore[call-overload]

    def applies_to(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools


async def _verdict(value: Any) -> GuardrailResult:
    if inspect.isawaitable(value):
        value = await value
    if value is None:
        return _PASSED
    if isinstance(value, str):
        return GuardrailResult.block(value)
    if isinstance(value, GuardrailResult):
        return value
    raise TypeError(f"a guardrail check must return GuardrailResult, str or None, got {type(value).__name__}")


class GuardrailsMiddleware(Middleware):
    """Runs input, output and tool guardrails, in the order given; the first trip wins.

    Register it first so its ``before_*`` hooks see the request before other middleware changes it.
    """

    def __init__(
        self,
        *,
        input: Sequence[InputGuardrail] = (),
        output: Sequence[OutputGuardrail] = (),
        tools: Sequence[ToolGuardrail] = (),
    ) -> None:
        for kind, items, expected in (
            ("input", input, InputGuardrail),
            ("output", output, OutputGuardrail),
            ("tools", tools, ToolGuardrail),
        ):
            for item in items:
                if not isinstance(item, expected):
                    raise ConfigurationError(f"{kind} guardrails must be {expected.__name__}, got {item!r}")
        self.input = tuple(input)
        self.output = tuple(output)
        self.tools = tuple(tools)
        self._checked: dict[str, set[str]] = {}  # run id -> final texts already checked (cleared at the end)

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        if not self.input:
            return
        text = next((m.text for m in reversed(messages) if m.role == "user"), "")
        for guard in self.input:
            self._raise_if(ctx, guard.name, "input", await _verdict(guard.check(ctx, text)))

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        if self.output and not response.message.tool_calls:
            await self._check_output(ctx, response.message.text)
        return response

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        """The final answer, whatever way it came (a structured answer through a tool call too)."""
        if not self.output:
            return
        try:
            texts = [run.final_text]
            if run.structured is not None:
                texts.append(json.dumps(run.structured.raw, ensure_ascii=False, sort_keys=True, default=str))
            for text in texts:
                await self._check_output(ctx, text)
        finally:
            self._checked.pop(ctx.run_id, None)

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self._checked.pop(ctx.run_id, None)

    async def _check_output(self, ctx: RunContext[Any], text: str) -> None:
        seen = self._checked.setdefault(ctx.run_id, set())
        if text in seen:
            return
        for guard in self.output:
            self._raise_if(ctx, guard.name, "output", await _verdict(guard.check(ctx, text)))
        seen.add(text)

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall:
        for guard in self.tools:
            if guard.check_call is not None and guard.applies_to(call.name):
                verdict = await _verdict(guard.check_call(ctx, call))
                self._raise_if(ctx, guard.name, "tool_input", verdict, call=call)
        return call

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        for guard in self.tools:
            if guard.check_result is None or not guard.applies_to(call.name):
                continue
            verdict = await _verdict(guard.check_result(ctx, call, result))
            if verdict.tripped and guard.on_trip == "reject":
                _emit(ctx, guard.name, "tool_output", verdict, "rejected", call)
                return ToolResult.error(f"the output of tool `{call.name}` was withheld by guardrail {guard.name!r}: "
                                        f"{verdict.reason}")  # fmt: skip
            self._raise_if(ctx, guard.name, "tool_output", verdict, call=call)
        return result

    @staticmethod
    def _raise_if(
        ctx: RunContext[Any],
        name: str,
        stage: GuardrailStage,
        verdict: GuardrailResult,
        *,
        call: ToolCall | None = None,
    ) -> None:
        if not verdict.tripped:
            return
        _emit(ctx, name, stage, verdict, "raised", call)
        raise GuardrailTripped(
            name,
            stage,
            verdict.reason,
            info=verdict.info,
            tool_name=call.name if call is not None else None,
        )

    def __repr__(self) -> str:
        return f"GuardrailsMiddleware(input={len(self.input)}, output={len(self.output)}, tools={len(self.tools)})"


def _emit(
    ctx: RunContext[Any], name: str, stage: str, verdict: GuardrailResult, action: str, call: ToolCall | None
) -> None:
    ctx.emit(
        GuardrailTrippedEvent,
        guardrail=name,
        stage=stage,
        reason=verdict.reason,
        action=action,
        tool_name=call.name if call is not None else None,
        call_id=call.id if call is not None else None,
    )
