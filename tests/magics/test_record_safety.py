"""The end-of-run record is trusted Markdown in the saved notebook: nothing a model wrote may run in it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession, get_session

from ..widgets.markdown_check import live_html
from .conftest import last_run, run_ok

_HOSTILE = '<img src=x onerror="alert(1)">'


def _echo(text: str) -> str:
    """Say ``text`` back."""
    return text


def _record(shell: InteractiveShell, first: str, second: str) -> dict[str, str]:
    """The record of a run whose first reply (``first``) calls a tool and whose second reply is ``second``."""
    session = get_session()
    session.register_tool(_echo, name="echo")
    session.register_model("m", ScriptedModel([ScriptedModel.tool_call("echo", {"text": first}, text=first), second]))
    run_ok(shell, "%%agent --model m\nhi")
    record: dict[str, str] = last_run(shell)._repr_mimebundle_()
    return record


def test_an_unclosed_fence_in_one_reply_cannot_unfence_html_in_the_next(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    # The audit's case: reply 1 ends inside a fence; reply 2's opening fence closes it in the renderer.
    record = _record(shell, "Here is the code:\n\n```python\nprint('unfinished')", f"```\n{_HOSTILE}\n```\nAll done.")
    markdown = record["text/markdown"]
    assert live_html(markdown) == []
    assert "All done." in markdown
    assert _HOSTILE in record["text/plain"]  # the plain twin keeps what the model wrote


_PIECES = ["```", "````", "~~~", "`", "``", "\n", "\n\n", "  ", "- ", "> ", _HOSTILE, "<details>", "x", "|", "\\"]
_replies = st.lists(st.sampled_from(_PIECES), max_size=10).map("".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_replies, second=_replies)
def test_no_pair_of_replies_makes_live_html_in_the_record(
    shell: InteractiveShell, session: NotebookSession, first: str, second: str
) -> None:
    assert live_html(_record(shell, first, second)["text/markdown"]) == []


def test_terminal_escapes_from_the_model_are_not_in_either_twin(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    osc52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
    record = _record(shell, f"calling {osc52}", f"\x1b[2J\x1b[31mred\x1b[0m answer\x07 {osc52}done")
    for mime in ("text/markdown", "text/plain"):
        text = record[mime]
        assert "\x1b" not in text, mime
        assert "\x07" not in text, mime
        assert not any(0x7F <= ord(c) <= 0x9F or (ord(c) < 32 and c not in "\n\t") for c in text), mime
    assert "red answer done" in record["text/plain"]
    assert "red answer done" in record["text/markdown"]
