"""The one-line summaries the magics print: honest about what a stop cut off."""

from __future__ import annotations

import anyio
import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_ok

pytestmark = pytest.mark.anyio


async def test_a_stopped_run_reports_what_streamed_as_an_estimate_and_no_price(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.register_model("talker", StreamingMock("word " * 500, chunk_delay_s=0.005))
    run_ok(shell, "%%agent --background --model talker --name chat\ntalk")
    handle = last_run(shell)
    with anyio.fail_after(10):
        while handle.dashboard.transcript.text().count("word") < 20:  # noqa: ASYNC110 - plain state
            await anyio.sleep(0.01)
    handle.cancel("stop button")
    await handle.wait()
    with anyio.fail_after(10):
        while not handle.dashboard.state.finished:  # noqa: ASYNC110 - plain state
            await anyio.sleep(0.01)
    with anyio.fail_after(10):  # the cell's view swaps the live dashboard for the record when the run ends
        while "text/markdown" not in (bundle := handle._repr_mimebundle_()):  # noqa: ASYNC110 - plain state
            await anyio.sleep(0.01)
    line = bundle["text/plain"].splitlines()[-1]  # the record ends with the run's one-line summary
    assert line.startswith("[cancelled")
    assert "0 model calls + 1 interrupted" in line
    assert "streamed (estimate)" in line
    assert line.endswith("cost unknown]")
    assert "$0.000000" not in line
