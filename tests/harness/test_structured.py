from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it for TypedDicts on Python < 3.12

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    StructuredOutputError,
    SystemMessage,
    ToolCall,
    ToolSchema,
    UserMessage,
)
from tinyagents_nb.harness._structured import schema_errors
from tinyagents_nb.harness._structured_extract import parse_json_lenient
from tinyagents_nb.harness.models import (
    OutputSpec,
    ResponseFormat,
    StructuredOutput,
    StructuredStrategy,
    extract_structured,
    is_structured_call,
    prepare_request,
    strategy_for_profile,
)


class City(BaseModel):
    """A city and its population."""

    name: str
    population: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Movie(TypedDict):
    title: str
    year: int


class Node(BaseModel):
    value: int
    children: list[Node] = []


SEARCH = ToolSchema(name="search", description="Search.", parameters={"type": "object", "properties": {}})


def reply(text: str = "", *calls: ToolCall) -> ModelResponse:
    return ModelResponse(message=AssistantMessage(text=text, tool_calls=calls))


# ------------------------------------------------------------------------------------------ OutputSpec.of
def test_spec_from_pydantic_model() -> None:
    spec = OutputSpec.of(City)
    assert spec.name == "City"
    assert not spec.wrapped
    assert spec.schema["type"] == "object"
    assert spec.schema["required"] == ["name", "population"]
    assert spec.output_type is City
    assert spec.adapter is not None
    assert spec.strategy == "auto"
    assert "schema" not in repr(spec)  # schemas can be large; keep reprs readable


def test_spec_from_dataclass_and_typed_dict() -> None:
    point, movie = OutputSpec.of(Point), OutputSpec.of(Movie)
    assert (point.name, movie.name) == ("Point", "Movie")
    assert not point.wrapped
    assert not movie.wrapped
    assert set(movie.schema["properties"]) == {"title", "year"}


def test_spec_from_list_type_is_wrapped() -> None:
    spec = OutputSpec.of(list[int])
    assert spec.name == "output"
    assert spec.wrapped
    assert spec.schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "integer"}}},
        "required": ["result"],
        "additionalProperties": False,
    }


def test_spec_from_optional_model_moves_defs_to_the_wrapper() -> None:
    spec = OutputSpec.of(Optional[City])  # noqa: UP045 - the typing form is what users pass too
    assert spec.wrapped
    assert "City" in spec.schema["$defs"]
    assert "$defs" not in spec.schema["properties"]["result"]
    out = extract_structured(reply('{"result": {"name": "Oslo", "population": 7}}'), spec, "native")
    assert out is not None
    assert out.value == City(name="Oslo", population=7)


def test_spec_from_recursive_model_inlines_its_root() -> None:
    spec = OutputSpec.of(Node)
    assert not spec.wrapped
    assert spec.schema["type"] == "object"
    assert "Node" in spec.schema["$defs"]
    out = extract_structured(reply('{"value": 1, "children": [{"value": 2}]}'), spec, "native")
    assert out is not None
    assert out.value.children[0].value == 2


def test_spec_from_raw_schema_is_a_private_copy() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    spec = OutputSpec.of(schema, name="count", description="How many.")
    schema["properties"]["n"]["type"] = "string"
    assert spec.schema["properties"]["n"]["type"] == "integer"
    assert spec.adapter is None
    assert spec.output_type is None
    assert (spec.name, spec.description) == ("count", "How many.")


def test_spec_from_non_object_raw_schema_is_wrapped() -> None:
    spec = OutputSpec.of({"type": "array", "items": {"type": "string"}})
    assert spec.wrapped
    assert spec.name == "output"
    out = extract_structured(reply('{"result": ["a", "b"]}'), spec, "json_object")
    assert out is not None
    assert out.value == ["a", "b"]


@pytest.mark.parametrize(
    ("output", "kwargs", "match"),
    [
        (City(name="x", population=1), {}, "cannot build an output schema"),
        (5, {}, "cannot build an output schema"),
        ({"type": "number", "maximum": float("nan")}, {}, "not JSON"),
        ({"type": "object", "x": object()}, {}, "not JSON"),
        (City, {"name": "has space"}, "output name"),
        (City, {"name": ""}, "output name"),
        (City, {"name": "x" * 65}, "output name"),
        (City, {"strategy": "magic"}, "strategy"),
    ],
)
def test_spec_rejects_bad_input(output: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        OutputSpec.of(output, **kwargs)


def test_spec_of_a_spec_applies_only_the_overrides() -> None:
    spec = OutputSpec.of(City)
    assert OutputSpec.of(spec) is spec
    renamed = OutputSpec.of(spec, name="town", strategy="native")
    assert (renamed.name, renamed.strategy, renamed.adapter) == ("town", "native", spec.adapter)
    assert renamed.tool_schema.name == "town"
    assert renamed.response_format.name == "town"


def test_spec_derives_request_parts_once() -> None:
    spec = OutputSpec.of(City, name="city", description="Pick the largest.", strict=True)
    assert spec.response_format == ResponseFormat(type="json_schema", name="city", schema=spec.schema, strict=True)
    assert spec.tool_schema == ToolSchema(
        name="city",
        description="Return the result as `city`. Pick the largest.",
        parameters=spec.schema,
        strict=True,
    )
    assert json.dumps(spec.schema, separators=(",", ":")) in spec.instruction
    assert "Pick the largest." in spec.instruction


# ------------------------------------------------------------------------------------------ strategy
def profile(structured: Any, *, tools: bool = True) -> ModelProfile:
    return ModelProfile(name="m", provider="p", structured_output=structured, supports_tools=tools)


@pytest.mark.parametrize(
    ("prof", "requested", "expected"),
    [
        (None, "auto", "tool"),
        (profile("native"), "auto", "native"),
        (profile("native", tools=False), "auto", "native"),
        (profile("tool"), "auto", "tool"),
        (profile("tool", tools=False), "auto", "json_object"),
        (profile("json_object"), "auto", "json_object"),
        (profile("none"), "auto", "tool"),
        (profile("none", tools=False), "auto", "json_object"),
        (profile("native"), "tool", "tool"),
        (None, "json_object", "json_object"),
        (profile("tool"), "native", "native"),
    ],
)
def test_strategy_for_profile(prof: ModelProfile | None, requested: Any, expected: StructuredStrategy) -> None:
    assert strategy_for_profile(prof, requested) == expected


def test_strategy_for_profile_rejects_unknown_strategy() -> None:
    with pytest.raises(ConfigurationError):
        strategy_for_profile(None, "xml")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ prepare_request
def request(*, tools: tuple[ToolSchema, ...] = (), system: bool = True) -> ModelRequest:
    messages = [SystemMessage(text="Be brief.")] if system else []
    return ModelRequest(messages=[*messages, UserMessage(text="Largest city?")], tools=tools, temperature=0.1)


def test_prepare_native_sets_the_response_format_without_mutation() -> None:
    spec = OutputSpec.of(City)
    original = request(tools=(SEARCH,))
    snapshot = dataclasses.replace(original, messages=list(original.messages))
    prepared = prepare_request(original, spec, "native")
    assert original == snapshot
    assert prepared.response_format == ResponseFormat(type="json_schema", name="City", schema=spec.schema, strict=False)
    assert prepared.tools == original.tools
    assert prepared.tool_choice is None
    assert prepared.temperature == 0.1


@pytest.mark.parametrize("system", [True, False])
def test_prepare_json_object_adds_one_instruction_after_leading_system(system: bool) -> None:
    spec = OutputSpec.of(City)
    original = request(system=system)
    messages_before = list(original.messages)
    prepared = prepare_request(original, spec, "json_object")
    assert list(original.messages) == messages_before
    assert prepared.response_format == ResponseFormat(type="json_object")
    at = 1 if system else 0
    note = prepared.messages[at]
    assert isinstance(note, SystemMessage)
    assert '"population"' in note.text
    assert len(prepared.messages) == len(messages_before) + 1
    assert prepared.messages[-1] == messages_before[-1]
    again = prepare_request(prepared, spec, "json_object")
    assert list(again.messages) == list(prepared.messages)  # idempotent


def test_prepare_tool_forces_the_schema_tool_when_alone() -> None:
    spec = OutputSpec.of(City)
    original = dataclasses.replace(request(), response_format=ResponseFormat(type="json_object"))
    prepared = prepare_request(original, spec, "tool")
    assert list(prepared.tools) == [spec.tool_schema]
    assert prepared.tool_choice == "City"
    assert prepared.response_format is None
    assert original.tools == ()
    assert original.response_format == ResponseFormat(type="json_object")
    again = prepare_request(prepared, spec, "tool")
    assert list(again.tools) == [spec.tool_schema]
    assert again.tool_choice == "City"


def test_prepare_tool_does_not_force_with_real_tools() -> None:
    spec = OutputSpec.of(City)
    original = dataclasses.replace(request(tools=(SEARCH,)), tool_choice="auto")
    prepared = prepare_request(original, spec, "tool")
    assert list(prepared.tools) == [SEARCH, spec.tool_schema]
    assert prepared.tool_choice == "auto"
    assert list(original.tools) == [SEARCH]
    assert list(prepare_request(prepared, spec, "tool").tools) == [SEARCH, spec.tool_schema]


def test_prepare_tool_rejects_a_name_clash() -> None:
    spec = OutputSpec.of(City, name="search")
    with pytest.raises(ConfigurationError, match="already exists"):
        prepare_request(request(tools=(SEARCH,)), spec, "tool")


def test_prepare_rejects_unknown_strategy() -> None:
    with pytest.raises(ConfigurationError):
        prepare_request(request(), OutputSpec.of(City), "xml")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ extraction
CLEAN = '{"name": "Tokyo", "population": 37000000}'


@pytest.mark.parametrize(
    "text",
    [
        CLEAN,
        f"  \n{CLEAN}\n ",
        f"```json\n{CLEAN}\n```",
        f"```\n{CLEAN}\n```",
        f"Here you go:\n```JSON\n{CLEAN}\n```\nAnything else?",
        f"```json\n{CLEAN}",  # the closing fence never came
        f"The answer is {CLEAN}. Hope that helps!",
        f"Notes [draft] {{not json}} then {CLEAN} and {{}} trailing",
        '{"name": "To}kyo \\" [", "population": 1}',
    ],
    ids=["clean", "whitespace", "fenced", "fenced-bare", "fenced-prose", "unclosed-fence", "prose", "noise", "escapes"],
)
@pytest.mark.parametrize("strategy", ["native", "json_object"])
def test_extract_text_repair_ladder(text: str, strategy: StructuredStrategy) -> None:
    out = extract_structured(reply(text), OutputSpec.of(City), strategy)
    assert isinstance(out, StructuredOutput)
    assert out.strategy == strategy
    assert isinstance(out.value, City)
    assert out.raw == out.value.model_dump(mode="json")


def test_extract_coerces_in_lax_mode_and_raw_is_normalised() -> None:
    out = extract_structured(reply('{"name": "Oslo", "population": "700"}'), OutputSpec.of(City), "native")
    assert out is not None
    assert out.value.population == 700
    assert out.raw == {"name": "Oslo", "population": 700}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("I cannot answer that.", "not JSON"),
        ('{"name": "Oslo", "population": NaN}', "not JSON"),
        ('{"name": "Oslo"', "not JSON"),
        ('{"name": "Oslo"}', "population"),
        ('{"name": "Oslo", "population": "many"}', "population"),
        ("[1, 2]", "does not match"),
    ],
)
def test_extract_failures_raise_structured_output_error(text: str, match: str) -> None:
    with pytest.raises(StructuredOutputError, match=match) as info:
        extract_structured(reply(text), OutputSpec.of(City), "native")
    assert "'City'" in str(info.value)
    assert "input_value" not in str(info.value)  # pydantic's echo of the input is suppressed


def test_error_preview_is_truncated() -> None:
    secret_tail = "x" * 5000 + "-TAIL"
    with pytest.raises(StructuredOutputError) as info:
        extract_structured(reply("no json here " + secret_tail), OutputSpec.of(City), "json_object")
    assert len(str(info.value)) < 400
    assert "TAIL-" not in str(info.value)


def test_extract_wrapped_value_is_unwrapped_and_bare_values_are_accepted() -> None:
    spec = OutputSpec.of(list[int])
    for text in ('{"result": [1, 2, 3]}', "[1, 2, 3]", 'Sure: {"result": [1, 2, 3]}'):
        out = extract_structured(reply(text), spec, "json_object")
        assert out is not None
        assert out.value == [1, 2, 3]
        assert out.raw == [1, 2, 3]
    scalar = extract_structured(reply('{"result": 42}'), OutputSpec.of(int), "native")
    assert scalar is not None
    assert scalar.value == 42


def test_extract_tool_strategy_reads_the_schema_call() -> None:
    spec = OutputSpec.of(City)
    real = ToolCall(id="c1", name="search", arguments={"q": "x"})
    mine = ToolCall(id="c2", name="City", arguments={"name": "Lagos", "population": 15000000})
    out = extract_structured(reply("ignored prose", real, mine), spec, "tool")
    assert out is not None
    assert out.value == City(name="Lagos", population=15000000)
    assert out.strategy == "tool"
    assert is_structured_call(mine, spec)
    assert not is_structured_call(real, spec)


def test_extract_tool_strategy_without_the_call_returns_none() -> None:
    spec = OutputSpec.of(City)
    assert extract_structured(reply(CLEAN), spec, "tool") is None
    assert extract_structured(reply("", ToolCall(id="c", name="search")), spec, "tool") is None


def test_extract_tool_strategy_unwraps_and_repairs_raw_arguments() -> None:
    spec = OutputSpec.of(list[str])
    call = ToolCall(id="c", name="output", arguments={"result": ["a", "b"]})
    out = extract_structured(reply("", call), spec, "tool")
    assert out is not None
    assert out.value == ["a", "b"]
    broken = ToolCall.from_json_arguments(
        id="c", name="City", arguments='```json\n{"name": "Rome", "population": 3}\n```'
    )
    assert broken.raw_arguments is not None
    repaired = extract_structured(reply("", broken), OutputSpec.of(City), "tool")
    assert repaired is not None
    assert repaired.value.name == "Rome"


def test_extract_tool_strategy_invalid_arguments_raise() -> None:
    call = ToolCall(id="c", name="City", arguments={"name": "Rome"})
    with pytest.raises(StructuredOutputError, match="population"):
        extract_structured(reply("", call), OutputSpec.of(City), "tool")


def test_extract_rejects_unknown_strategy() -> None:
    with pytest.raises(ConfigurationError):
        extract_structured(reply(CLEAN), OutputSpec.of(City), "xml")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ StructuredOutput
def test_parse_into_other_types_and_as_value_copies() -> None:
    out = extract_structured(reply(CLEAN), OutputSpec.of(City), "native")
    assert out is not None
    assert out.parse(dict[str, Any]) == {"name": "Tokyo", "population": 37000000}
    assert out.parse(Movie | dict[str, int | str]) == {"name": "Tokyo", "population": 37000000}

    @dataclasses.dataclass
    class NameOnly:
        name: str

    assert out.parse(NameOnly) == NameOnly(name="Tokyo")
    copy = out.as_value()
    copy["name"] = "changed"
    assert out.raw["name"] == "Tokyo"
    with pytest.raises(StructuredOutputError, match="does not parse"):
        out.parse(Movie)
    with pytest.raises(StructuredOutputError):
        out.parse(list[int])


def test_parse_with_unhashable_annotation_still_works() -> None:
    from typing import Annotated

    from pydantic import Field

    out = StructuredOutput(value=3, raw=3, strategy="native")
    assert out.parse(Annotated[int, Field(ge=0), {"unhashable": []}]) == 3


# ------------------------------------------------------------------------------------------ raw schemas
RAW = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["cat", "dog"]},
        "score": {"type": "number"},
        "count": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"const": "pet"},
        "owner": {"$ref": "#/$defs/Owner"},
        "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["label", "score"],
    "additionalProperties": False,
    "$defs": {"Owner": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
}


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({"label": "cat", "score": 1}, None),
        ({"label": "dog", "score": 0.5, "count": 2.0, "tags": [], "kind": "pet", "owner": {"name": "A"}}, None),
        ({"label": "cat", "score": 1, "either": None}, None),
        ([], "$: expected object, got array"),
        ({"score": 1}, "missing required property 'label'"),
        ({"label": "cow", "score": 1}, "$.label: must be one of"),
        ({"label": "cat", "score": "1"}, "$.score: expected number, got string"),
        ({"label": "cat", "score": True}, "$.score: expected number, got boolean"),
        ({"label": "cat", "score": 1, "count": 1.5}, "$.count: expected integer, got number"),
        ({"label": "cat", "score": 1, "tags": ["a", 2]}, "$.tags[1]: expected string, got integer"),
        ({"label": "cat", "score": 1, "extra": 1}, "unexpected property 'extra'"),
        ({"label": "cat", "score": 1, "kind": "wild"}, "$.kind: must equal 'pet'"),
        ({"label": "cat", "score": 1, "owner": {}}, "$.owner: missing required property 'name'"),
        ({"label": "cat", "score": 1, "either": 3}, "$.either: matches none of the anyOf"),
    ],
)
def test_minimal_schema_validator(value: Any, fragment: str | None) -> None:
    errors = schema_errors(value, RAW, root=RAW)
    if fragment is None:
        assert errors == []
    else:
        assert any(fragment in e for e in errors), errors


def test_minimal_schema_validator_edges() -> None:
    assert schema_errors(1, {"enum": [True]}, root={}) != []  # JSON: 1 is not true
    assert schema_errors(1, {"type": ["string", "integer"]}, root={}) == []
    assert schema_errors("x", False, root={}) == ["$: no value is allowed here"]
    assert schema_errors("x", {}, root={}) == []
    assert "cannot resolve" in schema_errors(1, {"$ref": "#/$defs/Nope"}, root={})[0]
    loop = {"$ref": "#"}
    assert "too deeply" in schema_errors(1, loop, root=loop)[0]
    many = {"type": "array", "items": {"type": "string"}}
    assert len(schema_errors(list(range(20)), many, root=many)) == 5
    extra = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert schema_errors({"a": 1, "b": "x"}, extra, root=extra) == ["$.b: expected integer, got string"]


def test_raw_schema_extraction_validates() -> None:
    spec = OutputSpec.of(RAW, name="pet")
    out = extract_structured(reply('Result: {"label": "cat", "score": 0.9}'), spec, "json_object")
    assert out is not None
    assert out.value == {"label": "cat", "score": 0.9}
    assert out.raw == out.value
    with pytest.raises(StructuredOutputError, match=r"\$\.label: must be one of"):
        extract_structured(reply('{"label": "cow", "score": 0.9}'), spec, "native")
    tool_out = extract_structured(
        reply("", ToolCall(id="c", name="pet", arguments={"label": "dog", "score": 1})), spec, "tool"
    )
    assert tool_out is not None
    assert tool_out.parse(dict[str, Any]) == {"label": "dog", "score": 1}


# ------------------------------------------------------------------------------------------ lenient parser
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
prose = st.text(alphabet=st.characters(exclude_characters="{}[]`\"'", codec="utf-8"), max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=5), json_values, max_size=4) | st.lists(json_values, max_size=4),
    before=prose,
    after=prose,
)
def test_lenient_parser_finds_json_in_prose(value: Any, before: str, after: str) -> None:
    text = json.dumps(value)
    assert parse_json_lenient(before + " " + text + " " + after) == value
    assert parse_json_lenient(f"{before}\n```json\n{text}\n```\n{after}") == value


def test_lenient_parser_gives_up_cleanly() -> None:
    for text in ("", "plain words", "{" * 10_000, "[1, 2"):
        with pytest.raises(ValueError, match="no JSON"):
            parse_json_lenient(text)
    assert parse_json_lenient("true") is True
    assert parse_json_lenient('"just a string"') == "just a string"
