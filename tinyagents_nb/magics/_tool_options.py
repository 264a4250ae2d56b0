"""The ``tool()`` options a notebook's tool registration accepts, apart so the session stays small."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

__all__ = ["ToolOptions"]


class ToolOptions(TypedDict, total=False):
    """The options of the harness's ``tool()``, accepted by ``agent_tool`` and ``NotebookSession.tool``."""

    name: str | None
    description: str | None
    timeout_s: float | None
    strict: bool
    in_thread: bool | None
    requires_approval: bool | Callable[..., Any]
