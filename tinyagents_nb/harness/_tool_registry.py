"""``ToolRegistry``: the tools one harness offers, by name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ._errors import ConfigurationError
from ._model import ToolSchema
from ._tools import Tool, _check_name, tool

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """The tools one harness offers, by name; plain functions are wrapped with ``tool()``.

    ``schemas()`` is what the loop sends each model call, so it is sorted (stable prompts, better
    provider prompt caching) and cached until the registry changes.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._schemas: tuple[ToolSchema, ...] | None = None
        for item in tools:
            self.register(item)

    def register(self, tool_or_fn: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Add a tool (or a function, wrapped with ``tool()``) and return it.

        Raises:
            ConfigurationError: The name is taken (unless ``replace``) or the object is not a tool.
        """
        if isinstance(tool_or_fn, Tool):
            item: Tool = tool_or_fn
        elif callable(tool_or_fn):
            item = tool(tool_or_fn)
        else:
            raise ConfigurationError(f"expected a Tool or a function, got {type(tool_or_fn).__name__}")
        name = item.name
        _check_name(name, ConfigurationError)
        if item.schema.name != name:
            raise ConfigurationError(f"tool {name!r} has a schema named {item.schema.name!r}")
        if name in self._tools and not replace:
            raise ConfigurationError(
                f"a tool named {name!r} is already registered", hint="pass replace=True to swap it"
            )
        self._tools[name] = item
        self._schemas = None
        return item

    def unregister(self, name: str) -> Tool:
        """Remove and return the tool named ``name`` (``KeyError`` when absent)."""
        item = self[name]
        del self._tools[name]
        self._schemas = None
        return item

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"no tool named {name!r}; registered: {', '.join(self.names()) or 'none'}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter([self._tools[n] for n in self.names()])

    def names(self) -> list[str]:
        """Registered tool names, sorted."""
        return sorted(self._tools)

    def schemas(self) -> tuple[ToolSchema, ...]:
        """The model-visible schemas, sorted by name; the same tuple until the registry changes."""
        if self._schemas is None:
            self._schemas = tuple(self._tools[n].schema for n in self.names())
        return self._schemas

    def unknown_tool_message(self, name: str, arguments: Mapping[str, Any] | None = None) -> str:
        """The model-facing text for a call to a tool that does not exist.

        ``arguments`` is accepted for symmetry with the loop's call site but not echoed: the model
        already has them, and repeating them only costs tokens.
        """
        names = self.names()
        listing = f"valid tools: {', '.join(names)}" if names else "no tools are available"
        return f"unknown tool `{name}`; {listing}"

    def __repr__(self) -> str:
        return f"ToolRegistry({', '.join(self.names())})"
