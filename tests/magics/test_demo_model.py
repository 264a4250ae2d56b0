"""``demo_model``: one call gives a tutorial a streaming, priced, windowed offline model."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ConfigurationError
from tinyagents_nb.magics import NotebookSession, demo_model

from .conftest import last_run, run_ok


def test_a_demo_model_answers_in_order_with_usage_price_and_window(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo_model(["First answer.", "Second, longer answer here."]) == "demo"
    run_ok(shell, "%agent model demo")
    run_ok(shell, "%%agent\nhello")
    first = last_run(shell)
    assert first.final_text == "First answer."
    outcome = first.outcome
    assert outcome is not None
    assert outcome.usage.input_tokens > 0
    assert outcome.usage.output_tokens > 0
    assert outcome.cost is not None
    assert outcome.cost.total_usd is not None
    assert outcome.cost.total_usd > 0  # priced like gpt-4o-mini
    window = first.context.context_window
    assert window is not None
    assert window.max_tokens == 128_000  # the dashboard's gauge has something to show
    run_ok(shell, "%%agent\nand then?")
    second = last_run(shell)
    assert second.final_text == "Second, longer answer here."
    assert second.outcome is not None
    assert second.outcome.usage.input_tokens > outcome.usage.input_tokens  # the thread's history was sent
    run_ok(shell, "%%agent\nmore?")  # a blocking cell reports a failed run in its output
    assert "has no answers left" in capsys.readouterr().out
    assert last_run(shell).status == "failed"


def test_bad_demo_settings_are_configuration_errors(session: NotebookSession) -> None:
    with pytest.raises(ConfigurationError, match="list of answers"):
        demo_model("just one string")
    with pytest.raises(ConfigurationError, match="decimal strings"):
        demo_model(["a"], input_per_mtok="cheap")
