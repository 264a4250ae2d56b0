"""Reading a structured answer out of a model's reply: a forced tool call, native JSON, or JSON in text.

Text answers are parsed leniently (code fences, prose around the object) but never guessed at: a
reply that does not validate against the spec is a ``StructuredOutputError`` with a short preview.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from pydantic import ValidationError

from ._errors import ConfigurationError, StructuredOutputError
from ._messages import ToolCall
from ._model import ModelResponse
from ._structured import (
    _PREVIEW_CHARS,
    _WRAP_KEY,
    OutputSpec,
    StructuredOutput,
    StructuredStrategy,
    _plain_json,
    _summarize,
    schema_errors,
)

__all__ = ["extract_structured", "is_structured_call", "parse_json_lenient"]


# ------------------------------------------------------------------------------------------ extraction
_FENCE: Final = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL)
_MAX_STARTS: Final = 16  # bracket positions tried before giving up; bounds the cost on hostile text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def parse_json_lenient(text: str) -> Any:
    """Parse a model's JSON answer: as is, inside a code fence, or the first balanced object/array.

    Raises:
        ValueError: No JSON value could be found.
    """
    try:
        return _DECODER.decode(text.strip())
    except ValueError:
        pass
    for fenced in _FENCE.finditer(text):
        try:
            return _DECODER.decode(fenced.group(1).strip())
        except ValueError:
            continue
    start = -1
    for _ in range(_MAX_STARTS):  # the first object or array that parses, prose around it ignored
        found = [i for i in (text.find("{", start + 1), text.find("[", start + 1)) if i >= 0]
        if not found:
            break
        start = min(found)
        try:
            return _DECODER.raw_decode(text, start)[0]
        except ValueError:
            continue
    raise ValueError("no JSON value found")


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW_CHARS else flat[: _PREVIEW_CHARS - 1] + "…"


def _validate(spec: OutputSpec, data: Any, strategy: StructuredStrategy, source: str) -> StructuredOutput:
    if spec.wrapped and isinstance(data, dict) and _WRAP_KEY in data:
        data = data[_WRAP_KEY]
    where = f"structured output {spec.name!r} ({strategy})"
    if spec.adapter is not None:
        try:
            value = spec.adapter.validate_python(data)
        except ValidationError as exc:
            raise StructuredOutputError(
                f"{where} does not match the schema: {_summarize(exc)}; answer: {_preview(source)!r}"
            ) from None
        return StructuredOutput(value=value, raw=spec.adapter.dump_python(value, mode="json"), strategy=strategy)
    root = spec.schema
    node = root["properties"][_WRAP_KEY] if spec.wrapped else root
    errors = schema_errors(data, node, root=root)
    if errors:
        raise StructuredOutputError(
            f"{where} does not match the schema: {'; '.join(errors)}; answer: {_preview(source)!r}"
        )
    return StructuredOutput(value=data, raw=data, strategy=strategy)


def _parse(text: str, spec: OutputSpec, strategy: StructuredStrategy) -> Any:
    if not text.strip():
        raise StructuredOutputError(f"structured output {spec.name!r} ({strategy}): the model's answer is empty")
    try:
        return parse_json_lenient(text)
    except ValueError:
        raise StructuredOutputError(
            f"structured output {spec.name!r} ({strategy}): the model's answer is not JSON; answer: {_preview(text)!r}"
        ) from None


def extract_structured(
    response: ModelResponse, spec: OutputSpec, strategy: StructuredStrategy
) -> StructuredOutput | None:
    """Extract and validate the structured value from a final response.

    Returns:
        The value, or ``None`` under the tool strategy when the model did not call the schema tool
        (the loop decides whether to ask again or fail).

    Raises:
        StructuredOutputError: The answer is not JSON or does not match the schema.
        ConfigurationError: The strategy is unknown.
    """
    if strategy == "tool":
        call = next((c for c in response.message.tool_calls if c.name == spec.name), None)
        if call is None:
            return None
        if call.raw_arguments is not None:
            return _validate(spec, _parse(call.raw_arguments, spec, strategy), strategy, call.raw_arguments)
        try:
            data = _plain_json(call.arguments, "tool-call arguments")
        except ConfigurationError as exc:
            raise StructuredOutputError(f"structured output {spec.name!r} (tool): {exc.message}") from None
        return _validate(spec, data, strategy, json.dumps(data))
    if strategy in ("native", "json_object"):
        text = response.message.text
        return _validate(spec, _parse(text, spec, strategy), strategy, text)
    raise ConfigurationError(f"unknown structured-output strategy {strategy!r}")


def is_structured_call(call: ToolCall, spec: OutputSpec) -> bool:
    """Whether ``call`` is the model answering through the schema tool rather than calling a real tool."""
    return call.name == spec.name
