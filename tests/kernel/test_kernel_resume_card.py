"""``%agent resume`` in a real kernel: the resumed run's approval cards get their clicks, and Stop stays live.

A run whose kernel died is written to the session's store as the journal leaves it: the model asked
for ``charge`` (not idempotent, cut off while it ran) and ``send`` (needs an approval, never started).
``%agent resume`` is sent as a frontend sends it; the test finds the cards' buttons in the widget
messages on IOPub and clicks them while the cell waits: **Run again** / **Skip** (with a note typed in
the card) for the cut-off call, then the usual Approve / Deny for the pending one. Stop on the card
ends the resumed run and leaves the original resumable; executed headless, both calls are skipped
with a note at once. On both ipykernel majors (the ``kernel`` fixture).
"""

from __future__ import annotations

import re

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = '''
%load_ext tinyagents_nb
import sqlite3
from tinyagents_nb.harness import ToolMessage, tool
from tinyagents_nb.harness.durable import RunStore
from tinyagents_nb.harness.testkit import FunctionModel
from tinyagents_nb.magics import get_session
charged, sent, seen = [], [], []

@tool
def charge(amount: int) -> str:
    """Charge the card (not safe to repeat)."""
    charged.append(amount)
    return f"charged {amount}"

@tool(requires_approval=True)
def send(to: str) -> str:
    """Send the receipt."""
    sent.append(to)
    return f"sent to {to}"

def answer(request):
    seen.append({m.name: (m.text, m.is_error) for m in request.messages if isinstance(m, ToolMessage)})
    return "all done"

session = get_session()
session.register_model("trial", FunctionModel(answer, model_name="trial"))
for t in (charge, send):
    session.register_tool(t)

def interrupted(run_id):
    """A run as a killed kernel leaves it: charge cut off while it ran, send not started."""
    with RunStore(session.store_path) as store:
        store.start_run(run_id, agent=None, model="trial", prompt="pay and send")
        store.add_step(run_id, "input", {"messages": [{"role": "user", "text": "pay and send"}]})
        calls = [{"id": "c1", "name": "charge", "arguments": {"amount": 5}},
                 {"id": "c2", "name": "send", "arguments": {"to": "ann"}}]
        usage = {"input_tokens": 100, "output_tokens": 10}
        store.add_step(run_id, "model", {"message": {"role": "assistant", "tool_calls": calls}, "usage": usage, "model": "trial"})
        store.add_step(run_id, "tool.started", {"id": "c1", "name": "charge"})
    with sqlite3.connect(session.store_path) as conn:  # its kernel is gone
        conn.execute("UPDATE tinyagents_runs SET owner = 'elsewhere:1:x' WHERE run_id = ?", (run_id,))

def status(run_id):
    with RunStore(session.store_path) as store:
        return store.get(run_id).status
'''


def _button(description: str):  # type: ignore[no-untyped-def]
    """Whether the card with this button is complete: its row of buttons exists, so its clicks have a handler.

    A button's widget is opened (``comm_open``) before the card registers its ``on_click``; the row
    that holds it is made after, so a click sent once the row exists is never dropped.
    """

    def found(cell: LiveCell) -> bool:
        try:
            button = cell.widget("ButtonModel", description=description, disabled=False)
        except LookupError:
            return False
        rows = [s for s in cell.models.values() if s.get("_model_name") == "HBoxModel"]
        return any(f"IPY_MODEL_{button}" in row.get("children", ()) for row in rows)

    return found


@pytest.fixture(scope="module")
def ready(kernel: KernelHarness) -> KernelHarness:
    setup = kernel.execute(SETUP)
    assert setup.status == "ok", setup.error
    return kernel


def test_run_again_and_approve_on_the_resumed_runs_cards(ready: KernelHarness) -> None:
    kernel = ready
    kernel.execute("interrupted('run-a')")
    cell = LiveCell(kernel, "%agent resume run-a")
    assert cell.pump(_button("Run again")), cell.result.stdout
    assert "The run was interrupted while it ran" in cell.html()
    kernel.click(cell.widget("ButtonModel", description="Run again"))
    assert cell.pump(_button("Approve")), cell.result.stdout  # the pending approval, asked again as usual
    kernel.click(cell.widget("ButtonModel", description="Approve"))
    result = cell.finish()
    assert result.status == "ok", result.error
    assert "all done" in result.text()
    assert "ran again: charge (by dashboard)" in result.text()  # the record says what the card decided
    assert "[completed · run " in result.stdout
    assert "resumed run run-a from step 2" in result.stdout
    assert kernel.value("charged") == [5]  # run again: exactly once more
    assert kernel.value("sent") == ["ann"]
    assert kernel.value("seen[-1]") == {"charge": ["charged 5", False], "send": ["sent to ann", False]}
    assert kernel.value("status('run-a')") == "resumed"


def test_skip_with_a_note_and_deny_on_the_resumed_runs_cards(ready: KernelHarness) -> None:
    kernel = ready
    kernel.execute("interrupted('run-b'); charged.clear(); sent.clear()")
    cell = LiveCell(kernel, "%agent resume run-b")
    assert cell.pump(_button("Skip"))
    note = cell.widget("TextModel", placeholder="Note to the model (on Skip)")
    cell.send_state(note, value="the card was charged already")
    kernel.click(cell.widget("ButtonModel", description="Skip"))
    assert cell.pump(_button("Deny"))
    kernel.click(cell.widget("ButtonModel", description="Deny"))
    result = cell.finish()
    assert result.status == "ok", result.error
    assert "skipped: charge (by dashboard: the card was charged already)" in result.text()
    assert kernel.value("charged") == []
    assert kernel.value("sent") == []
    told = kernel.value("seen[-1]")
    assert told["charge"][1]
    assert "not run again" in told["charge"][0]
    assert "the card was charged already" in told["charge"][0]  # the note reaches the model
    assert told["send"][1]
    assert "denied by a person" in told["send"][0]


def test_stop_on_the_card_then_a_headless_resume_skips_with_a_note(ready: KernelHarness) -> None:
    kernel = ready
    kernel.execute("interrupted('run-c'); charged.clear(); sent.clear(); seen.clear()")
    cell = LiveCell(kernel, "%agent resume run-c")
    assert cell.pump(_button("Run again"))
    kernel.click(cell.widget("ButtonModel", description="Stop"))
    result = cell.finish()
    assert result.status == "ok", result.error
    stopped = re.search(r"\[cancelled · run (\S+) resumed run run-c", result.stdout)
    assert stopped is not None, result.stdout
    assert kernel.value("seen") == []  # no model call
    assert kernel.value("charged") == []  # nothing ran
    # The job stays resumable: the original, when nothing of the stopped run was journaled yet, else the
    # stopped run (journaled from before its calls were settled), which %agent resume takes by name.
    left = "run-c" if kernel.value("status('run-c')") == "interrupted" else stopped.group(1)
    headless = kernel.execute(f"%agent resume {left}", allow_stdin=False)  # nbclient, papermill, nbval
    assert headless.status == "ok", headless.error
    assert "[completed · run " in headless.stdout
    told = kernel.value("seen[-1]")
    assert told["charge"][1]
    assert "not run again" in told["charge"][0]
    assert told["send"][1]
    assert "denied automatically" in told["send"][0]
    assert kernel.value("charged") == []
    assert kernel.value("sent") == []
