"""Settling each model turn of a run that asks for structured output, repairing invalid answers.

Models often get a schema slightly wrong once and right when shown the validation error, so an
invalid answer is not the end of the run: the error goes back to the model (as the result of its
schema-tool call, or as a user message for the text strategies) and the model answers again, up to
``RunPolicy.structured_retries`` times. Each repair is one more model call, counted under the run's
usual limits, and emits one ``structured.repair`` event.

Hosts differ in what they honour: llama.cpp's server ignores a forced (named) ``tool_choice`` but
constrains output to a ``json_schema`` response format; llama-cpp-python's server is the reverse.
When the strategy was chosen automatically and the host shows it does not support it (it rejects
the response format, or answers a forced schema-tool call without calling it), the run falls back
to the next strategy once, and the outcome is remembered for that model for the rest of the session
(the process), so later runs start with what works.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ._errors import ContextLimitError, ProviderError, StructuredOutputError
from ._events import StructuredRepair
from ._messages import REPAIR_TAG, Message, ToolCall, ToolMessage, UserMessage
from ._model import ModelResponse
from ._structured import OutputSpec, StructuredOutput, StructuredStrategy
from ._structured_extract import extract_structured, is_structured_call

if TYPE_CHECKING:
    from ._context import RunContext
    from ._model import ChatModel
    from ._policy import RunPolicy

__all__ = ["StructuredTurn"]

_ACK: Final = "Structured output recorded. Continue with the remaining tool calls."
_NEXT: Final[dict[StructuredStrategy, StructuredStrategy]] = {
    "native": "tool",
    "tool": "native",
    "json_object": "tool",
}
# Words of a host's rejection of a response format it does not support (llama-cpp-python: HTTP 500
# "Input should be 'text' or 'json_object'" at response_format.type; others: 400/422 naming the field)
_FORMAT_WORDS: Final = ("response_format", "json_schema", "json_object", "structured output", "schema")
_LEARNED: dict[tuple[str, str, str], StructuredStrategy] = {}  # (provider, base_url, model) -> what works


def _model_key(model: ChatModel) -> tuple[str, str, str]:
    return (model.provider, str(getattr(model, "base_url", "") or ""), model.model_name)


class StructuredTurn:
    """The structured-output state of one run: the value so far and the repairs used.

    Args:
        spec: What the answer must look like.
        strategy: How the schema reaches the model.
        retries: Repair attempts allowed after an invalid answer (0: the first invalid answer fails).
    """

    __slots__ = ("_key", "fell_back", "repairs", "retries", "spec", "strategy", "value")

    def __init__(
        self,
        spec: OutputSpec,
        strategy: StructuredStrategy,
        retries: int,
        *,
        model: ChatModel | None = None,
    ) -> None:
        self.spec = spec
        self._key = None if model is None else _model_key(model)  # None: the strategy was asked for, keep it
        self.strategy = _LEARNED.get(self._key, strategy) if self._key is not None else strategy
        self.retries = retries
        self.repairs = 0
        self.fell_back = False
        self.value: StructuredOutput | None = None

    @classmethod
    def start(
        cls, spec: OutputSpec | None, strategy: StructuredStrategy | None, policy: RunPolicy, model: ChatModel
    ) -> StructuredTurn | None:
        """The run's turn (``None`` without structured output); it may fall back only when nobody chose the strategy."""
        if spec is None or strategy is None:
            return None
        auto = spec.strategy == "auto" and policy.structured_strategy == "auto"
        return cls(spec, strategy, policy.structured_retries, model=model if auto else None)

    def unsupported(self, ctx: RunContext[Any], error: BaseException) -> bool:
        """Fall back (once) when ``error`` is the host rejecting the response format; ``True``: ask again."""
        if self.strategy not in ("native", "json_object") or not isinstance(error, ProviderError):
            return False
        if isinstance(error, ContextLimitError) or error.status in (None, 401, 403, 404, 408, 409, 429):
            return False
        text = str(error).lower()
        if not any(word in text for word in _FORMAT_WORDS):
            return False
        return self._fall_back(ctx, f"the host rejected the {self.strategy} response format: {error.message}")

    def _fall_back(self, ctx: RunContext[Any], reason: str) -> bool:
        if self._key is None or self.fell_back:
            return False
        old, self.strategy = self.strategy, _NEXT[self.strategy]
        self.fell_back = True
        _LEARNED[self._key] = self.strategy
        ctx.emit(
            StructuredRepair,
            attempt=0,  # not a repair of the answer: the strategy changed (remembered for this model)
            max_attempts=self.retries,
            output=self.spec.name,
            strategy=self.strategy,
            error=f"{reason[:300]}; using the {self.strategy} strategy instead of {old} for this model from now on",
        )
        return True

    def settle(
        self, ctx: RunContext[Any], response: ModelResponse, messages: list[Message], *, forced: bool = False
    ) -> str | list[ToolCall]:
        """Read one model turn (already appended to ``messages``).

        ``forced``: the request named the schema tool in ``tool_choice``; an answer without any tool
        call then shows the host ignores a forced choice (llama.cpp's server), and the run falls back.

        Returns:
            The run's final text when the structured value is in hand and the model is done; else
            the tool calls still to run, empty when the model must simply be asked again (a repair).

        Raises:
            StructuredOutputError: The answer is invalid and no repair attempt is left.
        """
        message = response.message
        calls = list(message.tool_calls)
        spec = self.spec
        if self.strategy == "tool" and forced and not calls and self.value is None:
            if self._fall_back(ctx, f"the host ignored the forced `{spec.name}` tool call and answered in text"):
                messages.pop()  # the ignored turn is no answer: ask again, by the next strategy
                return []
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
