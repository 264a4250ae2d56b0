"""Tools: schema generation, runtime injection, validation, execution and the registry.

This module uses ``from __future__ import annotations`` on purpose: every tool below has string
annotations, which ``@tool`` must resolve.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from tinyagents_nb.harness import (
    CancellationToken,
    ConfigurationError,
    CostTracker,
    EventSink,
    FunctionTool,
    Injected,
    RunContext,
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolDefinitionError,
    ToolMessage,
    ToolRegistry,
    ToolResult,
    ToolSchema,
    UsageTracker,
    tool,
)
from tinyagents_nb.harness.stores import CacheRegistry, Store, StoreRegistry


@dataclass
class Deps:
    user: str


class Address(BaseModel):
    street: str
    zip_code: str | None = None


class Point(BaseModel):
    x: int
    y: int


class Opaque:
    """Not something pydantic can validate or describe."""


# ------------------------------------------------------------------------------------------ tools under test
@tool
def book(
    city: str,
    address: Address,
    nights: Annotated[int, Field(description="How many nights.", ge=1, le=30)],
    room: Literal["single", "double"] = "double",
    guests: list[int] | None = None,
    note: Optional[str] = None,  # noqa: UP045 - the Optional spelling must work too
    budget: float = 99.5,
) -> str:
    """Book a hotel room.

    Use this only after the user confirmed the dates.

    Args:
        city: The city to book in.
        address (Address): Where the guest lives,
            used for the invoice.
        nights: Ignored, because the Field description wins.
        room: Room type.

    Returns:
        A confirmation code.

    Raises:
        ValueError: Never, in this test.
    """
    return f"{city}:{nights}:{room}"


SEEN: list[dict[str, Any]] = []


@tool(in_thread=False)
def everything(
    query: str,
    ctx: RunContext[Deps],
    bare_ctx: RunContext,  # type: ignore[type-arg]
    maybe_ctx: RunContext[Deps] | None,
    stores: StoreRegistry,
    store: Store,
    events: EventSink,
    cancellation: CancellationToken,
    usage: UsageTracker,
    costs: CostTracker,
    cache: CacheRegistry,
    deps: Injected[Deps],
) -> str:
    """Record what was injected."""
    SEEN.append(dict(locals()))
    return "ok"


@pytest.fixture
def ctx() -> RunContext[Deps]:
    return RunContext(data=Deps(user="ana"))


# ------------------------------------------------------------------------------------------ schema
def test_rich_function_schema() -> None:
    assert book.name == "book"
    assert book.schema.name == "book"
    assert book.schema.strict is False
    assert book.schema.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city to book in."},
            "address": {"$ref": "#/$defs/Address", "description": "Where the guest lives, used for the invoice."},
            "nights": {"type": "integer", "minimum": 1, "maximum": 30, "description": "How many nights."},
            "room": {"type": "string", "enum": ["single", "double"], "default": "double", "description": "Room type."},
            "guests": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}], "default": None},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "budget": {"type": "number", "default": 99.5},
        },
        "required": ["city", "address", "nights"],
        "additionalProperties": False,
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "zip_code": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                },
                "required": ["street"],
            }
        },
    }


def test_docstring_description_drops_args_returns_and_raises() -> None:
    assert book.description == "Book a hotel room.\n\nUse this only after the user confirmed the dates."
    assert book.schema.description == book.description
    assert book.__doc__ is not None
    assert "Args:" in book.__doc__  # the notebook's help() still shows the full docstring


def test_docstring_keeps_other_sections_and_handles_no_docstring() -> None:
    @tool
    def f(x: int) -> int:
        """Do it.

        Args:
            x: The x.

        Example:
            f(1)
        """
        return x

    @tool
    def g(x: int) -> int:
        return x

    assert f.description == "Do it.\n\nExample:\n    f(1)"
    assert f.schema.parameters["properties"]["x"]["description"] == "The x."
    assert g.description == ""
    assert g.schema.parameters["properties"] == {"x": {"type": "integer"}}


def test_options_override_name_description_and_set_strict_and_timeout() -> None:
    @tool(name="renamed", description="Custom.", strict=True, timeout_s=2)
    def f(x: int) -> int:
        """Docstring text."""
        return x

    assert (f.name, f.description, f.timeout_s, f.strict) == ("renamed", "Custom.", 2.0, True)
    assert f.schema == ToolSchema(
        name="renamed",
        description="Custom.",
        strict=True,
        parameters={
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    )
    assert tool(f.function).timeout_s is None


def test_property_named_title_survives_title_stripping() -> None:
    @tool
    def note(title: str, body: Annotated[str, Field(title="Body", description="Text.")] = "") -> str:
        return title

    props = note.schema.parameters["properties"]
    assert props == {"title": {"type": "string"}, "body": {"type": "string", "description": "Text.", "default": ""}}
    assert note.schema.parameters["required"] == ["title"]


def test_no_parameter_tool_schema() -> None:
    @tool
    def now() -> str:
        return "12:00"

    assert now.schema.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


@pytest.mark.anyio
async def test_schema_is_stable_across_calls(ctx: RunContext[Deps]) -> None:
    first = book.schema
    snapshot = {**first.parameters}
    await book.call(ctx, {"city": "Oslo", "address": {"street": "a"}, "nights": 2})
    assert book.schema is first
    assert book.schema.parameters == snapshot


# ------------------------------------------------------------------------------------------ injection
def test_injected_parameters_are_absent_from_schema() -> None:
    assert everything.schema.parameters["properties"] == {"query": {"type": "string"}}
    assert everything.schema.parameters["required"] == ["query"]
    assert everything.injected_parameters == (
        "ctx",
        "bare_ctx",
        "maybe_ctx",
        "stores",
        "store",
        "events",
        "cancellation",
        "usage",
        "costs",
        "cache",
        "deps",
    )
    assert book.injected_parameters == ()


@pytest.mark.anyio
async def test_every_runtime_value_is_injected_from_the_context(ctx: RunContext[Deps]) -> None:
    SEEN.clear()
    result = await everything.call(ctx, {"query": "q"})
    assert result == ToolResult(text="ok")
    seen = SEEN[0]
    assert seen["query"] == "q"
    assert seen["ctx"] is ctx
    assert seen["bare_ctx"] is ctx
    assert seen["maybe_ctx"] is ctx
    assert seen["stores"] is ctx.stores
    assert seen["store"] is ctx.stores.default
    assert seen["events"] is ctx.events
    assert seen["cancellation"] is ctx.cancellation
    assert seen["usage"] is ctx.usage
    assert seen["costs"] is ctx.costs
    assert seen["cache"] is ctx.cache
    assert seen["deps"] is ctx.data


@pytest.mark.anyio
async def test_model_supplied_values_for_injected_params_are_discarded(ctx: RunContext[Deps]) -> None:
    SEEN.clear()
    forged = {"query": "q", "deps": {"user": "mallory"}, "ctx": "evil", "store": 42, "cancellation": None}
    await everything.call(ctx, forged)
    assert SEEN[0]["deps"] is ctx.data
    assert SEEN[0]["ctx"] is ctx
    assert SEEN[0]["store"] is ctx.stores.default
    assert SEEN[0]["cancellation"] is ctx.cancellation
    assert forged["ctx"] == "evil"  # the caller's mapping is not mutated


@pytest.mark.anyio
async def test_injected_data_of_the_wrong_type_is_a_configuration_error() -> None:
    @tool
    async def whoami(deps: Injected[Deps]) -> str:
        return deps.user

    assert (await whoami.call(RunContext(data=Deps(user="ana")), {})).text == "ana"
    with pytest.raises(ConfigurationError, match=r"needs run data of type Deps for `deps`.*NoneType"):
        await whoami.call(RunContext(), {})


# ------------------------------------------------------------------------------------------ validation
@pytest.mark.anyio
async def test_invalid_arguments_give_a_model_friendly_error(ctx: RunContext[Deps]) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        await book.call(ctx, {"city": "Oslo", "address": {"zip_code": 1}, "nights": 0, "extra": 1})
    message = str(info.value)
    assert message.startswith("invalid arguments for tool `book`: ")
    assert "address.street: Field required" in message
    assert "nights: Input should be greater than or equal to 1 (got 0)" in message
    assert "extra: Extra inputs are not permitted" in message
    assert "pydantic.dev" not in message
    assert "For further information" not in message
    assert info.value.tool_name == "book"


@pytest.mark.anyio
async def test_list_item_errors_name_the_index_and_long_inputs_are_truncated(ctx: RunContext[Deps]) -> None:
    with pytest.raises(ToolArgumentsError, match=r"guests\[1\]: Input should be a valid integer"):
        await book.call(ctx, {"city": "x", "address": {"street": "s"}, "nights": 1, "guests": [1, "two"]})
    with pytest.raises(ToolArgumentsError) as info:
        await book.call(ctx, {"city": "x" * 500, "address": {"street": "s"}, "nights": 1, "room": "y" * 500})
    assert "room: Input should be 'single' or 'double'" in str(info.value)
    assert len(str(info.value)) < 200


@pytest.mark.anyio
async def test_arguments_are_coerced_and_defaults_applied(ctx: RunContext[Deps]) -> None:
    @tool
    def echo(n: int, point: Point, tags: list[str] = ["a"], flag: bool = False) -> dict[str, Any]:  # noqa: B006
        return {"n": n, "point": point, "tags": tags, "flag": flag}

    result = await echo.call(ctx, {"n": "3", "point": {"x": 1, "y": "2"}})
    assert result.data == {"n": 3, "point": {"x": 1, "y": 2}, "tags": ["a"], "flag": False}


# ------------------------------------------------------------------------------------------ execution
@pytest.mark.anyio
async def test_sync_tool_runs_in_a_worker_thread_by_default(ctx: RunContext[Deps]) -> None:
    @tool
    def where() -> int:
        return threading.get_ident()

    @tool(in_thread=False)
    def inline() -> int:
        return threading.get_ident()

    assert where.in_thread is True
    assert inline.in_thread is False
    assert (await where.call(ctx, {})).data != threading.get_ident()
    assert (await inline.call(ctx, {})).data == threading.get_ident()


@pytest.mark.anyio
async def test_async_tool_is_awaited_on_the_loop_thread(ctx: RunContext[Deps]) -> None:
    @tool
    async def where(delay: float = 0) -> int:
        return threading.get_ident()

    assert where.in_thread is False
    assert (await where.call(ctx, {})).data == threading.get_ident()


@pytest.mark.anyio
async def test_positional_only_parameters_work(ctx: RunContext[Deps]) -> None:
    @tool
    def power(base: int, exponent: int = 2, /, *, ctx: RunContext[Deps], label: str = "") -> str:
        return f"{label}{base**exponent}:{ctx.data.user}"

    assert power.schema.parameters["required"] == ["base"]
    assert (await power.call(ctx, {"base": 3})).text == "9:ana"
    assert (await power.call(ctx, {"base": 2, "exponent": 5, "label": "="})).text == "=32:ana"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "text", "data"),
    [
        ("plain text", "plain text", None),
        (
            {"city": "Zürich", "n": [1, 2.5, None]},
            '{"city":"Zürich","n":[1,2.5,null]}',
            {"city": "Zürich", "n": [1, 2.5, None]},
        ),
        (Point(x=1, y=2), '{"x":1,"y":2}', {"x": 1, "y": 2}),
        (Deps(user="ana"), '{"user":"ana"}', {"user": "ana"}),
        (7, "7", 7),
        (None, "null", None),
    ],
)
async def test_return_values_are_converted(ctx: RunContext[Deps], value: object, text: str, data: object) -> None:
    @tool(in_thread=False)
    def give() -> object:
        return value

    result = await give.call(ctx, {})
    assert result == ToolResult(text=text, data=data)


@pytest.mark.anyio
async def test_tool_result_is_passed_through_and_unserializable_values_fail(ctx: RunContext[Deps]) -> None:
    custom = ToolResult.error("nope")

    @tool
    async def give() -> ToolResult:
        return custom

    @tool
    async def bad() -> object:
        return Opaque()

    assert await give.call(ctx, {}) is custom
    with pytest.raises(TypeError, match=r"tool `bad` returned a Opaque, which is not JSON-serializable"):
        await bad.call(ctx, {})


@pytest.mark.anyio
async def test_user_exceptions_propagate_unchanged(ctx: RunContext[Deps]) -> None:
    boom = LookupError("no such city")

    @tool
    def sync_fail(city: str) -> str:
        raise boom

    @tool
    async def async_fail(city: str) -> str:
        raise boom

    for failing in (sync_fail, async_fail):
        with pytest.raises(LookupError) as info:
            await failing.call(ctx, {"city": "x"})
        assert info.value is boom


@pytest.mark.anyio
async def test_sync_wrapper_returning_a_coroutine_is_awaited(ctx: RunContext[Deps]) -> None:
    async def inner(x: int) -> str:
        return f"inner {x}"

    def wrapper(x: int) -> Any:
        return inner(x)

    assert (await tool(wrapper).call(ctx, {"x": 1})).text == "inner 1"


@pytest.mark.anyio
async def test_callable_objects_and_partials(ctx: RunContext[Deps]) -> None:
    class Greeter:
        async def __call__(self, name: str, deps: Injected[Deps]) -> str:
            return f"hi {name} from {deps.user}"

    def scale(x: int, factor: int) -> int:
        return x * factor

    greet = tool(Greeter(), name="greet")
    double = tool(functools.partial(scale, factor=2), name="double")
    assert greet.schema.parameters["properties"] == {"name": {"type": "string"}}
    assert (await greet.call(ctx, {"name": "bo"})).text == "hi bo from ana"
    assert (await double.call(ctx, {"x": 4})).data == 8


# ------------------------------------------------------------------------------------------ the wrapper
@pytest.mark.anyio
async def test_decorated_function_stays_directly_callable() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    assert book("Oslo", Address(street="s"), 3) == "Oslo:3:double"
    assert await add(1, 2) == 3
    assert book.function.__name__ == "book"
    assert list(inspect.signature(book).parameters)[:3] == ["city", "address", "nights"]
    assert isinstance(book, Tool)
    assert isinstance(book, FunctionTool)
    assert repr(add) == "FunctionTool(name='add', parameters=['a', 'b'])"


def test_annotations_in_this_module_are_strings() -> None:
    assert book.function.__annotations__["city"] == "str"
    assert everything.function.__annotations__["deps"] == "Injected[Deps]"


def test_unresolvable_return_annotation_is_tolerated() -> None:
    def f(x: int) -> NotDefinedAnywhere:  # type: ignore[name-defined]  # noqa: F821
        return x

    assert tool(f).schema.parameters["properties"] == {"x": {"type": "integer"}}


# ------------------------------------------------------------------------------------------ bad definitions
def _unannotated(x, y: int) -> int:  # type: ignore[no-untyped-def]
    return y


def _star_args(*args: int) -> int:
    return 0


def _star_kwargs(**kwargs: int) -> int:
    return 0


def _opaque(thing: Opaque) -> str:
    return ""


def _unresolvable(x: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
    return ""


async def _async_fn(x: int) -> int:
    return x


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: tool(_unannotated), r"parameter `x` needs a type annotation"),
        (lambda: tool(_star_args), r"\*args/\*\*kwargs"),
        (lambda: tool(_star_kwargs), r"\*args/\*\*kwargs"),
        (
            lambda: tool(42),  # type: ignore[call-overload]
            r"a tool must be a function, got int",
        ),
        (lambda: tool(Deps), r"a tool must be a function, got type"),
        (lambda: tool(lambda x: x), r"no usable name"),
        (lambda: tool(functools.partial(_async_fn, 1)), r"no usable name"),
        (lambda: tool(_async_fn, name="has space"), r"invalid tool name 'has space'"),
        (lambda: tool(_async_fn, name="x" * 65), r"invalid tool name"),
        (lambda: tool(_async_fn, name=""), r"invalid tool name"),
        (lambda: tool(_async_fn, timeout_s=0), r"timeout_s must be a positive number"),
        (lambda: tool(_async_fn, timeout_s=True), r"timeout_s must be a positive number"),
        (lambda: tool(_async_fn, in_thread=True), r"in_thread applies to sync functions only"),
        (lambda: tool(_opaque), r"tool `_opaque`: a parameter type cannot be validated"),
        (lambda: tool(_unresolvable), r"cannot resolve the annotations"),
    ],
)
def test_bad_definitions_raise_at_decoration(make: Any, match: str) -> None:
    with pytest.raises(ToolDefinitionError, match=match):
        make()


def _field_default(x: int = Field(3, ge=0)) -> int:
    return x


def test_field_as_default_is_rejected_with_a_hint() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Annotated\[T, Field\(\.\.\.\)\] = default"):
        tool(_field_default)


@pytest.mark.anyio
async def test_rewrapping_a_tool_starts_from_its_function(ctx: RunContext[Deps]) -> None:
    renamed = tool(book, name="reserve", description="Reserve.")
    assert renamed.function is book.function
    assert renamed.schema.parameters == book.schema.parameters
    assert (renamed.name, book.name) == ("reserve", "book")
    result = await renamed.call(ctx, {"city": "Rome", "address": {"street": "s"}, "nights": 1})
    assert result.text == "Rome:1:double"


def test_lambda_with_a_name_is_fine() -> None:
    four = tool(lambda: 4, name="four")
    assert four.name == "four"
    assert four() == 4


# ------------------------------------------------------------------------------------------ ToolResult
def test_tool_result_constructors_and_message() -> None:
    call = ToolCall(id="c1", name="book", arguments={})
    assert ToolResult.ok("fine", data={"a": 1}) == ToolResult(text="fine", data={"a": 1})
    assert ToolResult.error("bad") == ToolResult(text="bad", is_error=True)
    assert ToolResult.error("bad").to_message(call) == ToolMessage(
        tool_call_id="c1", name="book", text="bad", is_error=True
    )


# ------------------------------------------------------------------------------------------ registry
class Custom:
    """A hand-written Tool (not a FunctionTool)."""

    name = "custom"
    description = "Hand made."
    schema = ToolSchema(name="custom", description="Hand made.")
    timeout_s = None

    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult.ok("custom")


def zeta(x: int) -> int:
    """Last alphabetically."""
    return x


def test_registry_wraps_functions_and_sorts() -> None:
    registry = ToolRegistry([zeta, book, Custom()])
    assert len(registry) == 3
    assert registry.names() == ["book", "custom", "zeta"]
    assert [t.name for t in registry] == ["book", "custom", "zeta"]
    assert isinstance(registry["zeta"], FunctionTool)
    assert registry["book"] is book
    assert "zeta" in registry
    assert "nope" not in registry
    assert registry.get("nope") is None
    assert [s.name for s in registry.schemas()] == ["book", "custom", "zeta"]
    assert repr(registry) == "ToolRegistry(book, custom, zeta)"


def test_registry_schemas_are_cached_until_the_registry_changes() -> None:
    registry = ToolRegistry([zeta])
    first = registry.schemas()
    assert registry.schemas() is first
    registry.register(book)
    second = registry.schemas()
    assert second is not first
    assert [s.name for s in second] == ["book", "zeta"]
    assert registry.schemas() is second
    registry.register(tool(zeta, description="new"), replace=True)
    third = registry.schemas()
    assert third[1].description == "new"
    assert registry.unregister("book") is book
    assert [s.name for s in registry.schemas()] == ["zeta"]


def test_registry_rejects_duplicates_and_non_tools() -> None:
    registry = ToolRegistry([zeta])
    with pytest.raises(ConfigurationError, match="already registered") as info:
        registry.register(zeta)
    assert info.value.hint == "pass replace=True to swap it"
    with pytest.raises(ConfigurationError, match="expected a Tool or a function"):
        registry.register(3)  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError):
        ToolRegistry([_unannotated])

    class Mismatch(Custom):
        schema = ToolSchema(name="other")

    with pytest.raises(ConfigurationError, match="has a schema named 'other'"):
        registry.register(Mismatch())


def test_registry_lookup_errors_and_unknown_tool_message() -> None:
    registry = ToolRegistry([zeta, book])
    with pytest.raises(KeyError, match=r"no tool named 'nope'; registered: book, zeta"):
        registry["nope"]
    with pytest.raises(KeyError):
        registry.unregister("nope")
    assert registry.unknown_tool_message("nope", {"a": 1}) == "unknown tool `nope`; valid tools: book, zeta"
    assert ToolRegistry().unknown_tool_message("x") == "unknown tool `x`; no tools are available"


@pytest.mark.anyio
async def test_registry_tools_are_callable_through_the_protocol(ctx: RunContext[Deps]) -> None:
    registry = ToolRegistry([zeta, Custom()])
    assert (await registry["zeta"].call(ctx, {"x": 5})).data == 5
    assert (await registry["custom"].call(ctx, {})).text == "custom"
