"""Durable runs in a real kernel: SIGKILLed at random moments, restarted, and resumed with ``%agent resume``.

Each trial starts an ipykernel (jupyter_client, as a frontend does) for a notebook whose path the
kernel learns from ``JPY_SESSION_NAME``, so the run is journaled to the default store beside it
(``.tinyagents/trial.sqlite``). A ``%%agent`` run calls a non-idempotent tool, an idempotent one and
one that waits for an approval; the kernel is SIGKILLed during a model stream, inside a tool, while
the approval waits, or at a random time. A new kernel then loads the extension (which says there is an
interrupted run) and resumes it. Every trial checks: the run completes; a non-idempotent side effect
happened at most once (exactly once when the approval is given again on resume); spend is counted
once; and the transcript sent to the model answers every tool call.

The default suite runs three trials on each ipykernel major (inside a tool, while an approval
waits, at a random moment) and one where the kernel is killed again while the resume's Run again
card waits (the cut-off call must never run unasked after that); ``TINYAGENTS_KILL_TRIALS=N`` runs N random ones, the figures in docs/durable-runs.md.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tinyagents_nb.harness import AssistantMessage, ToolMessage, load_messages
from tinyagents_nb.harness.durable import RunStore

from ._kernel import KernelHarness, LiveCell
from .conftest import K6_PYTHON

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

HERE = Path(__file__).resolve().parent
KINDS = ("stream", "tool", "approval", "random")
TOKENS_PER_CALL = 110


def _kernel(folder: Path, python: str) -> KernelHarness:
    env: dict[str, str | None] = {
        "JPY_SESSION_NAME": str(folder / "trial.ipynb"),
        "TINYAGENTS_NB_STORE_DIR": None,  # the default place: beside the notebook
        "DURABLE_FOLDER": str(folder),
    }
    kernel = KernelHarness(python, folder, env=env)
    kernel.execute(f"import sys; sys.path.insert(0, {str(HERE)!r})")
    return kernel


def _load(kernel: KernelHarness, approvals: str) -> str:
    out = kernel.execute("%load_ext tinyagents_nb").stdout
    setup = kernel.execute(
        f"import durable_trial; durable_trial.setup()\n%config AgentMagics.approvals = {approvals!r}"
    )
    assert setup.status == "ok", setup.error
    return out


def _wait_phase(folder: Path, prefix: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        phase = (folder / "phase").read_text() if (folder / "phase").exists() else ""
        if phase.startswith(prefix):
            return
        time.sleep(0.005)
    raise AssertionError(f"the run never reached {prefix!r}")


def _kill(kernel: KernelHarness) -> None:
    os.kill(kernel.km.provisioner.pid, signal.SIGKILL)  # type: ignore[union-attr]
    kernel.km.provisioner.process.wait()  # type: ignore[union-attr]
    try:
        kernel.close()
    except Exception:  # the kernel is already gone
        pass


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _transcript_answers_every_call(store: RunStore, run_id: str) -> None:
    """What the resumed run sent its model: every tool call has exactly one answer, after it."""
    messages: list[Any] = []
    for step in store.steps(run_id):
        if step.kind == "input":
            messages = load_messages(step.data["messages"])
        elif step.kind in ("model", "tool.done"):
            messages += load_messages([step.data["message"]])
    open_calls: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"calls {open_calls} were never answered"
            open_calls = [c.id for c in message.tool_calls]
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"an answer to no call: {message.tool_call_id}"
            open_calls.remove(message.tool_call_id)
    assert not open_calls


def trial(folder: Path, kind: str, rng: random.Random, python: str = sys.executable) -> str:
    """One kill-restart-resume trial; returns what happened (``interrupted`` / ``before`` / ``after``)."""
    folder.mkdir(parents=True)
    (folder / "trial.ipynb").write_text("{}")
    approve_again = kind == "approval" or rng.random() < 0.5
    kernel = _kernel(folder, python)
    try:
        _load(kernel, "ask")
        kernel.kc.execute("%%agent --model trial\npay, look up and send the receipt", allow_stdin=True)
        if kind == "stream":
            _wait_phase(folder, f"stream {rng.randint(1, 4)}")
            time.sleep(rng.uniform(0, 0.2))
        elif kind == "tool":
            _wait_phase(folder, f"tool {rng.choice(['charge', 'lookup'])}")
        elif kind == "approval":
            _wait_phase(folder, "approval send")
            time.sleep(0.2)
        else:
            time.sleep(rng.uniform(0.5, 3.5))
    finally:
        _kill(kernel)
    effects = {name: _lines(folder / f"{name}.log") for name in ("charge", "lookup", "send")}
    store_path = folder / ".tinyagents" / "trial.sqlite"
    assert store_path.exists(), "the default store is beside the notebook"
    with RunStore(store_path) as store:
        (original,) = store.runs()
    if original.status == "completed":
        return "after"
    assert original.status == "interrupted"
    kernel = _kernel(folder, python)
    try:
        said = _load(kernel, "approve" if approve_again else "deny")
        assert "1 interrupted run" in said
        assert "%agent resume" in said
        out = kernel.execute("%agent resume", timeout=60).text()
    finally:
        kernel.close()
    assert "all done" in out, out
    with RunStore(store_path) as store:
        (first, _) = sorted(store.runs(), key=lambda r: r.started_at)
        resumed = store.get(str(first.resumed_by))
        assert first.status == "resumed"
        assert resumed is not None
        assert resumed.status == "completed"
        assert resumed.resumed_from == first.run_id
        _transcript_answers_every_call(store, resumed.run_id)
        calls = first.model_calls + resumed.model_calls  # each model call journaled once, in one run
        assert f"{calls * TOKENS_PER_CALL:,} tokens in all" in out  # spend counted once
    after = {name: _lines(folder / f"{name}.log") for name in ("charge", "lookup", "send")}
    assert after["lookup"] >= 1  # idempotent: run again when cut off
    for name in ("charge", "send"):  # at most once unless a person (here: the setting) approved it again
        if approve_again:
            assert after[name] <= effects[name] + 1
            assert after[name] >= 1
        else:
            assert after[name] <= 1
    if kind == "approval":
        assert effects["send"] == 0
        assert after["send"] == 1  # approved again: exactly once
    return "interrupted"


def _count() -> int:
    return int(os.environ.get("TINYAGENTS_KILL_TRIALS", "0"))


def _python(major: int) -> str:
    if major == 7:
        return sys.executable
    if not K6_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"the ipykernel 6.x environment is missing ({K6_PYTHON}); ./dev test creates it")
        pytest.skip(f"no ipykernel 6.x environment at {K6_PYTHON} (./dev test creates .venv-k6)")
    return str(K6_PYTHON)


@pytest.mark.parametrize("major", [7, 6], ids=["ipykernel7", "ipykernel6"])
@pytest.mark.parametrize("kind", ["tool", "approval", "random"])
def test_a_killed_kernel_resumes_its_run(kind: str, major: int, tmp_path: Path) -> None:
    trial(tmp_path / kind, kind, random.Random(kind), _python(major))


@pytest.mark.skipif(not _count(), reason="set TINYAGENTS_KILL_TRIALS=N for the many-trial run")
@pytest.mark.parametrize("major", [7, 6], ids=["ipykernel7", "ipykernel6"])
def test_many_random_kills(major: int, tmp_path: Path) -> None:
    python = _python(major)
    rng = random.Random(int(os.environ.get("TINYAGENTS_KILL_SEED", "7")))
    outcomes: dict[str, int] = {}
    for index in range(_count()):
        kind = KINDS[index % len(KINDS)]
        outcome = trial(tmp_path / f"t{index}", kind, rng, python)
        outcomes[f"{kind}:{outcome}"] = outcomes.get(f"{kind}:{outcome}", 0) + 1
    print(f"\nkill trials: {sorted(outcomes.items())}")


def test_a_kernel_killed_while_the_resume_card_waits_leaves_the_run_resumable(tmp_path: Path) -> None:
    """Killed inside ``charge``, killed again while ``%agent resume``'s Run again card waits, resumed with nobody to ask.

    One major only (15 s, three kernels): what it checks is that nothing of the resumed run is
    journaled before the card is answered; the clicks' delivery on both majors is
    ``test_kernel_resume_card``'s.
    """
    python = sys.executable
    folder = tmp_path / "card"
    folder.mkdir()
    (folder / "trial.ipynb").write_text("{}")
    kernel = _kernel(folder, python)
    try:
        _load(kernel, "ask")
        kernel.kc.execute("%%agent --model trial\npay, look up and send the receipt", allow_stdin=True)
        _wait_phase(folder, "tool charge")
    finally:
        _kill(kernel)
    assert _lines(folder / "charge.log") == 1
    kernel = _kernel(folder, python)
    try:
        _load(kernel, "ask")
        cell = LiveCell(kernel, "%agent resume")
        assert cell.pump(lambda c: any(s.get("description") == "Run again" for s in c.models.values()), timeout=30)
    finally:
        _kill(kernel)  # while the card waits: nothing of the resumed run was journaled
    store_path = folder / ".tinyagents" / "trial.sqlite"
    with RunStore(store_path) as store:  # the job is still resumable: the original, or the resumed run if it
        interrupted = [r for r in store.runs() if r.status == "interrupted"]  # was journaled before its card
        assert len(interrupted) == 1
    assert _lines(folder / "charge.log") == 1
    kernel = _kernel(folder, python)
    try:
        _load(kernel, "deny")  # nobody approves it this time: the cut-off charge must not run again
        out = kernel.execute("%agent resume", timeout=60).text()
    finally:
        kernel.close()
    assert "all done" in out, out
    assert _lines(folder / "charge.log") == 1  # never run unasked, however often the resume was cut off
    assert _lines(folder / "send.log") == 0  # denied
    assert _lines(folder / "lookup.log") >= 1
