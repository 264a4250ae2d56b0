"""A trajectory's notebook view: what the extension registers as the display of ``Trajectory``."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tests.rlm.test_rlm_recursion import fenced
from tests.widgets.markdown_check import live_html
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import RLM, RLMLimits, Trajectory

pytestmark = pytest.mark.anyio

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>[click](javascript:alert(3))"


def bundle(shell: InteractiveShell, trajectory: Trajectory) -> dict[str, str]:
    data, _ = shell.display_formatter.format(trajectory)
    return data


async def test_hostile_code_and_output_render_inert(shell: InteractiveShell) -> None:
    model = ScriptedModel([fenced(f"print({HOSTILE!r})"), fenced(f"FINAL({HOSTILE!r})")])
    rlm = RLM(model=model, environment="local")
    run = await rlm.invoke(f"Task {HOSTILE}")
    shown = bundle(shell, rlm.trajectory(run))
    markdown = shown["text/markdown"]
    assert live_html(markdown) == []  # what a real renderer makes of it: no live tag, handler or link
    assert markdown.count("alert(1)") >= 3  # the task, the code and its output: shown as text, not dropped
    assert "RLM trajectory · completed" in markdown
    assert "<script>alert(1)</script>" in shown["text/plain"]  # plain text is inert by nature


async def test_the_models_prose_is_shown_with_its_step_and_inert(shell: InteractiveShell) -> None:
    reply = f"I will **count** {HOSTILE}\n```python\nn = 2\n```\nNext: *print* it."
    model = ScriptedModel([ScriptedModel.text(reply), fenced("FINAL(n)")])
    rlm = RLM(model=model, environment="local")
    shown = bundle(shell, rlm.trajectory(await rlm.invoke("Go.")))
    markdown, plain = shown["text/markdown"], shown["text/plain"]
    assert live_html(markdown) == []
    assert "alert(1)" in markdown
    assert "**count**" not in markdown  # the model's Markdown is shown as its characters, not rendered
    assert markdown.index("I will") < markdown.index("n = 2") < markdown.index("Next:")
    assert f"I will **count** {HOSTILE}" in plain
    assert "Next: *print* it." in plain


async def test_a_terminal_escape_never_reaches_either_view(shell: InteractiveShell) -> None:
    model = ScriptedModel([fenced("print('\\x1b]52;c;aGk=\\x07owned')"), fenced("FINAL('done')")])
    rlm = RLM(model=model, environment="local")
    shown = bundle(shell, rlm.trajectory(await rlm.invoke("Go.")))
    assert "\x1b" not in shown["text/plain"]
    assert "\x1b" not in shown["text/markdown"]
    assert "owned" in shown["text/plain"]


async def test_a_limit_ended_runs_view_shows_its_error_and_partial_answer(shell: InteractiveShell) -> None:
    model = ScriptedModel([fenced("answer['content'] = 'about 40'"), fenced("print(1)")])
    rlm = RLM(model=model, environment="local", limits=RLMLimits(max_iterations=1))
    with pytest.raises(Exception, match="replies with code"):
        await rlm.invoke("Count.")
    (run_id,) = rlm._recorders
    plain = bundle(shell, rlm.trajectory(run_id))["text/plain"]
    assert "failed (rlm_iterations): LimitExceeded" in plain
    assert "partial answer: about 40" in plain


def test_unloading_the_extension_removes_the_view(shell: InteractiveShell) -> None:
    from tinyagents_nb.rlm import TrajectoryRun

    trajectory = Trajectory([TrajectoryRun(run_id="r1", kind="rlm", status="completed", answer="x")])
    assert "text/markdown" in bundle(shell, trajectory)
    shell.run_line_magic("unload_ext", "tinyagents_nb")
    assert "text/markdown" not in bundle(shell, trajectory)
    assert bundle(shell, trajectory)["text/plain"].startswith("Trajectory(root_run_id='r1'")
