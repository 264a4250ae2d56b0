"""``{expr}`` interpolation of ``%%agent`` cell bodies: f-string syntax, escapes, and errors that name the field.

Each template runs as a cell between two markers (the prompt is stripped); the model's request shows the result.
"""

from __future__ import annotations

import re

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession

from .conftest import run_error, run_ok

NS = {"x": 3, "name": "Ada", "d": {"a": [1, 2]}, "items": ["p", "q"]}


def interpolate(shell: InteractiveShell, session: NotebookSession, template: str) -> str:
    """The prompt an ``%%agent`` cell with body ``<template>`` sends, markers removed."""
    model = ScriptedModel(["ok"])
    session.register_model("fake", model)  # re-registering replaces
    shell.user_ns.update(NS)
    run_ok(shell, f"%%agent --model fake\n<{template}>")
    text = model.requests[-1].messages[-1].text
    assert text.startswith("<")
    assert text.endswith(">")
    return text[1:-1]


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
def test_fields_and_escapes(shell: InteractiveShell, session: NotebookSession, template: str, expected: str) -> None:
    assert interpolate(shell, session, template) == expected


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
def test_errors_name_the_field(shell: InteractiveShell, session: NotebookSession, template: str, message: str) -> None:
    session.register_model("fake", ScriptedModel(["ok"]))
    shell.user_ns.update(NS)
    error = run_error(shell, f"%%agent --model fake\n{template}")
    assert isinstance(error, UsageError)
    assert message in str(error)
    assert "\n" not in str(error)


def test_namespace_is_not_changed_by_evaluation(shell: InteractiveShell, session: NotebookSession) -> None:
    interpolate(shell, session, "")
    before = dict(shell.user_ns)
    assert interpolate(shell, session, "{[i for i in items]}") == "['p', 'q']"
    added = shell.user_ns.keys() - before.keys()
    assert all(re.fullmatch(r"_i\d+", key) for key in added), added  # IPython's input history only
