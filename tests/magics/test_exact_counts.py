"""``%config AgentMagics.token_counting = "exact"``: the notebook's runs ask the host, and ``%agent context`` says so."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tests.harness.fake_llama import FakeLlama
from tests.harness.replay_server import ReplayServer
from tinyagents_nb.harness import ContextWindow, ModelProfile
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_ok


@pytest.fixture
def llama() -> Iterator[tuple[ReplayServer, FakeLlama]]:
    server = ReplayServer().start()
    try:
        yield server, FakeLlama(server)
    finally:
        server.stop()


def test_exact_counting_is_a_setting_and_context_says_exact(
    shell: InteractiveShell,
    session: NotebookSession,
    llama: tuple[ReplayServer, FakeLlama],
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, fake = llama
    name = f"local-{uuid.uuid4().hex[:8]}"
    profile = ModelProfile(name=name, provider="compatible", context_window=2048)  # a local server's -c 2048
    model = OpenAIChatModel(name, provider=ProviderSpec.compatible(base_url=server.base_url), profile=profile)
    session.register_model("local", model)
    shell.run_line_magic("agent", "price local 0 0")
    run_ok(shell, "%%agent --model local\nhello")
    assert fake.calls["/apply-template"] == 0  # the default estimates
    run_ok(shell, '%config AgentMagics.token_counting = "exact"')
    assert session.token_counting == "exact"
    run_ok(shell, "%%agent --model local\nhello again")
    assert fake.calls["/apply-template"] == 1
    window = last_run(shell).context.context_window
    assert isinstance(window, ContextWindow)
    assert window.exact
    capsys.readouterr()
    run_ok(shell, "%agent context")
    out = capsys.readouterr().out
    assert "exact: counted by the host's tokenizer before the last model call (its usage agreed)" in out
    assert f"{window.estimated_prompt_tokens:,} of" in out
    run_ok(shell, '%config AgentMagics.token_counting = "estimate"')
    run_ok(shell, "%%agent --model local\nand again")
    assert fake.calls["/apply-template"] == 1
    assert "measured: the provider's count" in _context(shell, capsys)


def _context(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    run_ok(shell, "%agent context")
    return capsys.readouterr().out
