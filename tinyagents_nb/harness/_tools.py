"""Tools: typed Python functions the model may call, with runtime-only values hidden from the model.

``@tool`` reads a function's signature once, at decoration: parameters typed as a runtime handle
(``RunContext``, ``StoreRegistry``, ``Store``, ``EventSink``, ``CancellationToken``, ``UsageTracker``,
``CostTracker``, ``CacheRegistry``, ``ToolReporter`` for progress reports) or marked ``Injected[T]`` (the run's app data) are *injected*
from the ``RunContext`` and never appear in the model-visible schema; everything else is validated
by a pydantic ``TypeAdapter`` built once over a generated ``TypedDict``. At call time a model-supplied
value for an injected parameter is discarded before validation, so a model cannot forge one.

Sync functions run in a worker thread by default (``anyio.to_thread.run_sync``) because a slow sync
tool on the event-loop thread would freeze the notebook kernel; ``in_thread=False`` runs them inline
(right for tiny, CPU-cheap tools). Async functions are awaited directly.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import (
    Annotated,
    Any,
    Generic,
    NotRequired,
    ParamSpec,
    Protocol,
    TypeAlias,
    TypeVar,
    Union,
    get_args,
    get_origin,
    overload,
    runtime_checkable,
)

import anyio.to_thread
from pydantic import ConfigDict, PydanticUserError, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from ._cancel import CancellationToken
from ._context import RunContext
from ._cost import CostTracker
from ._errors import ConfigurationError, ToolArgumentsError, ToolDefinitionError
from ._messages import ContentBlock, ToolCall, ToolMessage
from ._model import ToolSchema
from ._sink import EventSink
from ._tool_progress import ToolReporter, current_reporter
from ._tool_schema import _format_errors, _hint_source, _hints, _is_async, _parse_docstring, _strip_titles
from ._usage import UsageTracker
from .stores import CacheRegistry, Store, StoreRegistry

__all__ = ["FunctionTool", "Injected", "Tool", "ToolResult", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
_T = TypeVar("_T")

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_typed_dict: Any = TypedDict  # called with a computed name, which type checkers cannot follow


def _check_name(name: object, error: type[ConfigurationError]) -> None:
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise error(f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-'")


class _InjectedMarker:
    """``Annotated`` metadata meaning "fill this parameter from ``RunContext.data``"."""

    def __repr__(self) -> str:
        return "<injected: RunContext.data>"


_INJECTED = _InjectedMarker()

Injected: TypeAlias = Annotated[_T, _INJECTED]
"""``Injected[MyDeps]`` types a tool parameter as the run's app data (``ctx.data``); hidden from the model."""


# ------------------------------------------------------------------------------------------ results
@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        text: What the model sees.
        is_error: Whether the text reports a failure (the model is told so; the run continues).
        data: The structured, JSON-able value when the tool returned one (for UIs and tests).
        blocks: Extra content for the model after ``text``, e.g. ``ImageRef`` images (a chart a tool drew).
            A model whose profile lacks vision never receives an image: the loop leaves images out for
            it, so ``text`` should say what each image shows.
    """

    text: str
    is_error: bool = False
    data: Any = None
    blocks: Sequence[ContentBlock] = ()

    @classmethod
    def ok(cls, text: str, *, data: Any = None) -> ToolResult:
        return cls(text=text, data=data)

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(text=message, is_error=True)

    def to_message(self, call: ToolCall) -> ToolMessage:
        """The transcript message answering ``call``."""
        return ToolMessage(
            tool_call_id=call.id, name=call.name, text=self.text, is_error=self.is_error, blocks=self.blocks
        )


@runtime_checkable
class Tool(Protocol):
    """Anything the agent loop can offer to a model and call.

    ``schema`` is model-visible, so runtime-only parameters are absent from it; ``call`` receives the
    model's arguments as parsed JSON and raises ``ToolArgumentsError`` when they do not validate.
    """

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def schema(self) -> ToolSchema: ...
    @property
    def timeout_s(self) -> float | None: ...
    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult: ...


# ------------------------------------------------------------------------------------------ injection
_Getter: TypeAlias = Callable[[RunContext[Any]], Any]


_RUNTIME_TYPES: dict[object, _Getter] = {
    RunContext: lambda ctx: ctx,
    StoreRegistry: attrgetter("stores"),
    Store: lambda ctx: ctx.stores.default,
    EventSink: attrgetter("events"),
    CancellationToken: attrgetter("cancellation"),
    UsageTracker: attrgetter("usage"),
    CostTracker: attrgetter("costs"),
    CacheRegistry: attrgetter("cache"),
    ToolReporter: lambda ctx: current_reporter(),
}


def _data_getter(tool_name: str, param: str, hint: object) -> _Getter:
    """Read ``ctx.data``, checking its type when ``hint`` is a plain class (a cheap ``isinstance``)."""
    if not isinstance(hint, type) or hint is object:
        return attrgetter("data")

    def get(ctx: RunContext[Any]) -> Any:
        data = ctx.data
        if not isinstance(data, hint):
            raise ConfigurationError(
                f"tool `{tool_name}` needs run data of type {hint.__name__} for `{param}`, "
                f"but the run's data is {type(data).__name__}",
                hint="pass data=... when invoking the agent",
            )
        return data

    return get


def _injector(tool_name: str, param: str, hint: object) -> _Getter | None:
    """How to fill ``param`` from the context, or ``None`` when the model supplies it."""
    if get_origin(hint) is Annotated:
        base, *metadata = get_args(hint)
        if any(m is _INJECTED for m in metadata):
            return _data_getter(tool_name, param, base)
        hint = base
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):  # `RunContext | None` and friends
        members = [a for a in get_args(hint) if a is not type(None)]
        if len(members) == 1:
            return _injector(tool_name, param, members[0])
        return None
    return _RUNTIME_TYPES.get(origin if origin is not None else hint)


# ------------------------------------------------------------------------------------------ function tools
class FunctionTool(Generic[P, R]):
    """A Python function exposed as a ``Tool``; still directly callable as the original function.

    Built by ``@tool``; everything (signature, injection plan, validator, schema) is worked out here,
    once, so ``call`` only strips, validates, injects and runs.
    """

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        strict: bool = False,
        in_thread: bool | None = None,
        requires_approval: bool | Callable[..., Any] = False,
        idempotent: bool = False,
    ) -> None:
        if isinstance(function, FunctionTool):  # re-wrapping, e.g. to rename: start from the plain function
            function = function.function
        candidate: object = function
        if not callable(candidate) or isinstance(candidate, type):
            raise ToolDefinitionError(f"a tool must be a function, got {type(candidate).__name__}")
        auto_name = getattr(function, "__name__", None)
        if name is None:
            if auto_name == "<lambda>" or not isinstance(auto_name, str):
                raise ToolDefinitionError(f"{function!r} has no usable name; pass tool(..., name='...')")
            name = auto_name
        _check_name(name, ToolDefinitionError)
        limit: object = timeout_s
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0):
            raise ToolDefinitionError(f"timeout_s must be a positive number of seconds or None, got {limit!r}")
        self._is_async = _is_async(function)
        if in_thread and self._is_async:
            raise ToolDefinitionError(f"tool `{name}`: in_thread applies to sync functions only")
        self._function = function
        self._name = name
        self._timeout_s = None if timeout_s is None else float(timeout_s)
        self._strict = bool(strict)
        self._in_thread = not self._is_async and in_thread is not False
        if not (isinstance(requires_approval, bool) or callable(requires_approval)):
            raise ToolDefinitionError(f"tool `{name}`: requires_approval must be a bool or a callable")
        self.requires_approval = requires_approval
        """``True``, or a per-call rule ``(ctx, arguments) -> True | False | "ask" | "approve" | "deny"``."""
        self.idempotent = bool(idempotent)
        """Safe to run again when a resumed run finds this call started but unfinished."""
        functools.update_wrapper(self, function, updated=())

        doc_description, param_docs = _parse_docstring(getattr(function, "__doc__", None))
        self._description = doc_description if description is None else description
        self._analyse(function, param_docs)

    def _analyse(self, function: Callable[..., Any], param_docs: Mapping[str, str]) -> None:
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError) as exc:
            raise ToolDefinitionError(f"cannot read the signature of {function!r}: {exc}") from exc
        hints = _hints(function, _hint_source(function))
        fields: dict[str, Any] = {}
        defaults: dict[str, Any] = {}
        injectors: list[tuple[str, _Getter]] = []
        posonly: list[tuple[str, Any]] = []
        for param in signature.parameters.values():
            where = f"tool `{self._name}`, parameter `{param.name}`"
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(f"{where}: *args/**kwargs cannot be described to a model")
            if param.name not in hints:
                raise ToolDefinitionError(f"{where} needs a type annotation")
            if isinstance(param.default, FieldInfo):
                raise ToolDefinitionError(f"{where}: write `x: Annotated[T, Field(...)] = default`, not `= Field(...)`")
            if param.kind is param.POSITIONAL_ONLY:
                posonly.append((param.name, param.default))
            hint = hints[param.name]
            getter = _injector(self._name, param.name, hint)
            if getter is not None:
                injectors.append((param.name, getter))
            elif param.default is param.empty:
                fields[param.name] = hint
            else:
                fields[param.name] = NotRequired[hint]
                defaults[param.name] = param.default
        self._injectors = tuple(injectors)
        self._injected = frozenset(n for n, _ in injectors)
        self._posonly = tuple(posonly)
        try:
            arguments_type: Any = _typed_dict(f"{self._name}_arguments", fields)
            arguments_type.__pydantic_config__ = ConfigDict(extra="forbid")
            self._validator: TypeAdapter[dict[str, Any]] = TypeAdapter(arguments_type)
            raw = self._validator.json_schema()
            self._validate = self._validator.validator.validate_python  # skip TypeAdapter's wrapper per call
        except (PydanticUserError, TypeError, NameError) as exc:
            raise ToolDefinitionError(f"tool `{self._name}`: a parameter type cannot be validated: {exc}") from exc
        properties: dict[str, Any] = _strip_titles(raw.get("properties", {}))
        for pname, prop in properties.items():
            if pname in param_docs and "description" not in prop:
                prop["description"] = param_docs[pname]
            if pname in defaults and "default" not in prop:
                try:
                    prop["default"] = to_jsonable_python(defaults[pname])
                except PydanticSerializationError:
                    pass  # a default the model cannot see is still applied by Python
        parameters: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "required": list(raw.get("required", [])),
            "additionalProperties": False,
        }
        if "$defs" in raw:
            parameters["$defs"] = _strip_titles(raw["$defs"])
        self._schema = ToolSchema(
            name=self._name, description=self._description, parameters=parameters, strict=self._strict
        )

    # ---------------------------------------------------------------------------- Tool protocol
    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def schema(self) -> ToolSchema:
        """The model-visible schema; built once, the same object every turn (do not mutate it)."""
        return self._schema

    @property
    def timeout_s(self) -> float | None:
        return self._timeout_s

    @property
    def function(self) -> Callable[P, R]:
        """The decorated function, unchanged."""
        return self._function

    @property
    def injected_parameters(self) -> tuple[str, ...]:
        """Names of the parameters filled from the run context (absent from ``schema``)."""
        return tuple(n for n, _ in self._injectors)

    @property
    def strict(self) -> bool:
        return self._strict

    @property
    def in_thread(self) -> bool:
        """Whether the function runs in a worker thread (sync functions, unless ``in_thread=False``)."""
        return self._in_thread

    def validate_arguments(self, arguments: Mapping[str, Any]) -> None:
        """Raise ``ToolArgumentsError`` when ``arguments`` would not validate (e.g. edited ones, before approval)."""
        try:
            self._validate({k: v for k, v in arguments.items() if k not in self._injected})
        except ValidationError as exc:
            raise ToolArgumentsError(_format_errors(self._name, exc), tool_name=self._name) from exc

    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult:
        """Validate the model's arguments, inject runtime values, run the function and wrap its result.

        Raises:
            ToolArgumentsError: The arguments do not validate; the message is written for the model.
        """
        injected = self._injected
        if injected and not injected.isdisjoint(arguments):
            arguments = {k: v for k, v in arguments.items() if k not in injected}  # never trust the model here
        try:
            values: dict[str, Any] = self._validate(arguments)
        except ValidationError as exc:
            raise ToolArgumentsError(_format_errors(self._name, exc), tool_name=self._name) from exc
        for pname, get in self._injectors:
            values[pname] = get(ctx)
        args = [values.pop(pname, default) for pname, default in self._posonly] if self._posonly else ()
        function: Callable[..., Any] = self._function
        if self._is_async:
            result = await function(*args, **values)
        else:
            if self._in_thread:
                # abandon_on_cancel: a timeout or the run's deadline ends the wait (the thread finishes alone)
                result = await anyio.to_thread.run_sync(
                    functools.partial(function, *args, **values), abandon_on_cancel=True
                )
            else:
                result = function(*args, **values)
            if inspect.iscoroutine(result):  # a sync wrapper around an async function
                result = await result
        return self._to_result(result)

    def _to_result(self, value: object) -> ToolResult:
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, str):
            return ToolResult(text=value)
        try:
            data = to_jsonable_python(value)
        except PydanticSerializationError as exc:
            raise TypeError(
                f"tool `{self._name}` returned a {type(value).__name__}, which is not JSON-serializable; "
                "return a str, a JSON-able value or a ToolResult"
            ) from exc
        # Same text as json.dumps(data, ensure_ascii=False, separators=(",", ":")), ten times faster.
        return ToolResult(text=to_json(data).decode(), data=data)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool(name={self._name!r}, parameters={list(self._schema.parameters['properties'])!r})"


@overload
def tool(
    function: Callable[P, R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    strict: bool = False,
    in_thread: bool | None = None,
    requires_approval: bool | Callable[..., Any] = False,
    idempotent: bool = False,
) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    strict: bool = False,
    in_thread: bool | None = None,
    requires_approval: bool | Callable[..., Any] = False,
    idempotent: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    strict: bool = False,
    in_thread: bool | None = None,
    requires_approval: bool | Callable[..., Any] = False,
    idempotent: bool = False,
) -> Any:
    """Turn a typed function (sync or async) into a ``FunctionTool``; usable bare or with options.

    Args:
        function: The function, when used bare (``@tool``) or called directly (``tool(fn)``).
        name: The model-facing name; defaults to the function's name.
        description: The model-facing description; defaults to the docstring without its Args/Returns.
        timeout_s: A per-call time limit the agent loop enforces (``None``: none of its own).
        strict: Ask providers for strict schema adherence (``ToolSchema.strict``).
        in_thread: Run a sync function in a worker thread (default) or inline (``False``).
        requires_approval: Wait for a person before each call (``True``), or decide per call with
            ``(ctx, arguments) -> True | False | "ask" | "approve" | "deny"`` (see ``ApprovalDesk``).
        idempotent: Running the call twice is harmless, so a resumed run may re-run a call that a crash
            interrupted (otherwise it is skipped with a note to the model).

    Raises:
        ToolDefinitionError: The function cannot be described to a model (see the module docstring).
    """

    def decorate(fn: Callable[..., Any]) -> FunctionTool[..., Any]:
        return FunctionTool(
            fn,
            name=name,
            description=description,
            timeout_s=timeout_s,
            strict=strict,
            in_thread=in_thread,
            requires_approval=requires_approval,
            idempotent=idempotent,
        )

    return decorate if function is None else decorate(function)
