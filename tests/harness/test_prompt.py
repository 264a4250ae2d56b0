"""Prompt templates, message templates and the cache-segmented prompt builder."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    Message,
    ModelRequest,
    PromptTemplate,
    SystemMessage,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from tinyagents_nb.harness.middleware import PromptCacheLayout
from tinyagents_nb.harness.prompts import MessagesTemplate, PromptBuilder

WEATHER = ToolSchema(name="weather", description="Weather for a city", parameters={"type": "object"})
SEARCH = ToolSchema(name="search", description="Search the web")


# ------------------------------------------------------------------------------------------ PromptTemplate
def test_render_substitutes_every_placeholder() -> None:
    t = PromptTemplate("Hi {{name}}, {{ name }}! You have {{  count  }} {{item}}{{suffix}}.")
    assert t.variables == {"name", "count", "item", "suffix"}
    assert t.render(name="Ada", count=3, item="cat", suffix="s") == "Hi Ada, Ada! You have 3 cats."
    assert t.render(name=None, count=0.5, item=["x"], suffix="") == "Hi None, None! You have 0.5 ['x']."


def test_text_without_placeholders_and_single_braces() -> None:
    t = PromptTemplate('JSON looks like {"a": {"b": 1}} and }} is fine')
    assert t.variables == frozenset()
    assert t.render() == 'JSON looks like {"a": {"b": 1}} and }} is fine'
    assert PromptTemplate("").render() == ""


def test_missing_variables_are_all_named() -> None:
    t = PromptTemplate("{{a}} {{b}} {{c}}")
    with pytest.raises(ConfigurationError, match=r"missing variable\(s\) 'b', 'c'") as info:
        t.render(a=1)
    assert "expected: 'a', 'b', 'c'" in str(info.value)


def test_extra_variables_are_an_error_unless_allowed() -> None:
    t = PromptTemplate("{{a}}")
    with pytest.raises(ConfigurationError, match=r"unexpected variable\(s\) 'typo'"):
        t.render(a=1, typo=2)
    with pytest.raises(ConfigurationError, match=r"missing variable\(s\) 'a'; unexpected variable\(s\) 'b'"):
        t.render(b=2)
    assert PromptTemplate("{{a}}", allow_extra=True).render(a=1, typo=2) == "1"


def test_variable_named_self_works() -> None:
    assert PromptTemplate("{{self}}").render(self="me") == "me"


def test_escaping_and_backslashes() -> None:
    t = PromptTemplate(r"literal \{{ name }} and \{{{{ name }} and C:\dir\{{x}}")
    # \{{ is a literal {{ ; the x placeholder after "\dir" is escaped too, by the same rule
    assert t.variables == {"name"}
    assert t.render(name="Ada") == r"literal {{ name }} and {{Ada and C:\dir{{x}}"
    assert PromptTemplate(r"a \ b \n {{x}}").render(x=1) == r"a \ b \n 1"


@pytest.mark.parametrize("text", ["{{ 1x }}", "{{x", "{{ a.b }}", "{{}}", "{{ x y }}", "{{{x}}}", "{{ é }}"])
def test_invalid_placeholders_fail_at_construction(text: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid placeholder") as info:
        PromptTemplate(text)
    assert info.value.hint is not None
    assert r"\{{" in info.value.hint


def test_values_are_not_re_rendered() -> None:
    t = PromptTemplate("{{a}} {{b}}")
    assert t.render(a="{{b}}", b="x") == "{{b}} x"


def test_messages_by_role() -> None:
    t = PromptTemplate("hi {{x}}", role="system")
    assert t.render_system(x=1) == SystemMessage(text="hi 1")
    assert t.render_user(x=1) == UserMessage(text="hi 1")
    assert t.render_assistant(x=1) == AssistantMessage(text="hi 1")
    assert t.render_message(x=1) == SystemMessage(text="hi 1")
    assert PromptTemplate("a", role="assistant").render_message() == AssistantMessage(text="a")
    assert PromptTemplate("a").render_message() == UserMessage(text="a")
    with pytest.raises(ConfigurationError, match="role"):
        PromptTemplate("x", role="tool")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="str"):
        PromptTemplate(42)  # type: ignore[arg-type]


def test_partial_binds_values_now() -> None:
    t = PromptTemplate("{{greeting}}, {{name}}! {{greeting}} again. {{tail}}")
    p = t.partial(greeting="Hello {{name}}")  # braces in a bound value stay literal
    assert p.variables == {"name", "tail"}
    assert t.variables == {"greeting", "name", "tail"}  # the original is unchanged
    assert p.render(name="Ada", tail=".") == "Hello {{name}}, Ada! Hello {{name}} again. ."
    pp = p.partial(tail="end")
    assert pp.variables == {"name"}
    assert pp.render(name="B") == "Hello {{name}}, B! Hello {{name}} again. end"
    assert pp.partial(name="C").render() == "Hello {{name}}, C! Hello {{name}} again. end"
    with pytest.raises(ConfigurationError, match=r"unexpected variable\(s\) 'greeting'"):
        p.render(name="Ada", tail=".", greeting="again")
    with pytest.raises(ConfigurationError, match=r"unexpected variable\(s\) 'nope'"):
        t.partial(nope=1)
    assert PromptTemplate("{{a}}", allow_extra=True).partial(nope=1).variables == {"a"}
    assert "bound=['greeting']" in repr(p)


def test_equality_follows_content() -> None:
    assert PromptTemplate("a {{x}}") == PromptTemplate("a {{ x }}")
    assert PromptTemplate("a {{x}}") != PromptTemplate("a {{x}}", role="system")
    assert PromptTemplate("{{x}}{{y}}").partial(x="1") == PromptTemplate("1{{y}}")
    assert len({PromptTemplate("a"), PromptTemplate("a")}) == 1


# ------------------------------------------------------------------------------------------ MessagesTemplate
def test_messages_template_renders_in_order() -> None:
    fixed = AssistantMessage(text="fixed {{not_a_var}}")
    mt = MessagesTemplate(
        [
            ("system", "You are {{persona}}."),
            fixed,
            PromptTemplate("{{question}} ({{persona}})"),
            ("assistant", "Thinking about {{question}}"),
        ]
    )
    assert mt.variables == {"persona", "question"}
    assert len(mt) == 4
    out = mt.render(persona="a pirate", question="why?")
    assert out == [
        SystemMessage(text="You are a pirate."),
        fixed,
        UserMessage(text="why? (a pirate)"),
        AssistantMessage(text="Thinking about why?"),
    ]


def test_messages_template_validation() -> None:
    mt = MessagesTemplate([("system", "{{a}}"), ("user", "{{b}}")])
    with pytest.raises(ConfigurationError, match=r"missing variable\(s\) 'a', 'b'"):
        mt.render()
    with pytest.raises(ConfigurationError, match=r"unexpected variable\(s\) 'c'"):
        mt.render(a=1, b=2, c=3)
    assert MessagesTemplate([("user", "{{b}}")], allow_extra=True).render(b=1, c=2) == [UserMessage(text="1")]
    with pytest.raises(ConfigurationError, match="role"):
        MessagesTemplate([("tool", "x")])
    with pytest.raises(ConfigurationError, match="item"):
        MessagesTemplate([{"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="single template"):
        MessagesTemplate(PromptTemplate("x"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="invalid placeholder"):
        MessagesTemplate([("user", "{{oops")])


def test_messages_template_partial() -> None:
    mt = MessagesTemplate([("system", "{{a}}"), ("user", "{{a}} {{b}}")])
    p = mt.partial(a="A")
    assert p.variables == {"b"}
    assert [m.text for m in p.render(b="B")] == ["A", "A B"]
    with pytest.raises(ConfigurationError, match="unexpected"):
        mt.partial(z=1)


# ------------------------------------------------------------------------------------------ PromptBuilder
def _builder() -> PromptBuilder:
    return (
        PromptBuilder(tools=[WEATHER])
        .push_system("You are helpful.")
        .push_instructions("Answer in French.")
        .push_history([UserMessage(text="hi"), AssistantMessage(text="salut")])
    )


def test_build_orders_segments() -> None:
    builder = _builder().push_volatile("It is 10:00.").push_volatile([UserMessage(text="snippet")])
    request = builder.build("What now?")
    assert isinstance(request, ModelRequest)
    assert request.messages == (
        SystemMessage(text="You are helpful.\n\nAnswer in French."),
        UserMessage(text="hi"),
        AssistantMessage(text="salut"),
        UserMessage(text="It is 10:00."),
        UserMessage(text="snippet"),
        UserMessage(text="What now?"),
    )
    assert request.tools == (WEATHER,)
    assert [(s.kind, s.name, s.stable) for s in builder.segments] == [
        ("tools", "tools-0", True),
        ("system", "system-0", True),
        ("instructions", "instructions-0", True),
        ("history", "history-0", True),
        ("volatile", "volatile-0", False),
        ("volatile", "volatile-1", False),
    ]


def test_build_tail_forms_and_repeatability() -> None:
    builder = _builder()
    assert builder.build().messages[-1] == AssistantMessage(text="salut")
    assert builder.build(UserMessage(text="q")).messages[-1] == UserMessage(text="q")
    tail: list[Message] = [UserMessage(text="q"), AssistantMessage(text="a")]
    assert builder.build(tail).messages[-2:] == tuple(tail)
    assert builder.build("x") == builder.build("x")
    before = builder.build("x")
    builder.push_volatile("later")
    assert len(before.messages) == 4  # an earlier request is not affected by later pushes
    request = dataclasses.replace(builder.build("x"), model="m", temperature=0.0)
    assert request.model == "m"
    with pytest.raises(ConfigurationError, match="messages only"):
        builder.build([1])  # type: ignore[list-item]


def test_unmerged_system_segments_and_volatile_roles() -> None:
    builder = PromptBuilder(merge_system=False).push_system("a").push_instructions("b")
    builder.push_volatile("note", role="system").push_volatile("prefill", role="assistant")
    assert builder.build().messages == (
        SystemMessage(text="a"),
        SystemMessage(text="b"),
        SystemMessage(text="note"),
        AssistantMessage(text="prefill"),
    )
    assert builder.build().tools == ()
    with pytest.raises(ConfigurationError, match="role"):
        PromptBuilder().push_volatile("x", role="tool")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "push",
    [
        lambda b: b.push_system("late"),
        lambda b: b.push_instructions("late"),
        lambda b: b.push_tools_segment([SEARCH]),
        lambda b: b.push_history([UserMessage(text="late")]),
    ],
)
def test_stable_after_volatile_is_refused(push: Any) -> None:
    builder = _builder().push_volatile("now")
    fingerprint = builder.fingerprint()
    with pytest.raises(ConfigurationError, match="after a volatile segment") as info:
        push(builder)
    assert info.value.hint is not None
    assert "cache" in info.value.hint
    assert len(builder.segments) == 5
    assert builder.fingerprint() == fingerprint


def test_segment_validation() -> None:
    builder = PromptBuilder(tools=[WEATHER])
    with pytest.raises(ConfigurationError, match="already in the prompt"):
        builder.push_tools_segment([SEARCH, WEATHER])
    with pytest.raises(ConfigurationError, match="already in the prompt"):
        builder.push_tools_segment([SEARCH, SEARCH])
    builder.push_tools_segment([SEARCH], name="more")  # the failed pushes left nothing behind
    assert builder.build().tools == (WEATHER, SEARCH)
    with pytest.raises(ConfigurationError, match="ToolSchema"):
        builder.push_tools_segment([{"name": "x"}])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="non-empty text"):
        builder.push_system("  ")
    with pytest.raises(ConfigurationError, match="non-empty text"):
        builder.push_volatile("")
    with pytest.raises(ConfigurationError, match="system messages"):
        builder.push_history([SystemMessage(text="s")])
    with pytest.raises(ConfigurationError, match="sequence of messages"):
        builder.push_history(UserMessage(text="one"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="segment name"):
        builder.push_system("x", name="")
    builder.push_history([ToolMessage(tool_call_id="c", name="t", text="r")], name="past")
    assert builder.segments[-1].name == "past"


def test_fingerprint_tracks_exactly_the_stable_segments() -> None:
    base = _builder()
    fp = base.fingerprint()
    assert len(fp) == 64
    assert fp == _builder().fingerprint()

    base.push_volatile("time: 10:00")
    assert base.fingerprint() == fp
    other = _builder().push_volatile("time: 11:00").push_volatile([UserMessage(text="x")])
    assert other.fingerprint() == fp
    assert base.build("a").messages[:3] == other.build("b").messages[:3]

    # names are labels, not model-visible content
    renamed = PromptBuilder().push_tools_segment([WEATHER], name="t").push_system("You are helpful.", name="s")
    renamed.push_instructions("Answer in French.").push_history(
        [UserMessage(text="hi"), AssistantMessage(text="salut")]
    )
    assert renamed.fingerprint() == fp

    changed = [
        PromptBuilder(tools=[SEARCH]).push_system("You are helpful."),
        _builder().push_history([UserMessage(text="more")]),
        PromptBuilder(tools=[WEATHER]).push_system("You are helpful!"),
        PromptBuilder(tools=[WEATHER], merge_system=False).push_system("You are helpful."),
        PromptBuilder(tools=[WEATHER]).push_instructions("You are helpful."),  # same text, other kind
        PromptBuilder(tools=[dataclasses.replace(WEATHER, strict=True)]).push_system("You are helpful."),
    ]
    reference = PromptBuilder(tools=[WEATHER]).push_system("You are helpful.").fingerprint()
    assert reference != fp
    for builder in changed:
        assert builder.fingerprint() != reference


def test_fingerprint_refreshes_after_a_stable_push() -> None:
    builder = PromptBuilder().push_system("a")
    first = builder.fingerprint()
    builder.push_history([UserMessage(text="b")])
    assert builder.fingerprint() != first
    assert len(builder.build().messages) == 2  # the cached prefix was refreshed too


def test_layout() -> None:
    builder = _builder().push_volatile("now")
    layout = builder.layout()
    assert isinstance(layout, PromptCacheLayout)
    assert layout.fingerprint == builder.fingerprint()
    assert layout.stable_segments == 4
    assert layout.stable_messages == 3
    assert layout.segments[0] == ("tools", "tools-0")
    assert layout.is_prefix_stable_against(_builder().push_volatile("later").layout())
    assert not layout.is_prefix_stable_against(PromptBuilder().push_system("x").layout())
    assert "system:system-0" in repr(builder)


# ------------------------------------------------------------------------------------------ properties
_texts = st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != "")
_stable = st.one_of(
    st.tuples(st.just("system"), _texts),
    st.tuples(st.just("instructions"), _texts),
    st.tuples(st.just("history"), st.lists(_texts, min_size=0, max_size=3)),
    st.tuples(st.just("tools"), st.lists(_texts, min_size=0, max_size=2, unique=True)),
)


def _make(stable: list[tuple[str, Any]], volatile: list[str]) -> PromptBuilder:
    builder = PromptBuilder()
    seen: set[str] = set()
    for i, (kind, content) in enumerate(stable):
        if kind == "system":
            builder.push_system(content)
        elif kind == "instructions":
            builder.push_instructions(content)
        elif kind == "history":
            builder.push_history([UserMessage(text=t) for t in content])
        else:
            names = [f"{i}-{t}" for t in content if f"{i}-{t}" not in seen]
            seen.update(names)
            builder.push_tools_segment([ToolSchema(name=n) for n in names])
    for text in volatile:
        builder.push_volatile(text)
    return builder


@settings(max_examples=150, deadline=None)
@given(
    stable=st.lists(_stable, min_size=1, max_size=5),
    volatile_a=st.lists(_texts, max_size=3),
    volatile_b=st.lists(_texts, max_size=3),
    data=st.data(),
)
def test_fingerprint_property(
    stable: list[tuple[str, Any]], volatile_a: list[str], volatile_b: list[str], data: st.DataObject
) -> None:
    fp = _make(stable, volatile_a).fingerprint()
    assert _make(stable, volatile_b).fingerprint() == fp  # volatile content never matters

    index = data.draw(st.integers(0, len(stable) - 1))
    replacement = data.draw(_stable)
    mutated = [*stable[:index], replacement, *stable[index + 1 :]]
    assert (_make(mutated, volatile_b).fingerprint() == fp) == (mutated == stable)
