"""``ToolRegistry``: the tools one harness offers, by name, and ``ToolProvider``, a source of tools listed at run time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._errors import ConfigurationError
from ._model import ToolSchema
from ._tools import Tool, _check_name, tool

if TYPE_CHECKING:
    from ._context import RunContext

__all__ = ["ToolProvider", "ToolRegistry"]


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools whose list is only known at run time (an MCP server, a plugin host).

    The registry asks ``list_tools`` at the start of every run and before every model call, so a
    provider must answer from a cache when nothing changed (returning the *same* sequence object
    lets the registry skip all work). ``aclose`` releases what the provider holds (a process, a
    connection); ``AgentHarness.aclose`` calls it.
    """

    @property
    def name(self) -> str: ...
    async def list_tools(self, ctx: RunContext[Any]) -> Sequence[Tool]: ...
    async def aclose(self) -> None: ...


class ToolRegistry:
    """The tools one harness offers, by name; plain functions are wrapped with ``tool()``.

    ``schemas()`` is what the loop sends each model call, so it is sorted (stable prompts, better
    provider prompt caching) and cached until the registry changes. Registered ``ToolProvider``s
    contribute the tools they list at ``refresh``; a provided tool never replaces a registered one.
    """

    def __init__(self, tools: Iterable[Tool | ToolProvider | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._providers: dict[int, ToolProvider] = {}
        self._listed: dict[int, Sequence[Tool]] = {}
        self._provided: dict[str, Tool] = {}
        self._schemas: tuple[ToolSchema, ...] | None = None
        for item in tools:
            if isinstance(item, ToolProvider) and not isinstance(item, Tool):
                self.add_provider(item)
            else:
                self.register(item)

    def register(self, tool_or_fn: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Add a tool (or a function, wrapped with ``tool()``) and return it.

        Raises:
            ConfigurationError: The name is taken (unless ``replace``) or the object is not a tool.
        """
        if isinstance(tool_or_fn, Tool):
            item: Tool = tool_or_fn
        elif isinstance(tool_or_fn, ToolProvider):
            raise ConfigurationError(f"{tool_or_fn.name!r} is a tool provider: use add_provider()")
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

    def add_provider(self, provider: ToolProvider) -> None:
        """Offer the tools ``provider`` lists; they appear at the next ``refresh`` (adding it twice is a no-op)."""
        self._providers.setdefault(id(provider), provider)

    @property
    def providers(self) -> tuple[ToolProvider, ...]:
        return tuple(self._providers.values())

    async def refresh(self, ctx: RunContext[Any]) -> tuple[ToolSchema, ...]:
        """Ask every provider for its tools and return the schemas; cheap when no provider's list changed.

        Raises:
            ConfigurationError: A provided tool's name is already taken by another tool.
            Exception: Whatever a provider raises when it cannot list its tools (it fails the run).
        """
        changed = False
        for key, provider in list(self._providers.items()):
            listed = await provider.list_tools(ctx)
            if self._listed.get(key) is not listed:
                self._listed[key] = listed
                changed = True
        if changed:
            provided: dict[str, Tool] = {}
            for key in list(self._providers):
                for item in self._listed.get(key, ()):
                    if item.name in self._tools or item.name in provided:
                        raise ConfigurationError(
                            f"tool {item.name!r} from {self._providers[key].name!r} clashes with another tool",
                            hint="rename one of them (an MCP server's tools are named SERVER_TOOL)",
                        )
                    provided[item.name] = item
            self._provided = provided
            self._schemas = None
        return self.schemas()

    def unregister(self, name: str) -> Tool:
        """Remove and return the tool named ``name`` (``KeyError`` when absent)."""
        item = self._tools.get(name)
        if item is None:
            raise KeyError(f"no tool named {name!r}; registered: {', '.join(self._tools) or 'none'}")
        del self._tools[name]
        self._schemas = None
        return item

    def get(self, name: str) -> Tool | None:
        found = self._tools.get(name)
        return found if found is not None else self._provided.get(name)

    def __getitem__(self, name: str) -> Tool:
        found = self.get(name)
        if found is None:
            raise KeyError(f"no tool named {name!r}; registered: {', '.join(self.names()) or 'none'}")
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._tools or name in self._provided

    def __len__(self) -> int:
        return len(self._tools) + len(self._provided)

    def __iter__(self) -> Iterator[Tool]:
        return iter([self[n] for n in self.names()])

    def names(self) -> list[str]:
        """Tool names (registered, and provided as of the last ``refresh``), sorted."""
        return sorted([*self._tools, *self._provided])

    def schemas(self) -> tuple[ToolSchema, ...]:
        """The model-visible schemas, sorted by name; the same tuple until the registry changes."""
        if self._schemas is None:
            self._schemas = tuple(self[n].schema for n in self.names())
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
        providers = "".join(f", <{p.name}>" for p in self._providers.values())
        return f"ToolRegistry({', '.join(self.names())}{providers})"
