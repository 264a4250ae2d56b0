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
    assert "· 2 tool calls ·" in result.text()  # the calls settled on the cards count (not "0 tool calls")
    assert kernel.value("charged") == [5]  # run again: exactly once more
    assert kernel.value("sent") == ["ann"]
    assert kernel.value("seen[-1]") == {"charge": ["charged 5", False], "send": ["sent to ann", False]}
    assert kernel.value("status('run-a')") == "resumed"


RLM_SETUP = r"""
import asyncio
from tinyagents_nb.harness import ModelResponse
from tinyagents_nb.harness.testkit import ScriptedModel
logs = ["ERROR a", "INFO b", "ERROR c"]

def py(code):
    return ScriptedModel.text(f"```python\n{code}\n```")

def interrupted_rlm():
    # an RLM cell cut off in its first block (its end undone, as a killed kernel leaves it): its run id
    session.register_model("rlm-first", FunctionModel(lambda request: py("n = len(logs)"), model_name="rlm-first"))
    get_ipython().run_cell_magic("agent", "--rlm local --context logs --model rlm-first --wait --max-model-calls 1", "How many?")
    with RunStore(session.store_path) as store:
        run = [r for r in store.runs() if r.agent == "rlm"][0]
        last = max(s.seq for s in store.steps(run.run_id) if s.kind == "model")
    with sqlite3.connect(session.store_path) as conn:
        conn.execute("UPDATE tinyagents_runs SET status = 'running', ended_at = NULL, owner = 'elsewhere:1:x' WHERE run_id = ?", (run.run_id,))
        conn.execute("DELETE FROM tinyagents_steps WHERE run_id = ? AND seq > ?", (run.run_id, last))
    return run.run_id

async def slow(request):  # the resumed run's model: long enough to press Stop while the cell waits
    await asyncio.sleep(60)
    return py("FINAL(len(logs))")
"""


def test_a_resumed_rlm_run_is_a_waiting_cell_whose_dashboard_stop_works(ready: KernelHarness) -> None:
    kernel = ready
    setup = kernel.execute(RLM_SETUP)
    assert setup.status == "ok", setup.error
    made = kernel.execute("rlm_id = interrupted_rlm(); print(rlm_id)")
    assert made.status == "ok", made.error
    rlm_id = made.stdout.strip().splitlines()[-1]
    kernel.execute('session.register_model("rlm-first", FunctionModel(slow, model_name="rlm-first"))')
    cell = LiveCell(kernel, f"%agent resume {rlm_id[-8:]}")
    stop = _button("Stop")
    assert cell.pump(lambda c: "resuming interrupted RLM run" in c.result.stdout and stop(c)), cell.result.stdout
    button = next(  # this cell's dashboard's Stop, as a %%agent --rlm cell shows it
        comm
        for comm in cell.opened
        if cell.models[comm].get("_model_name") == "ButtonModel" and cell.models[comm].get("description") == "Stop"
    )
    kernel.click(button)
    result = cell.finish()
    assert result.status == "ok", result.error
    assert re.search(rf"\[cancelled · run [0-9a-f]{{8}} resumed RLM run {rlm_id[-8:]} from step ", result.stdout)
    assert rlm_id not in result.text()  # short ids only
    assert "1 code step" in result.text()  # the block the restart cut off, skipped with a note: a code step
    kernel.execute(
        'session.register_model("rlm-first", FunctionModel(lambda r: py("FINAL(len(logs))"), model_name="rlm-first"))'
    )
    left = kernel.value(f"[r.run_id for r in RunStore(session.store_path).runs() if r.resumed_from == {rlm_id!r}][0]")
    again = kernel.execute(f"%agent resume {left[-8:]}", allow_stdin=False)  # headless this time
    assert again.status == "ok", again.error
    assert "answer: 3" in again.text()
    assert "[completed · run " in again.stdout


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
