"""Structured output: ask the model for a typed value and extract it from the final answer.

Three strategies cover what providers offer. ``native`` sends the JSON schema as the response
format and the provider constrains decoding. ``tool`` offers the schema as one extra tool and reads
the arguments of the model's call to it, which works with any model that calls tools. ``json_object``
asks only for valid JSON and states the schema in a system instruction. Whatever the strategy, the
harness validates the value itself, because only ``native`` with ``strict`` is enforced by anyone else.

Providers accept only JSON objects at the top of a schema, so other output types (``list[int]``,
``int``, a union) are wrapped as ``{"result": <value>}`` on the way out and unwrapped on extraction;
callers see the value they asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Final, Literal, TypeAlias, TypeVar, overload

from pydantic import PydanticUserError, TypeAdapter, ValidationError

from ._errors import ConfigurationError, StructuredOutputError
from ._messages import Message, SystemMessage
from ._model import ModelRequest, ResponseFormat, ToolSchema
from ._profile import ModelProfile

__all__ = [
    "OutputSpec",
    "StructuredOutput",
    "StructuredStrategy",
    "prepare_request",
    "schema_errors",
    "strategy_for_profile",
]

StructuredStrategy: TypeAlias = Literal["native", "tool", "json_object"]
"""How the schema reaches the model: response format, an extra tool, or JSON mode plus instructions."""

_T = TypeVar("_T")
_STRATEGIES: Final = ("native", "tool", "json_object")
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what function-calling APIs accept as a name
_WRAP_KEY: Final = "result"
_INSTRUCTION_TAG: Final = "structured_output"
_JSON_OBJECT: Final = ResponseFormat(type="json_object")
_PREVIEW_CHARS: Final = 160


# ------------------------------------------------------------------------------------------ spec
def _plain_json(value: object, what: str) -> Any:
    """A plain, private copy of a JSON value (read-only mappings allowed), validated on the way."""

    def fallback(obj: object) -> object:
        if isinstance(obj, Mapping):
            return dict(obj)
        raise TypeError(f"a {type(obj).__name__} is not JSON")

    try:
        return json.loads(json.dumps(value, allow_nan=False, default=fallback))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what} is not JSON: {exc}") from None


def _object_root(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema with an object at its root, and whether it had to be wrapped to get there."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict) and target.get("type") == "object":  # a recursive model: inline its root
            return {**target, "$defs": defs}, False
    if schema.get("type") == "object":
        return schema, False
    inner = dict(schema)
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {_WRAP_KEY: inner},
        "required": [_WRAP_KEY],
        "additionalProperties": False,
    }
    for defs_key in ("$defs", "definitions"):  # keep "#/$defs/..." references resolving from the root
        if defs_key in inner:
            wrapper[defs_key] = inner.pop(defs_key)
    return wrapper, True


def _default_name(output: object, wrapped: bool) -> str:
    if wrapped or not isinstance(output, type):
        return "output"
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", output.__name__).strip("_")[:64]
    return name or "output"


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class OutputSpec:
    """What the final answer must look like; build it with ``OutputSpec.of``.

    Everything derived (the adapter, the response format, the schema tool, the JSON-mode
    instruction) is built once here, so preparing and checking each request costs no schema work.

    Attributes:
        name: The output's name, shown to the model as the schema or tool name.
        schema: The JSON schema sent to the model; an object at the root (see ``wrapped``).
        description: Extra guidance for the model, if any.
        strategy: The requested strategy, or ``"auto"`` to pick one from the model's profile.
        strict: Ask the provider to enforce the schema exactly (native and tool strategies). OpenAI
            then requires every property to be required and ``additionalProperties: false``, which
            pydantic schemas lack by default, so it is off unless asked for.
        wrapped: The value travels as ``{"result": value}`` because its own schema is not an object.
        output_type: The type given to ``of``, or ``None`` for a raw JSON-schema dict.
        adapter: Validates and serializes ``output_type``; ``None`` for a raw schema, which is checked
            by a minimal JSON-schema validator instead.
    """

    name: str
    schema: Mapping[str, Any] = field(repr=False)
    description: str | None = None
    strategy: StructuredStrategy | Literal["auto"] = "auto"
    strict: bool = False
    wrapped: bool = False
    output_type: object = None
    adapter: TypeAdapter[Any] | None = field(default=None, repr=False)
    response_format: ResponseFormat = field(init=False, repr=False)
    tool_schema: ToolSchema = field(init=False, repr=False)
    instruction: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        name: object = self.name  # checked at runtime: callers may not be type-checked
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigurationError(f"output name must be 1-64 letters, digits, '_' or '-', got {self.name!r}")
        if self.strategy != "auto" and self.strategy not in _STRATEGIES:
            raise ConfigurationError(f"strategy must be 'auto' or one of {_STRATEGIES}, got {self.strategy!r}")
        about = f" {self.description}" if self.description else ""
        derived = {
            "response_format": ResponseFormat(
                type="json_schema", name=self.name, schema=self.schema, strict=self.strict
            ),
            "tool_schema": ToolSchema(
                name=self.name,
                description=f"Return the result as `{self.name}`.{about}",
                parameters=self.schema,
                strict=self.strict,
            ),
            "instruction": f"Answer with a single JSON value named `{self.name}`, without prose or code fences, "
            f"that matches this JSON schema:{about}\n{json.dumps(self.schema, separators=(',', ':'))}",
        }
        for attr, value in derived.items():
            object.__setattr__(self, attr, value)  # frozen: derived fields are written once, here

    @classmethod
    def of(
        cls,
        output: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        strategy: StructuredStrategy | Literal["auto"] = "auto",
        strict: bool = False,
    ) -> OutputSpec:
        """Build a spec from a pydantic model, any type pydantic can validate, or a JSON-schema dict.

        Args:
            output: A ``BaseModel`` subclass, a dataclass, ``TypedDict``, ``list[int]``..., a
                JSON-schema ``dict`` (validated by a minimal built-in validator), or an ``OutputSpec``.
            name: The output's name; defaults to the class name for object types, else ``"output"``.
            description: Extra guidance for the model.
            strategy: ``"auto"`` or a forced strategy.
            strict: See the ``strict`` attribute.

        Raises:
            ConfigurationError: pydantic cannot build a schema for ``output``, the dict is not JSON,
                or the name or strategy is invalid.
        """
        if isinstance(output, OutputSpec):  # already a spec: apply only the arguments actually given
            if (name, description, strategy, strict) == (None, None, "auto", False):
                return output
            return replace(
                output,
                name=output.name if name is None else name,
                description=output.description if description is None else description,
                strategy=output.strategy if strategy == "auto" else strategy,
                strict=output.strict or strict,
            )
        adapter: TypeAdapter[Any] | None = None
        if isinstance(output, Mapping):
            raw = _plain_json(output, "output schema")
            output_type = None
        else:
            try:
                adapter = TypeAdapter(output)
                raw = adapter.json_schema()
            except (PydanticUserError, TypeError, NameError, ValueError) as exc:
                summary = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ConfigurationError(
                    f"cannot build an output schema from {output!r}: {summary}",
                    hint="pass a pydantic model, a dataclass, a TypedDict, a type such as list[int], or a schema dict",
                ) from exc
            output_type = output
        schema, wrapped = _object_root(raw)
        return cls(
            name=_default_name(output, wrapped) if name is None else name,
            schema=schema,
            description=description,
            strategy=strategy,
            strict=strict,
            wrapped=wrapped,
            output_type=output_type,
            adapter=adapter,
        )


# ------------------------------------------------------------------------------------------ strategy
def strategy_for_profile(
    profile: ModelProfile | None, requested: StructuredStrategy | Literal["auto"] = "auto"
) -> StructuredStrategy:
    """Resolve ``"auto"`` against what the model supports.

    Native schemas when the profile says so, else a tool call when the model calls tools, else JSON
    mode. Without a profile, ``"tool"``: almost every tool-calling model honours it, and a forced
    strategy is returned unchanged.
    """
    if requested != "auto":
        if requested not in _STRATEGIES:
            raise ConfigurationError(f"unknown structured-output strategy {requested!r}")
        return requested
    if profile is None:
        return "tool"
    if profile.structured_output in ("native", "json_object"):
        return profile.structured_output
    return "tool" if profile.supports_tools else "json_object"


def _with_instruction(messages: Sequence[Message], instruction: str) -> tuple[Message, ...]:
    if any(isinstance(m, SystemMessage) and _INSTRUCTION_TAG in m.tags for m in messages):
        return tuple(messages)  # already prepared: keep requests idempotent across turns
    at = 0
    while at < len(messages) and isinstance(messages[at], SystemMessage):
        at += 1  # after the leading system messages: providers that hoist them still see one block
    note = SystemMessage(text=instruction, tags=(_INSTRUCTION_TAG,))
    return (*messages[:at], note, *messages[at:])


def prepare_request(request: ModelRequest, spec: OutputSpec, strategy: StructuredStrategy) -> ModelRequest:
    """A copy of ``request`` that asks for ``spec`` by ``strategy``; ``request`` itself is untouched.

    The tool strategy forces the schema tool through ``tool_choice`` only when it is the request's
    only tool: with real tools present the model must stay free to call them first. Preparing an
    already prepared request changes nothing.

    Raises:
        ConfigurationError: The strategy is unknown, or a different tool already has ``spec.name``.
    """
    if strategy == "native":
        return replace(request, response_format=spec.response_format)
    if strategy == "json_object":
        return replace(
            request, response_format=_JSON_OBJECT, messages=_with_instruction(request.messages, spec.instruction)
        )
    if strategy == "tool":
        tools = tuple(request.tools)
        present = False
        for tool in tools:
            if tool.name == spec.name:
                if tool != spec.tool_schema:
                    raise ConfigurationError(
                        f"a tool named {spec.name!r} already exists; the structured-output tool needs its name",
                        hint="give the output another name: OutputSpec.of(..., name=...)",
                    )
                present = True
        choice = spec.name if len(tools) == int(present) else request.tool_choice
        return replace(
            request,
            tools=tools if present else (*tools, spec.tool_schema),
            tool_choice=choice,
            response_format=None,
        )
    raise ConfigurationError(f"unknown structured-output strategy {strategy!r}")


# ------------------------------------------------------------------------------------------ schema check
_MAX_ERRORS: Final = 5
_MAX_NESTING: Final = 64


_JSON_TYPES: Final[dict[type, str]] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    str: "string",
    list: "array",
    dict: "object",
}


def _json_type(value: object) -> str:
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"  # JSON Schema: 1.0 is an integer
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return None  # remote references are out of scope for a minimal validator
    node: Any = root
    for part in filter(None, ref[1:].split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _same(a: object, b: object) -> bool:
    return _json_type(a) == _json_type(b) and a == b  # JSON's equality: True is not 1


def schema_errors(value: Any, schema: Any, *, root: Mapping[str, Any], path: str = "$", depth: int = 0) -> list[str]:
    """Check ``value`` against the JSON-schema subset models are asked for; at most five messages.

    Supported: ``type`` (one or a list), ``enum``, ``const``, ``properties``, ``required``,
    ``additionalProperties`` (false or a schema), ``items``, ``anyOf``/``oneOf`` (as "any"), ``allOf``
    and local ``$ref``s. Other keywords are ignored, so it never rejects what a full validator accepts.
    """
    if schema is False or depth > _MAX_NESTING:
        return [f"{path}: no value is allowed here" if schema is False else f"{path}: schema nested too deeply"]
    if not isinstance(schema, Mapping):
        return []
    errors: list[str] = []
    if isinstance(ref := schema.get("$ref"), str):
        target = _resolve(root, ref)
        if target is None:
            return [f"{path}: cannot resolve $ref {ref!r}"]
        errors += schema_errors(value, target, root=root, path=path, depth=depth + 1)
    kind, types = _json_type(value), schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if kind not in allowed and not (kind == "integer" and "number" in allowed):
            return [*errors, f"{path}: expected {' or '.join(allowed)}, got {kind}"]
    if "const" in schema and not _same(value, schema["const"]):
        errors.append(f"{path}: must equal {schema['const']!r}")
    if isinstance(enum := schema.get("enum"), list) and not any(_same(value, option) for option in enum):
        errors.append(f"{path}: must be one of {enum!r}"[:200])
    for key in ("anyOf", "oneOf"):
        if isinstance(options := schema.get(key), list) and all(
            schema_errors(value, option, root=root, path=path, depth=depth + 1) for option in options
        ):
            errors.append(f"{path}: matches none of the {key} alternatives")
    for sub in schema.get("allOf") or ():
        errors += schema_errors(value, sub, root=root, path=path, depth=depth + 1)
    return (errors + _children_errors(value, schema, root, path, depth))[:_MAX_ERRORS]


def _children_errors(
    value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], path: str, depth: int
) -> list[str]:
    errors: list[str] = []
    if isinstance(value, dict):
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties", True)
        errors += [f"{path}: missing required property {n!r}" for n in schema.get("required") or () if n not in value]
        for name, item in value.items():
            if name in props or isinstance(extra, Mapping):
                sub = props[name] if name in props else extra
                errors += schema_errors(item, sub, root=root, path=f"{path}.{name}", depth=depth + 1)
            elif extra is False:
                errors.append(f"{path}: unexpected property {name!r}")
            if len(errors) >= _MAX_ERRORS:
                break
    elif isinstance(value, list) and isinstance(items := schema.get("items"), Mapping | bool):
        for i, item in enumerate(value):
            errors += schema_errors(item, items, root=root, path=f"{path}[{i}]", depth=depth + 1)
            if len(errors) >= _MAX_ERRORS:
                break
    return errors


# ------------------------------------------------------------------------------------------ result
@lru_cache(maxsize=256)
def _cached_adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def _adapter_for(tp: Any) -> TypeAdapter[Any]:
    try:
        return _cached_adapter(tp)
    except TypeError as exc:  # unhashable annotations cannot be cached (pydantic's own TypeErrors re-raise)
        if "unhashable" not in str(exc):
            raise
        return TypeAdapter(tp)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _summarize(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "$"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


@dataclass(frozen=True, kw_only=True, slots=True)
class StructuredOutput:
    """A validated structured answer.

    Attributes:
        value: The validated Python value (e.g. the pydantic model instance).
        raw: The value as JSON (dicts, lists, scalars), already unwrapped.
        strategy: The strategy that produced it.
    """

    value: Any
    raw: Any
    strategy: StructuredStrategy

    def as_value(self) -> Any:
        """A fresh JSON copy of the value, safe to mutate."""
        return _copy(self.raw)

    @overload
    def parse(self, tp: type[_T]) -> _T: ...
    @overload
    def parse(self, tp: Any) -> Any: ...
    def parse(self, tp: Any) -> Any:
        """Validate the JSON value into another type (adapters are cached per type).

        Raises:
            StructuredOutputError: The value does not validate as ``tp``.
        """
        try:
            return _adapter_for(tp).validate_python(_copy(self.raw))
        except ValidationError as exc:
            raise StructuredOutputError(f"structured output does not parse as {tp!r}: {_summarize(exc)}") from None
