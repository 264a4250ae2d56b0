"""Typed answers: ``RLM(..., output_type=Model)`` validates the final answer and re-asks once.

The REPL sends the answer as text: ``answer["content"]`` that is not a string travels as JSON, and
``FINAL(value)`` as ``str(value)``. The text is read as JSON, else as a Python literal (what
``str`` of a dict or list gives; ``ast.literal_eval`` evaluates literals only, never code), else
kept as a string, then validated with pydantic against ``output_type``. A failure is reported to
the model once, as the next turn, with what did not match; a second failure ends the run with
``StructuredOutputError``. The validated value is the run's ``structured.value``. A table answer is
checked by a ``DataFrameSchema`` instead (``_frame_schema``) and its value is the DataFrame.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

import pydantic

from tinyagents_nb.harness import StructuredOutputError
from tinyagents_nb.harness.models import StructuredOutput

from ._frame_schema import DataFrameSchema

__all__ = ["AnswerType"]

_SCHEMA_CHARS = 2_000


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _problem(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "the value"
        parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class AnswerType:
    """The type an RLM's final answer must validate against, and how many re-asks are left.

    ``output_type`` is a pydantic model (or any type pydantic validates), a ``DataFrameSchema``, or
    a mapping of column names to dtypes (made a ``DataFrameSchema``).
    """

    def __init__(self, output_type: Any, *, reasks: int = 1) -> None:
        if isinstance(output_type, Mapping):
            output_type = DataFrameSchema(output_type)
        self.output_type = output_type
        self.frame = output_type if isinstance(output_type, DataFrameSchema) else None
        self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Any if self.frame else output_type)
        self.name = getattr(output_type, "__name__", repr(output_type))
        self.reasks = reasks

    def instructions(self) -> str:
        """What the system prompt adds: the answer's JSON schema (bounded)."""
        if self.frame is not None:
            return self.frame.instructions()
        schema = json.dumps(self.adapter.json_schema(), ensure_ascii=False)
        if len(schema) > _SCHEMA_CHARS:
            schema = schema[:_SCHEMA_CHARS] + " …"
        return (
            f"Your answer must be a {self.name}: set answer['content'] to a dict (or list) matching this "
            f"JSON schema; it is validated when you set answer['ready'] = True.\nSchema: {schema}"
        )

    def check(self, text: str) -> StructuredOutput | str:
        """The validated answer, or what did not match (for the re-ask)."""
        if self.frame is not None:
            frame, problem = self.frame.check(text)
            if problem is not None:
                return problem
            raw = json.loads(frame.to_json(orient="records", date_format="iso"))
            return StructuredOutput(value=frame, raw=raw, strategy="json_object")
        try:
            value = self.adapter.validate_python(_parse(text))
        except pydantic.ValidationError as exc:
            return _problem(exc)
        return StructuredOutput(value=value, raw=self.adapter.dump_python(value, mode="json"), strategy="json_object")

    def review(self, text: str) -> tuple[StructuredOutput | None, str | None]:
        """``(value, None)`` when it validates, ``(None, re-ask)`` while a re-ask is left; else raises.

        Raises:
            StructuredOutputError: The answer did not validate and no re-ask is left.
        """
        checked = self.check(text)
        if isinstance(checked, StructuredOutput):
            return checked, None
        if self.reasks > 0:
            self.reasks -= 1
            return None, (
                f"[the answer does not match {self.name}: {checked}. Fix it: set answer['content'] to a value "
                "matching the schema, then answer['ready'] = True.]"
            )
        raise StructuredOutputError(f"the RLM's answer does not match {self.name} after a re-ask: {checked}")
