"""The magics' own wording for a bad command line, instead of argparse's.

argparse reports mistakes in its own voice ("the following arguments are required", "unrecognized
arguments", "expected one argument", "invalid choice", "invalid int value"). ``usage_message``
turns each into one line that says what to type, with a "did you mean" when a flag or command is
a near miss. ``positive_int`` rejects a zero or negative count while the line is parsed, before a
run is created.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from collections.abc import Iterable
from typing import Any, Final

from IPython.core.error import UsageError

__all__ = ["parse_line", "positive_int", "usage_error", "usage_message"]

_ARGUMENT: Final = re.compile(r"^argument (?P<name>[^:]+): (?P<rest>.*)$", re.DOTALL)
_INVALID_VALUE: Final = re.compile(r"^invalid (?P<type>\w+) value: (?P<value>.*)$")
_INVALID_CHOICE: Final = re.compile(r"^invalid choice: (?P<value>'[^']*')")
_TYPE_WORDS: Final = {"int": "a whole number", "float": "a number", "positive_int": "a whole number of at least 1"}


def positive_int(text: str) -> int:
    """An argparse ``type`` for counts that must be at least 1 (``--max-model-calls``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs a whole number of at least 1, got {value} (a run needs a model call)")
    return value


def _near(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"did you mean {close[0]}? " if close else ""


def usage_message(message: str, *, magic: str, flags: Iterable[str] = (), commands: Iterable[str] = ()) -> str:
    """Rewrite an argparse error ``message`` for ``magic`` (``"%%agent"`` or ``"%agent"``) as one line."""
    flags, commands = sorted(flags), sorted(commands)
    help_hint = f"{magic}? lists every option"
    if message.startswith("unrecognized arguments: "):
        words = message.removeprefix("unrecognized arguments: ").split()
        first = words[0] if words else ""
        if first.startswith("-"):
            return f"{magic}: unknown option {first} ({_near(first, flags)}{help_hint})"
        return f"{magic}: unexpected {' '.join(words)!r} ({help_hint}; quote a value that has spaces)"
    if message.startswith("the following arguments are required: "):
        missing = message.removeprefix("the following arguments are required: ")
        return f"{magic}: {missing} is missing ({help_hint})"
    match = _ARGUMENT.match(message)
    if match is None:
        return f"{magic}: {message} ({help_hint})"
    name, rest = match.group("name").split("/")[0], match.group("rest")
    if rest.startswith("expected one argument"):
        return f"{magic}: {name} needs a value, e.g. {name} {name.lstrip('-').upper().replace('-', '_')}"
    if invalid := _INVALID_VALUE.match(rest):
        what = _TYPE_WORDS.get(invalid.group("type"), f"a {invalid.group('type')}")
        return f"{magic}: {name} needs {what}, got {invalid.group('value')}"
    if choice := _INVALID_CHOICE.match(rest):
        value = choice.group("value").strip("'")
        if name == "COMMAND":
            return f"unknown command %agent {value} ({_near(value, commands)}commands: {', '.join(commands)})"
        return f"{magic}: {name} does not accept {value!r}"
    if name == "COMMAND":
        return f"%agent: {rest}"
    return f"{magic}: {name} {rest}"


def parse_line(magic_fn: Any, line: str, *, commands: Iterable[str]) -> argparse.Namespace:
    """Parse with POSIX shell quoting (IPython's own splitter keeps the quotes around values)."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"cannot parse the magic's line: {exc}") from None
    parser = magic_fn.parser
    try:
        namespace: argparse.Namespace = parser.parse_args(argv)  # its error() raises UsageError
    except UsageError as exc:  # argparse's wording, rewritten as the magics' own one line
        flags = [flag for action in parser._actions for flag in action.option_strings]
        magic = "%agent" if magic_fn.__name__ == "agent_line" else "%%agent"
        raise UsageError(usage_message(str(exc), magic=magic, flags=flags, commands=commands)) from None
    return namespace


def usage_error(exc: BaseException) -> UsageError:
    """A one-line ``UsageError`` from a harness error: its message and hint, no traceback."""
    hint = getattr(exc, "hint", None)
    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # KeyError's str() adds quotes
    text = " ".join(str(message).split()) or type(exc).__name__
    return UsageError(text + (f" (hint: {hint})" if hint else ""))
