from __future__ import annotations

import os
import shutil
import tempfile
import uuid

import pytest

from tinyagents_nb.harness.models import clear_calibrations


@pytest.fixture
def anyio_backend() -> str:
    """Jupyter kernels run asyncio, and the cancellation design relies on asyncio semantics."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _fresh_calibrations() -> None:
    """Token-estimate calibration is learnt per process; each test starts uncalibrated (replayed usage is made up)."""
    clear_calibrations()


STORE_ENV = "TINYAGENTS_NB_STORE_DIR"
_STORES = tempfile.mkdtemp(prefix="tinyagents-stores-")


def pytest_configure(config: pytest.Config) -> None:
    """Sessions' default stores (and those of kernels the tests start) go to a temporary folder, never the repo's
    notebooks folder or the user's cache."""
    os.environ.setdefault(STORE_ENV, _STORES)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_STORES, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_default_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's sessions get a default store of their own (created only if a session opens it)."""
    monkeypatch.setenv(STORE_ENV, os.path.join(_STORES, uuid.uuid4().hex))
