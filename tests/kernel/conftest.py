from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernel._kernel import KernelHarness

REPO = Path(__file__).resolve().parents[2]
K6_PYTHON = Path(os.environ.get("TINYAGENTS_K6_PYTHON", REPO / ".venv-k6" / "bin" / "python"))


def _interpreters() -> list[object]:
    return [
        pytest.param((sys.executable, "7."), id="ipykernel7"),
        pytest.param((str(K6_PYTHON), "6."), id="ipykernel6"),
    ]


@pytest.fixture(scope="module", params=_interpreters())
def kernel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHarness]:
    python, expected = request.param
    if not Path(python).exists():
        if os.environ.get("CI"):
            pytest.fail(f"the ipykernel 6.x environment is missing ({python}); ./dev test creates it")
        pytest.skip(f"no ipykernel 6.x environment at {python} (./dev test creates .venv-k6)")
    harness = KernelHarness(python, tmp_path_factory.mktemp("kernel"))
    try:
        assert harness.version.startswith(expected), harness.version
        yield harness
    finally:
        harness.close()
