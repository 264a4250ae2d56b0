"""Settling each model turn of a run that asks for structured output, repairing invalid answers.

Models often get a schema slightly wrong once and right when shown the validation error, so an
invalid answer is not the end of the run: the error goes back to the model (as the result of its
schema-tool call, or as a user message for the text strategies) and the model answers again, up to
``RunPolicy.structured_retries`` times. Each repair is one more model call, counted under the run's
usual limits, and emits one ``structured.repair`` event.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ._errors import StructuredOutputError
from ._events import StructuredRepair
from ._messages import REPAIR_TAG, Message, ToolCall, ToolMessage, UserMessage
from ._model import ModelResponse
from ._structured import OutputSpec, StructuredOutput, StructuredStrategy
from ._structured_extract import extract_structured, is_structured_call

if TYPE_CHECKING:
    from ._context import RunContext

__all__ = ["StructuredTurn"]

_ACK: Final = "Structured output recorded. Continue with the remaining tool calls."


class StructuredTurn:
    """The structured-output state of one run: the value so far and the repairs used.

    Args:
        spec: What the answer must look like.
        strategy: How the schema reaches the model.
        retries: Repair attempts allowed after an invalid answer (0: the first invalid answer fails).
    """

    __slots__ = ("repairs", "retries", "spec", "strategy", "value")

    def __init__(self, spec: OutputSpec, strategy: StructuredStrategy, retries: int) -> None:
        self.spec = spec
        self.strategy = strategy
        self.retries = retries
        self.repairs = 0
        self.value: StructuredOutput | None = None

    def settle(self, ctx: RunContext[Any], response: ModelResponse, messages: list[Message]) -> str | list[ToolCall]:
        """Read one model turn (already appended to ``messages``).

        Returns:
            The run's final text when the structured value is in hand and the model is done; else
            the tool calls still to run, empty when the model must simply be asked again (a repair).

        Raises:
            StructuredOutputError: The answer is invalid and no repair attempt is left.
        """
        message = response.message
        calls = list(message.tool_calls)
        spec = self.spec
        if self.strategy == "tool" and calls:
            answers = [c for c in calls if is_structured_call(c, spec)]
            if answers:
                real = [c for c in calls if not is_structured_call(c, spec)]
                try:
                    self.value = extract_structured(response, spec, self.strategy)
                except StructuredOutputError as exc:
                    note = self._repair(ctx, exc)
                    fix = f"{note}\nCall `{spec.name}` again with arguments that match its schema."
                    messages.extend(_answer(c, fix, is_error=True) for c in answers)
                    return real
                if real:  # answer the schema call so the transcript stays valid, then run the others
                    messages.extend(_answer(c, _ACK) for c in answers)
                    return real
                messages.extend(_answer(c, "ok") for c in answers)
                raw = self.value.raw if self.value is not None else None
                return message.text or json.dumps(raw, ensure_ascii=False)
        if calls:
            return calls
        if self.value is None:
            try:
                self.value = extract_structured(response, spec, self.strategy)
                if self.value is None:
                    raise StructuredOutputError(f"the model finished without returning structured output `{spec.name}`")
            except StructuredOutputError as exc:
                note = self._repair(ctx, exc)
                if self.strategy == "tool":
                    fix = (
                        f"{note}\nGive your final answer by calling `{spec.name}` with arguments that match its schema."
                    )
                else:
                    fix = f"{note}\nReply again with only the JSON value for `{spec.name}`, matching the schema."
                messages.append(UserMessage(text=fix, tags=(REPAIR_TAG,)))
                return []
        return message.text

    def _repair(self, ctx: RunContext[Any], error: StructuredOutputError) -> str:
        """Spend one repair on ``error`` (emitting its event) or, when none is left, raise it."""
        if self.repairs >= self.retries:
            if self.repairs:
                raise StructuredOutputError(
                    f"{error.message} (still invalid after {self.repairs} repair attempts)"
                ) from error
            raise error
        self.repairs += 1
        ctx.emit(
            StructuredRepair,
            attempt=self.repairs,
            max_attempts=self.retries,
            output=self.spec.name,
            strategy=self.strategy,
            error=error.message,
        )
        return f"Your structured answer could not be used: {error.message}"


def _answer(call: ToolCall, text: str, *, is_error: bool = False) -> ToolMessage:
    return ToolMessage(tool_call_id=call.id, name=call.name, text=text, is_error=is_error)
