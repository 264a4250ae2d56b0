"""Environments for RLM tests: in-process, and one child kernel per module and ipykernel major."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tinyagents_nb.rlm import Environment, KernelEnvironment, LocalEnvironment

REPO = Path(__file__).resolve().parents[2]
K6_PYTHON = Path(os.environ.get("TINYAGENTS_K6_PYTHON", REPO / ".venv-k6" / "bin" / "python"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "kernels" in getattr(item, "fixturenames", ()) and "[local]" not in item.nodeid:
            item.add_marker(pytest.mark.kernel)


PYTHONS = [pytest.param(sys.executable, id="ipykernel7"), pytest.param(str(K6_PYTHON), id="ipykernel6")]


@pytest.fixture(scope="module")
def kernels() -> Iterator[Callable[[str], KernelEnvironment]]:
    """One child kernel per test module and interpreter, made on first use (reused across runs, as in a session)."""
    made: dict[str, KernelEnvironment] = {}

    def get(python: str) -> KernelEnvironment:
        if not Path(python).exists():
            if os.environ.get("CI"):
                pytest.fail(f"the ipykernel 6.x environment is missing ({python}); ./dev test creates it")
            pytest.skip(f"no ipykernel 6.x environment at {python} (./dev test creates .venv-k6)")
        if python not in made:
            made[python] = KernelEnvironment(python=python)
        return made[python]

    try:
        yield get
    finally:
        for env in made.values():
            env.close()


@pytest.fixture(params=PYTHONS)
def kernel_env(request: pytest.FixtureRequest, kernels: Callable[[str], KernelEnvironment]) -> KernelEnvironment:
    """The module's child kernel, on both ipykernel majors."""
    return kernels(str(request.param))


@pytest.fixture(params=["local", *PYTHONS])
def environment(request: pytest.FixtureRequest, kernels: Callable[[str], KernelEnvironment]) -> Environment:
    """In-process, or the module's child kernel on each ipykernel major."""
    if request.param == "local":
        return LocalEnvironment()
    return kernels(str(request.param))
