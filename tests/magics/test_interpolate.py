"""``{expr}`` interpolation of cell bodies: f-string syntax, escapes, and errors that name the field."""

from __future__ import annotations

import pytest

from tinyagents_nb.magics._interpolate import InterpolationError, interpolate

NS = {"x": 3, "name": "Ada", "d": {"a": [1, 2]}, "items": ["p", "q"], "__builtins__": __builtins__}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("no fields", "no fields"),
        ("{x}", "3"),
        ("x is {x}, twice {x * 2}", "x is 3, twice 6"),
        ("{len(items)} items: {', '.join(items)}", "2 items: p, q"),
        ('{d["a"][1]}', "2"),
        ("{ {'k': x}['k'] }", "3"),  # nested braces inside the expression
        ("{name!r}", "'Ada'"),
        ("{x:>4}|", "   3|"),
        ("{x / 7:.3f}", "0.429"),
        ("{x != 2}", "True"),  # '!=' is not a conversion
        ("{'}'}", "}"),  # a brace inside a string literal
        ("{{x}} and {{{x}}}", "{x} and {3}"),
        ("}} {{", "} {"),
        ("line one\n{name}\nline three", "line one\nAda\nline three"),
    ],
)
def test_fields_and_escapes(template: str, expected: str) -> None:
    assert interpolate(template, NS) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("hello {missing}", "name 'missing' in {missing} is not defined"),
        ("{len(missing_df)}", "name 'missing_df' in {len(missing_df)} is not defined"),
        ("{x +}", "{x +} in the prompt is not a Python expression"),
        ("{1/0}", "{1/0} failed: ZeroDivisionError"),
        ("{}", "empty {}"),
        ("open {x", "unclosed '{'"),
        ("close } alone", "single '}'"),
        ('{"a": 1}', "cannot be formatted"),  # JSON in a prompt must be escaped
        ("{name:d}", "cannot be formatted with 'd'"),
    ],
)
def test_errors_name_the_field(template: str, message: str) -> None:
    with pytest.raises(InterpolationError, match=None) as info:
        interpolate(template, NS)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_namespace_is_not_changed_by_evaluation() -> None:
    ns = dict(NS)
    interpolate("{[i for i in items]}", ns)
    assert ns.keys() == NS.keys()
