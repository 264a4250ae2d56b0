"""What one run reads from its harness, apart from the loop so the loop module stays small."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._context import RunContext
    from ._middleware import MiddlewareStack
    from ._model import ChatModel
    from ._policy import RunPolicy
    from ._structured import OutputSpec, StructuredStrategy
    from ._tool_registry import ToolRegistry
    from .memory import ContextFitter
    from .stores import ResponseCache

__all__ = ["LoopHarness"]


class LoopHarness(Protocol):
    """What one run reads from its harness; ``AgentHarness`` is one.

    The harness starts loops and the loop reads the harness's settings, so the loop names only
    what it reads: the dependency points one way, from ``AgentHarness`` down to ``RunLoop``.
    """

    name: str
    model: ChatModel
    model_chain: tuple[ChatModel, ...]
    tools: ToolRegistry
    middleware: MiddlewareStack
    policy: RunPolicy
    output: OutputSpec | None
    structured_strategy: StructuredStrategy | None
    fitter: ContextFitter

    def response_cache_for(self, ctx: RunContext[Any]) -> ResponseCache | None: ...
