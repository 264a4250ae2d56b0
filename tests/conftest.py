from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Jupyter kernels run asyncio, and the cancellation design relies on asyncio semantics."""
    return "asyncio"
