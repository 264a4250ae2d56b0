"""``agent_tool``: the notebook's decorator that registers a function as a tool of the kernel's session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, Unpack, overload

from tinyagents_nb.harness import FunctionTool

from ._session import get_session
from ._tool_options import ToolOptions

__all__ = ["agent_tool"]

P = ParamSpec("P")
R = TypeVar("R")


@overload
def agent_tool(fn: Callable[P, R], /, **options: Unpack[ToolOptions]) -> FunctionTool[P, R]: ...
@overload
def agent_tool(**options: Unpack[ToolOptions]) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
def agent_tool(fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]) -> Any:
    """Register a notebook function as a tool of the kernel's session; takes every option of ``tool()``."""
    session = get_session()
    return session.tool(**options) if fn is None else session.tool(fn, **options)
