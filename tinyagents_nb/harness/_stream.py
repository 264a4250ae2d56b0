"""Stream modes: one run tree's events regrouped into the views a consumer actually wants.

A chat UI wants text as it arrives (``messages``), a progress pane wants tool activity (``tools``),
a status line wants lifecycle transitions (``updates``), a recorder wants everything (``events``),
and a caller that only needs the answer wants the ``AgentRun`` (``final``). ``AgentStream.chunks``
picks any of them from the same subscription, so asking for several costs one pass over the events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

from ._errors import ConfigurationError
from ._events import AgentEvent
from ._run import AgentRun
from ._sink import EventSubscription

if TYPE_CHECKING:
    from ._context import RunContext

__all__ = ["MODE_KINDS", "StreamChunk", "StreamMode", "iter_chunks", "run_tree_filter", "stream_modes"]

StreamMode: TypeAlias = Literal["messages", "tools", "updates", "events", "final"]
"""A view of a run's stream; see ``MODE_KINDS`` for the event kinds each one carries."""

_ALL_MODES: Final[tuple[StreamMode, ...]] = get_args(StreamMode)

MODE_KINDS: Final[dict[StreamMode, frozenset[str]]] = {
    # text and reasoning deltas, numbered by attempt, and the marker that drops a failed attempt
    "messages": frozenset({"model.delta", "model.discarded", "model.retracted"}),
    "tools": frozenset({"tool.started", "tool.delta", "tool.completed", "tool.failed", "tool.replayed"}),
    "updates": frozenset(
        {
            "run.started",
            "run.completed",
            "run.failed",
            "run.cancelled",
            "run.resumed",
            "model.selected",
            "model.started",
            "model.completed",
            "model.failed",
            "tool.started",
            "tool.completed",
            "tool.failed",
            "tool.replayed",
            "subagent.started",
            "subagent.completed",
            "subagent.reused",
            "steering.applied",
            "limit.reached",
            "approval.requested",
            "approval.decided",
            "guardrail.tripped",
            "model.retracted",
        }
    ),
}
"""The event kinds of the event-carrying modes (``events`` carries every kind, ``final`` none)."""


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """One item of a mode's stream, with the lineage of the run it came from.

    Attributes:
        mode: Which view it belongs to (an event in two requested views comes once per view).
        data: An ``AgentEvent`` for ``messages``/``tools``/``updates``/``events``; the ``AgentRun``
            for ``final``.
        run_id: The run (in the tree) it came from.
        parent_run_id: That run's parent, ``None`` at the root.
        depth: That run's depth (0 for the run the handle started, when it is a root).
    """

    mode: StreamMode
    data: Any
    run_id: str
    parent_run_id: str | None
    depth: int


def stream_modes(modes: Collection[str]) -> tuple[StreamMode, ...]:
    """Check the requested modes (none: all of them), keeping their order and dropping repeats.

    Raises:
        ConfigurationError: A mode that is not one of the five.
    """
    if not modes:
        return _ALL_MODES
    chosen: list[StreamMode] = []
    for mode in modes:
        if mode not in _ALL_MODES:
            raise ConfigurationError(f"unknown stream mode {mode!r}", hint=f"use one of {', '.join(_ALL_MODES)}")
        if mode not in chosen:
            chosen.append(mode)
    return tuple(chosen)


def _chunk(mode: StreamMode, event: AgentEvent) -> StreamChunk:
    return StreamChunk(mode, event, event.run_id, event.parent_run_id, event.depth)


async def iter_chunks(
    events: EventSubscription,
    modes: tuple[StreamMode, ...],
    result: Callable[[], Awaitable[AgentRun]],
    *,
    parent_run_id: str | None,
    depth: int,
) -> AsyncIterator[StreamChunk]:
    """Turn one run tree's event subscription into chunks of ``modes``; ``final`` comes last."""
    routes = tuple((mode, MODE_KINDS.get(mode)) for mode in modes if mode != "final")
    try:
        async for event in events:
            for mode, kinds in routes:
                if kinds is None or event.kind in kinds:
                    yield _chunk(mode, event)
    finally:  # a consumer that stops early releases its subscription
        events.close()
    if "final" in modes:
        run = await result()
        yield StreamChunk("final", run, run.run_id, parent_run_id, depth)


def run_tree_filter(ctx: RunContext[Any]) -> Callable[[AgentEvent], bool]:
    """Accept only the events of ``ctx``'s run and its descendants: runs may share one sink.

    A root run's tree is every event with its root id. A nested run's subtree is followed by lineage:
    a run whose parent is a member joins (the filter sees events in offset order, so a child's first
    event, or its parent's ``subagent.started``, always comes after its parent joined).
    """
    run_id = ctx.run_id
    if ctx.parent_run_id is None:
        return lambda e: e.root_run_id == run_id
    members: set[str] = {run_id}
    root = ctx.root_run_id

    def member(e: AgentEvent) -> bool:
        if e.root_run_id != root:
            return False
        if e.run_id in members:
            child = getattr(e, "child_run_id", None)
            if child is not None:
                members.add(child)
            return True
        if e.parent_run_id in members:
            members.add(e.run_id)
            return True
        return False

    return member
