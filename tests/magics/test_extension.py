"""Loading and unloading the extension, its traitlets settings, and the session's lifecycle."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

import tinyagents_nb
from tinyagents_nb.harness import StoreError
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import AgentMagics, NotebookSession, get_session

from .conftest import forget_shell, last_run, run_ok


def test_load_registers_both_magics_and_unload_removes_them(shell: InteractiveShell) -> None:
    table = shell.magics_manager.magics
    assert "agent" in table["line"]
    assert "agent" in table["cell"]
    session = get_session()
    shell.run_line_magic("load_ext", "tinyagents_nb")  # loading again changes nothing
    assert get_session() is session

    shell.run_line_magic("unload_ext", "tinyagents_nb")
    assert "agent" not in table["line"]
    assert "agent" not in table["cell"]
    assert "AgentMagics" not in shell.magics_manager.registry
    with pytest.raises(StoreError):  # the session was closed with the extension
        session.store.get(("x",), "y")
    assert get_session() is not session

    shell.run_line_magic("load_ext", "tinyagents_nb")
    assert "agent" in table["cell"]


def test_top_level_hooks_delegate_to_magics(shell: InteractiveShell) -> None:
    shell.run_line_magic("unload_ext", "tinyagents_nb")
    tinyagents_nb.load_ipython_extension(shell)
    assert "agent" in shell.magics_manager.magics["cell"]
    tinyagents_nb.unload_ipython_extension(shell)
    assert "agent" not in shell.magics_manager.magics["cell"]
    shell.run_line_magic("load_ext", "tinyagents_nb")  # for the fixture's teardown


def test_config_traits_reach_the_session(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    get_session().register_model("fake", ScriptedModel(["configured"]))
    run_ok(shell, '%config AgentMagics.default_model = "fake"')
    run_ok(shell, '%config AgentMagics.system_prompt = "Be terse."')
    run_ok(shell, "%config AgentMagics.max_model_calls = 3")
    run_ok(shell, "%config AgentMagics.throttle_hz = 30.0")
    session = get_session()
    assert (session.default_model, session.system_prompt, session.max_model_calls) == ("fake", "Be terse.", 3)
    run_ok(shell, "%%agent\nhello")
    run = last_run(shell)
    assert run.model == "fake"
    assert run.final_text == "configured"
    assert run.harness.system_prompt == "Be terse."
    assert run.harness.policy.limits.max_model_calls == 3
    run_ok(shell, "%config AgentMagics")
    out = capsys.readouterr().out
    for name in ("default_model", "blocking", "throttle_hz", "max_model_calls", "store_path"):
        assert f"AgentMagics.{name}" in out


def test_bad_config_values_are_rejected(shell: InteractiveShell) -> None:
    magics_obj = shell.magics_manager.registry["AgentMagics"]
    with pytest.raises(Exception, match="throttle_hz"):
        magics_obj.throttle_hz = 0.0
    with pytest.raises(Exception, match="max_model_calls"):
        magics_obj.max_model_calls = 0


def test_config_file_settings_apply_at_load(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.AgentMagics.default_model = "openai:gpt-4o-mini"
    config.AgentMagics.store_path = str(tmp_path) + "/agent.sqlite"
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(config=config)
    try:
        ip.run_line_magic("load_ext", "tinyagents_nb")
        session = get_session()
        assert session.default_model == "openai:gpt-4o-mini"
        assert session.store_path.endswith("agent.sqlite")
    finally:
        ip.run_line_magic("unload_ext", "tinyagents_nb")
        InteractiveShell.clear_instance()
        forget_shell(ip)


def test_store_path_change_waits_for_reset(
    shell: InteractiveShell, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = f"{tmp_path}/nb.sqlite"
    run_ok(shell, f'%config AgentMagics.store_path = "{path}"')
    assert "next %agent reset" in capsys.readouterr().out
    assert get_session().store_path != path
    run_ok(shell, "%agent reset")
    assert get_session().store_path == path


def test_a_persistent_store_keeps_the_thread_across_sessions(tmp_path: object) -> None:
    path = f"{tmp_path}/keep.sqlite"
    first = NotebookSession(store_path=path)
    thread = first.use_thread("analysis-1")
    first.close()
    second = NotebookSession(store_path=path)
    try:
        assert second.thread_id == thread == "analysis-1"
    finally:
        second.close()


def test_help_is_generated_from_the_argument_definitions() -> None:
    cell_help = AgentMagics.agent_cell.__doc__ or ""
    line_help = AgentMagics.agent_line.__doc__ or ""
    for flag in ("--model", "--system", "--tools", "--thread", "--new-thread", "--max-model-calls", "--timeout"):
        assert flag in cell_help
    assert "--wait" in cell_help
    assert "--name" in cell_help
    assert "steer" in line_help
    assert "journal" in line_help
    assert "COMMAND" in line_help


def test_question_mark_shows_the_help(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run_ok(shell, "%agent?")
    assert "Inspect and control" in capsys.readouterr().out
