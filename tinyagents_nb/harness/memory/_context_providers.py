"""Context providers: request-time messages a run adds before each model call, never persisted.

A provider contributes messages for the current request (retrieved documents, long-term facts);
``ContextProvidersMiddleware`` runs them and tags what is nonessential, so the pressure chain
drops it first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from .._errors import ConfigurationError
from .._messages import (
    RETRIEVED_TAG,
    Message,
    SystemMessage,
    UserMessage,
    stable_prefix_len,
)
from .._middleware import Middleware
from .._model import ModelRequest
from ._summarization import (
    _current_user_index,
    _is_summary,
)

if TYPE_CHECKING:
    from .._context import RunContext

__all__ = ["ContextProvider", "ContextTransform", "compose_transforms", "ContextProvidersMiddleware"]


# ------------------------------------------------------------------------------------------ providers
@runtime_checkable
class ContextProvider(Protocol):
    """Supplies request-time messages (retrieved snippets, the date, ...) that are never persisted.

    An ``essential`` attribute set to True keeps its messages from being tagged ``RETRIEVED_TAG``.
    """

    async def provide(self, ctx: RunContext[Any], request: ModelRequest) -> Sequence[Message]: ...


ContextTransform: TypeAlias = Callable[[Sequence[Message]], Sequence[Message]]
"""Rewrites the request-time history (redact, compact, reorder); must keep tool pairs intact."""


def compose_transforms(*transforms: ContextTransform) -> ContextTransform:
    """One transform running ``transforms`` left to right."""
    for fn in transforms:
        if not callable(fn):
            raise ConfigurationError(f"{fn!r} is not a callable transform")
    fns = tuple(transforms)

    def composed(messages: Sequence[Message]) -> Sequence[Message]:
        for fn in fns:
            messages = fn(messages)
        return messages

    return composed


class ContextProvidersMiddleware(Middleware):
    """Runs ``transforms`` on each request's history, then injects what ``providers`` supply.

    Args:
        providers: Asked in order, against the transformed history.
        transforms: Applied left to right before the providers run.
        essential: Default for providers without an ``essential`` attribute; nonessential messages
            are tagged ``RETRIEVED_TAG`` so context pressure drops them first.
        placement: ``"before_last_user"`` (default) inserts right before the current user turn, which
            keeps the cached prefix of the history stable across turns; ``"after_system"`` inserts
            after the system prompt (and any summary), before the history.
    """

    def __init__(
        self,
        providers: Sequence[ContextProvider] = (),
        transforms: Sequence[ContextTransform] = (),
        *,
        essential: bool = False,
        placement: Literal["before_last_user", "after_system"] = "before_last_user",
    ) -> None:
        for provider in providers:
            if not isinstance(provider, ContextProvider):
                raise ConfigurationError(f"{provider!r} is not a ContextProvider (needs async provide(ctx, request))")
        if placement not in ("before_last_user", "after_system"):
            raise ConfigurationError(f"placement must be before_last_user or after_system, got {placement!r}")
        self.providers = tuple(providers)
        self.transform = compose_transforms(*transforms) if transforms else None
        self.essential = essential
        self.placement = placement

    def _position(self, messages: Sequence[Message]) -> int:
        if self.placement == "before_last_user":
            current = _current_user_index(messages)
            if current is not None:
                return current
        pos = stable_prefix_len(messages)
        while pos < len(messages) and _is_summary(messages[pos]):
            pos += 1
        return pos

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        messages: Sequence[Message] = request.messages
        if self.transform is not None:
            messages = self.transform(messages)
        injected: list[Message] = []
        if self.providers:
            seen = request if messages is request.messages else request.with_messages(messages)
            for provider in self.providers:
                essential = bool(getattr(provider, "essential", self.essential))
                for m in await provider.provide(ctx, seen):
                    if not isinstance(m, SystemMessage | UserMessage):
                        raise ConfigurationError(f"context providers may supply system or user messages, got {m!r}")
                    if not essential and RETRIEVED_TAG not in m.tags:
                        m = dataclasses.replace(m, tags=(*m.tags, RETRIEVED_TAG))
                    injected.append(m)
        if injected:
            pos = self._position(messages)
            messages = [*messages[:pos], *injected, *messages[pos:]]
        return request if messages is request.messages else request.with_messages(messages)
