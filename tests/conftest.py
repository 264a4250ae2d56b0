from __future__ import annotations

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
