"""What of the notebook's environment reaches the RLM's child kernel: no credential, by name or by shape."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness.observability import looks_like_credential, secrets_from_env
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import RLM, KernelEnvironment

from ._scripts import py

pytestmark = pytest.mark.anyio

_PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
_FINE_GRAINED = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
_OPENAI = "sk-proj-" + "x" * 40
_SLACK = "xoxb-1234567890-abcdefghij"
_AWS = "AKIAIOSFODNN7EXAMPLE"


@pytest.mark.parametrize("value", [_PAT, _FINE_GRAINED, _OPENAI, _SLACK, _AWS, "postgres://app:hunter2pw@db:5432/x"])
def test_credential_shapes_are_recognised_whatever_their_name(value: str) -> None:
    assert looks_like_credential(value)
    assert secrets_from_env({"SOMETHING": value}) == (value,)


@pytest.mark.parametrize("value", ["/usr/bin:/bin", "https://example.org/path", "en_US.UTF-8", "postgres://db:5432/x"])
def test_ordinary_values_are_not_credentials(value: str) -> None:
    assert not looks_like_credential(value)


async def test_the_child_kernel_gets_no_credential_and_a_database_url_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_PAT", _PAT)  # "PAT" is no secret-like name: its value gives it away
    monkeypatch.setenv("DEPLOY_WITH", _FINE_GRAINED)
    monkeypatch.setenv("MY_LLM", _OPENAI)
    monkeypatch.setenv("DATABASE_URL", "postgres://app:hunter2pw@db.internal:5432/sales")
    monkeypatch.setenv("PLAIN_SETTING", "kept-as-is")
    code = (
        "import os, json\n"
        "print(json.dumps({k: os.environ.get(k) for k in "
        "['GITHUB_PAT', 'DEPLOY_WITH', 'MY_LLM', 'DATABASE_URL', 'PLAIN_SETTING']}))\n"
        "print('dump', json.dumps(dict(os.environ)))"
    )
    model = ScriptedModel([py(code), py("FINAL('done')")])
    env = KernelEnvironment()
    try:
        await RLM(model=model, environment=env).invoke("Look around.")
    finally:
        env.close()
    seen = model.requests[1].messages[-1].text
    assert '"GITHUB_PAT": null' in seen
    assert '"DEPLOY_WITH": null' in seen
    assert '"MY_LLM": null' in seen
    assert '"DATABASE_URL": "postgres://app:***@db.internal:5432/sales"' in seen
    assert '"PLAIN_SETTING": "kept-as-is"' in seen
    for secret in (_PAT, _FINE_GRAINED, _OPENAI, "hunter2pw"):
        assert secret not in seen
