"""``StoreRegistry`` and ``CacheRegistry``: the run context's named handles.

A child context receives its parent's registries by reference, never a copy, so the whole run tree
shares one set of stores and caches.
"""

from __future__ import annotations

import threading
from typing import Generic, Self, TypeVar

from .._errors import ConfigurationError
from ._stores import _CONTROL, InMemoryStore, Store, _StoreBase, _text

__all__ = ["CacheRegistry", "StoreRegistry"]

_H = TypeVar("_H")


class _Registry(Generic[_H]):
    """Named handles behind a lock; copying returns the same object because handles are shared."""

    _kind = "handle"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, _H] = {}

    def _check(self, item: _H) -> None:
        """Reject an item this registry cannot hold."""

    def register(self, name: str, item: _H, *, replace: bool = False) -> None:
        """Add ``item`` under ``name``; a taken name is a ``ConfigurationError`` unless ``replace``."""
        self._check(item)
        name = _text(name, f"{self._kind} name", _CONTROL)
        with self._lock:
            if name in self._items and not replace:
                raise ConfigurationError(
                    f"a {self._kind} named {name!r} is already registered", hint="pass replace=True to swap it"
                )
            self._items[name] = item

    def get(self, name: str) -> _H:
        """The handle named ``name``; ``KeyError`` listing the registered names otherwise."""
        with self._lock:
            try:
                return self._items[name]
            except KeyError:
                known = ", ".join(repr(n) for n in sorted(self._items)) or "none"
                raise KeyError(f"no {self._kind} named {name!r}; registered: {known}") from None

    def __getitem__(self, name: str) -> _H:
        return self.get(name)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        with self._lock:
            return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._items

    def close(self) -> None:
        """Close every handle that has ``close()``, once each, even if one fails; re-raise the first failure."""
        with self._lock:
            items = list({id(item): item for item in self._items.values()}.values())
        errors: list[Exception] = []
        for item in items:
            closer = getattr(item, "close", None)
            try:
                if callable(closer):
                    closer()
            except Exception as exc:  # keep closing the others
                errors.append(exc)
        if errors:
            raise errors[0]

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Self:
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self.names())})"


class StoreRegistry(_Registry[Store]):
    """The run context's named stores; the store named ``"default"`` is always present.

    Args:
        default: The default store; a fresh ``InMemoryStore`` when omitted.
    """

    _kind = "store"
    DEFAULT = "default"

    def __init__(self, default: Store | None = None) -> None:
        super().__init__()
        self.register(self.DEFAULT, InMemoryStore() if default is None else default)

    def _check(self, item: Store) -> None:
        # the structural check is slow (~20 µs); skip it for our own stores, built with every context
        if not isinstance(item, _StoreBase) and not isinstance(item, Store):
            raise ConfigurationError(f"{type(item).__name__} does not implement the Store protocol")

    @property
    def default(self) -> Store:
        """The store used when a feature is not told which one to use."""
        return self.get(self.DEFAULT)


class CacheRegistry(_Registry[object]):
    """The run context's caches, by name; ``response_cache`` is the one the agent loop consults.

    Caches come in several shapes (response caches, embedding caches, ...) and the response cache's
    protocol arrives with the agent loop, so entries are typed ``object``; callers narrow what they get.
    """

    _kind = "cache"
    RESPONSE = "response"

    def __init__(self, *, response_cache: object | None = None) -> None:
        super().__init__()
        self.response_cache = response_cache

    def _check(self, item: object) -> None:
        if item is None:
            raise ConfigurationError("cache must not be None")

    @property
    def response_cache(self) -> object | None:
        """The response cache registered as ``"response"``, or ``None``; assigning ``None`` removes it."""
        with self._lock:
            return self._items.get(self.RESPONSE)

    @response_cache.setter
    def response_cache(self, cache: object | None) -> None:
        if cache is None:
            with self._lock:
                self._items.pop(self.RESPONSE, None)
        else:
            self.register(self.RESPONSE, cache, replace=True)
