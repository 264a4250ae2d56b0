"""``NotebookSession`` and ``NotebookRun`` from Python, without magics (but for the one-per-kernel
session, which the extension installs): the API beside ``%%agent``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import (
    ConfigurationError,
    ModelNotFound,
    RunContext,
    SteeringHandle,
    UserMessage,
)
from tinyagents_nb.harness.observability import events_to_dataframe
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel
from tinyagents_nb.magics import NotebookRun, NotebookSession, get_session


@pytest.fixture
def session() -> Iterator[NotebookSession]:
    created = NotebookSession()
    yield created
    created.close()


def test_get_session_is_one_per_process_until_the_extension_is_unloaded(shell: InteractiveShell) -> None:
    loaded = get_session()
    assert get_session() is loaded
    assert isinstance(loaded.context, RunContext)
    assert loaded.context.thread_id == loaded.thread_id
    shell.run_line_magic("unload_ext", "tinyagents_nb")
    first = get_session()  # created on first use without the extension
    assert first is not loaded
    assert get_session() is first
    shell.run_line_magic("load_ext", "tinyagents_nb")
    assert get_session() is first  # the extension adopts it; the fixture's unload closes it


def test_runs_derive_from_the_root_and_accept_steering(session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel(["a"]))
    run = session.new_run("hello", model="fake")
    assert isinstance(run, NotebookRun)
    assert run.status == "pending"
    assert run.mode is None
    ctx = run.context
    assert ctx.events is session.context.events
    assert ctx.usage is session.context.usage
    assert ctx.stores is session.context.stores
    assert ctx.cancellation is not session.context.cancellation
    assert isinstance(ctx.steering, SteeringHandle)
    assert ctx.steering.policy.permits("inject_message")
    assert ctx.thread_id == session.thread_id
    assert ctx.depth == 0
    assert session.runs == [run]
    assert session.active_runs() == []
    assert "status='pending'" in repr(run)
    assert run._repr_mimebundle_() == {"text/plain": f"<tinyagents run {run.label}: pending>"}


@pytest.mark.anyio
async def test_a_run_started_from_python_is_awaitable(session: NotebookSession) -> None:
    model = ScriptedModel(["first", "second"])
    session.register_model("fake", model)
    first = session.new_run("one", model="fake")
    assert (await first.result()).final_text == "first"  # wait() starts a pending run on this loop
    second = session.new_run("two", model="fake")
    second.start()
    second.start()  # idempotent
    assert (await second).final_text == "second"
    assert model.requests[1].messages[-1] == UserMessage(text="two")
    assert [m.text for m in session.messages()] == ["one", "first", "two", "second"]


def test_register_model_accepts_a_factory_and_replaces(session: NotebookSession) -> None:
    built: list[int] = []

    def factory() -> ScriptedModel:
        built.append(1)
        return ScriptedModel(["x"])

    session.register_model("lazy", factory)
    assert built == []
    model = session.resolve_model("lazy")
    assert session.resolve_model("lazy") is model
    assert built == [1]
    replacement = ScriptedModel(["y"])
    session.register_model("lazy", replacement)
    assert session.resolve_model("lazy") is replacement


def test_model_errors_are_typed(session: NotebookSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelNotFound):
        session.new_run("hi", model="no-such-model")
    with pytest.raises(ConfigurationError, match="no API key"):
        session.new_run("hi", model="openai:gpt-4o-mini")
    with pytest.raises(ConfigurationError, match="empty"):
        session.new_run("  ")
    assert session.runs == []


def test_model_instances_are_reused_per_spec(session: NotebookSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    first = session.resolve_model("openai:gpt-4o-mini")
    assert session.resolve_model("openai:gpt-4o-mini") is first  # one HTTP client pool per spec
    assert session.resolve_model().model_name == "offline-demo"


@pytest.mark.parametrize("bad", [3, "text", int, None])
def test_register_tool_rejects_non_functions(session: NotebookSession, bad: object) -> None:
    with pytest.raises(ConfigurationError):
        session.register_tool(bad)  # type: ignore[arg-type]
    assert session.tools.names() == []


def test_register_tool_renames_and_replaces(session: NotebookSession) -> None:
    def lookup(key: str) -> str:
        """Looks a key up."""
        return key

    session.register_tool(lookup)
    session.register_tool(lookup)  # re-running the defining cell is fine
    session.register_tool(lookup, name="find", description="Finds things.")
    assert session.tools.names() == ["find", "lookup"]
    assert session.tools["find"].description == "Finds things."


def test_find_run_by_name_id_suffix_and_index(session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel(["a", "b"]))
    first = session.new_run("one", model="fake", name="alpha")
    second = session.new_run("two", model="fake")
    assert session.find_run("alpha") is first
    assert session.find_run(second.run_id) is second
    assert session.find_run(second.run_id[-8:]) is second
    assert session.find_run("0") is first
    assert session.find_run("-1") is second
    assert session.find_run() is second  # no active run: the latest
    with pytest.raises(LookupError, match="no run matches 'zzz'"):
        session.find_run("zzz")
    with pytest.raises(LookupError, match="5"):
        session.find_run("5")


@pytest.mark.anyio
async def test_close_cancels_active_runs(tmp_path: Path) -> None:
    session = NotebookSession(store_path=tmp_path / "s.sqlite")
    session.register_model("slow", SlowModel(ScriptedModel(["x"]), delay_s=30))
    run = session.new_run("wait", model="slow")
    run.start()
    assert session.active_runs() == [run]
    await anyio.sleep(0.05)  # inside its model call
    session.close()
    outcome = await run.wait()
    assert outcome.status == "cancelled"
    assert "session was closed" in str(outcome.error)


@pytest.mark.anyio
async def test_the_journal_survives_in_the_store_file(tmp_path: Path) -> None:
    path = tmp_path / "nb.sqlite"
    session = NotebookSession(store_path=path)
    session.register_model("fake", ScriptedModel(["saved"]))
    run = session.new_run("persist me", model="fake")
    await run.result()
    session.close()
    reopened = NotebookSession(store_path=path)
    try:
        assert reopened.journal_frame().empty  # %agent journal shows this session's runs
        events = events_to_dataframe(reopened.journal.read_from(0))  # the file has the earlier kernel's
        assert set(events["root_run_id"]) == {run.run_id}
        assert events["kind"].iloc[-1] == "run.completed"
        assert [m.text for m in reopened.messages()] == ["persist me", "saved"]  # same thread, same history
    finally:
        reopened.close()


_START_SESSION = """
import sys
from tinyagents_nb.magics import NotebookSession
print("ready", flush=True)
sessions = []  # left open, as a kernel that goes on running leaves its session
for line in sys.stdin:  # one fresh file per round: every "kernel" opens it at the same instant
    session = NotebookSession(store_path=line.strip())
    session.store.put("kernels", sys.argv[1], True)
    sessions.append(session)
    print("done", flush=True)
"""


def test_several_kernels_start_sessions_on_one_fresh_file(tmp_path: Path) -> None:
    from tests.racers import race
    from tinyagents_nb.harness import SQLiteStore

    paths = [tmp_path / f"r{round_}" / "session.sqlite" for round_ in range(2)]
    race(_START_SESSION, [[f"k{i}"] for i in range(5)], [str(path) for path in paths])
    for path in paths:
        with SQLiteStore(path) as store:
            assert store.keys("kernels") == [f"k{i}" for i in range(5)]
