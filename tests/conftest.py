from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinyagents_nb.harness.models import clear_calibrations

TIERS = {name: Path(__file__).with_name(name) for name in ("kernel", "browser", "realserver")}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in tests/kernel, tests/browser and tests/realserver carries that folder's marker, so
    ``-m "kernel or browser or realserver"`` and its negation split the suite into two disjoint lanes
    (``./dev test`` runs them side by side) even where a module forgets its ``pytestmark``."""
    for item in items:
        for name, folder in TIERS.items():
            if item.path.is_relative_to(folder):
                item.add_marker(name)


QUIET_ENV = "TINYAGENTS_QUIET_LOCKS"


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: a wait for the lock is not counted by pytest-timeout
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under ``./dev test``'s lanes (which set ``TINYAGENTS_QUIET_LOCKS`` to a folder), a test that asserts
    wall-clock bounds on a real server's work (``quiet`` or ``realserver``) runs while the other lane
    waits between its tests, as it would in a serial run; every other test runs side by side.

    Two flock files: a test shares ``lock`` while it runs; a quiet test holds ``gate`` exclusively until it
    has ``lock`` exclusively (so the other lane's next test cannot slip in and starve it), then lets the
    gate go and keeps ``lock`` until it ends. Without the variable (a plain pytest run) nothing is locked.
    """
    folder = os.environ.get(QUIET_ENV)
    if not folder:
        return (yield)
    quiet = item.get_closest_marker("quiet") is not None or item.get_closest_marker("realserver") is not None
    with open(os.path.join(folder, "gate"), "a") as gate, open(os.path.join(folder, "lock"), "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
