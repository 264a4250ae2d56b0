"""Steering feedback agrees with itself and reaches the record (ipykernel 6.x and 7.x, clicks as JupyterLab sends them)."""

from __future__ import annotations

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel, StreamingMock
from tinyagents_nb.magics import agent_tool, get_session
get_session().register_model('slow', StreamingMock([f'word{i} ' for i in range(600)], chunk_delay_s=0.05))

@agent_tool
def noop() -> str:
    \"\"\"Do nothing.\"\"\"
    return 'ok'

steps = [ScriptedModel.tool_call('noop', {}) for _ in range(8)] + ['done']
get_session().register_model('stepper', SlowModel(ScriptedModel(steps), delay_s=0.7))
"""


@pytest.fixture
def ready(kernel: KernelHarness) -> KernelHarness:
    if not kernel.value("'get_session' in dir()"):
        result = kernel.execute(SETUP)
        assert result.status == "ok", result.error
    return kernel


def _send(cell: LiveCell, kernel: KernelHarness, text: str) -> None:
    box = cell.widget("TextModel")
    cell.send_state(box, value=text)
    kernel.click(cell.widget("ButtonModel", description="Send"))


def test_a_message_sent_while_paused_is_said_once_and_the_same_way(ready: KernelHarness) -> None:
    cell = LiveCell(ready, "%%agent --model stepper --name p1\nWork in steps")
    assert cell.pump(lambda c: "Pause" in str(c.models), timeout=20)
    ready.click(cell.widget("ButtonModel", description="Pause"))
    assert cell.pump(lambda c: "paused — Resume continues" in c.html(), timeout=30)
    _send(cell, ready, "Only report the total.")
    added = "added to the conversation (the next model call reads it): Only report the total."
    assert cell.pump(lambda c: added in c.html(), timeout=10), cell.html()[-2000:]
    assert "queued for the next model call" not in cell.html()  # never "queued" beside "added"
    ready.click(cell.widget("ButtonModel", description="Stop"))
    assert cell.pump(lambda c: "cancelled" in c.markdown(), timeout=20)
    assert cell.finish().status == "ok"


def test_a_message_the_run_never_read_is_in_the_record(ready: KernelHarness) -> None:
    cell = LiveCell(ready, "%%agent --model slow --name p2\nAnother long story")
    assert cell.pump(lambda c: "word5" in c.html())
    _send(cell, ready, "Wrap up in $5 words.")
    assert cell.pump(lambda c: "queued for the next model call: Wrap up" in c.html(), timeout=10)
    ready.click(cell.widget("ButtonModel", description="Stop"))
    assert cell.pump(lambda c: "cancelled" in c.markdown(), timeout=20)
    assert cell.finish().status == "ok"
    record = cell.markdown()
    assert "*not delivered (the run had no further step):* Wrap up in <code>\\$5</code> words." in record
    [output] = cell.result.outputs
    assert "not delivered (the run had no further step): Wrap up in $5 words." in output["data"]["text/plain"]
