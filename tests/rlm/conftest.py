from __future__ import annotations

from collections.abc import Iterator

import pytest

from tinyagents_nb.rlm import Environment, KernelEnvironment, LocalEnvironment


@pytest.fixture(scope="module")
def kernel_env() -> Iterator[KernelEnvironment]:
    """One child kernel per test module (it is reused across runs, as in a notebook session)."""
    env = KernelEnvironment()
    try:
        yield env
    finally:
        env.close()


@pytest.fixture(params=["local", "kernel"])
def environment(request: pytest.FixtureRequest) -> Environment:
    if request.param == "local":
        return LocalEnvironment()
    env: Environment = request.getfixturevalue("kernel_env")
    return env
