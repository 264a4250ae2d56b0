"""``%%agent --map NAME``: a prompt template over a DataFrame's rows from a notebook cell."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.magics.conftest import run_error, run_ok
from tinyagents_nb.harness import CancellationToken, ModelProfile
from tinyagents_nb.harness.batch import agent_map
from tinyagents_nb.harness.providers import OpenAIChatModel
from tinyagents_nb.harness.testkit import FunctionModel
from tinyagents_nb.magics import NotebookSession


def _answer(request: object) -> str:
    text = next(m.text for m in request.messages if type(m).__name__ == "UserMessage")  # type: ignore[attr-defined]
    if "bad" in text:
        raise RuntimeError("this row cannot be classified")
    return json.dumps({"label": text.split()[-1].upper(), "stars": len(text)})


CELL_SETUP = """
import pandas as pd, pydantic
class Review(pydantic.BaseModel):
    label: str
    stars: int
reviews = pd.DataFrame({"text": ["good one", "bad one", "fine one"]}, index=["a", "b", "c"])
"""


@pytest.fixture
def mapped(shell: InteractiveShell, session: NotebookSession, tmp_path: Path) -> FunctionModel:
    session.reopen(str(tmp_path / "store.sqlite"))
    model = FunctionModel(_answer, profile=ModelProfile(name="function", provider="test", structured_output="native"))
    session.register_model("fake", model)
    run_ok(shell, CELL_SETUP)
    return model


def test_map_cell_binds_the_result_and_leaves_a_record(
    shell: InteractiveShell, mapped: FunctionModel, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, "%%agent --map reviews --output Review --model fake\nSay {{text}}")
    out = shell.user_ns["reviews_result"]
    assert isinstance(out, pd.DataFrame)
    assert list(out.index) == ["a", "b", "c"]
    assert list(out["status"]) == ["done", "failed", "done"]
    assert out.loc["a", "label"] == "ONE"
    assert "cannot be classified" in out.loc["b", "error"]
    printed = capsys.readouterr().out
    assert "reviews: completed" in printed
    assert "2 done" in printed
    assert "cannot be classified" in printed  # the errors table of the record


def test_running_the_cell_again_skips_the_rows_already_done(
    shell: InteractiveShell, mapped: FunctionModel, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "%%agent --map reviews --into labelled --output Review --model fake\nSay {{text}}"
    run_ok(shell, cell)
    calls = len(mapped.requests)
    capsys.readouterr()
    run_ok(shell, cell)
    assert len(mapped.requests) == calls  # every row was done or failed: nothing ran again
    assert "skipped 3 rows already done" in capsys.readouterr().out
    assert list(shell.user_ns["labelled"]["status"]) == ["done", "failed", "done"]


def test_bad_map_cells_fail_with_a_usage_error(shell: InteractiveShell, mapped: FunctionModel) -> None:
    error = run_error(shell, "%%agent --map nowhere --model fake\n{{text}}")
    assert isinstance(error, UsageError)
    assert "not defined" in str(error)
    error = run_error(shell, "%%agent --map reviews --model fake\n{{missing}}")
    assert isinstance(error, UsageError)
    assert "no column 'missing'" in str(error)
    error = run_error(shell, "%%agent --map reviews --output reviews --model fake\n{{text}}")
    assert "must be a class" in str(error)
    error = run_error(shell, "%%agent --map reviews --executor spark --model fake\n{{text}}")
    assert "--executor" in str(error)


def test_agent_batch_status_and_cancel(
    shell: InteractiveShell, session: NotebookSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.harness.batch.batch_server import BatchServer
    from tests.harness.batch.test_batch_executor import openai_answer

    server = BatchServer(openai_answer, polls_to_finish=1_000).start()
    try:
        session.reopen(str(tmp_path / "store.sqlite"))
        model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=server.base_url, api_key="sk-test-magic")
        session.register_model("batchy", model)
        token = CancellationToken()
        threading.Thread(target=lambda: (server.submitted.wait(), token.cancel("Stop")), daemon=True).start()
        agent_map(
            [{"t": f"#{i}"} for i in range(3)],
            "{{t}}",
            model=model,
            executor="batch",
            name="tickets",
            checkpoint=session.store_path,
            cancellation=token,
            executor_options={"poll_s": 0.05, "window_s": 0.05, "on_stop": "detach"},  # left running
        )
        table = shell.run_line_magic("agent", "batch status")
        assert list(table["state"]) == ["submitted"]
        job = table["job"][0]
        capsys.readouterr()
        shell.run_line_magic("agent", f"batch status {job} --model batchy")
        assert f"batch job {job} (tickets): in_progress" in capsys.readouterr().out
        shell.run_line_magic("agent", "batch resume --model batchy")
        assert "still running at the provider: run the map cell again" in capsys.readouterr().out
        shell.run_line_magic("agent", f"batch cancel {job} --model batchy")
        assert "cancelling" in capsys.readouterr().out
        assert list(shell.run_line_magic("agent", "batch status")["state"]) == ["cancelled"]
        error = run_error(shell, "%agent batch cancel batch_nope --model batchy")
        assert "no batch job" in str(error)
    finally:
        server.stop()
