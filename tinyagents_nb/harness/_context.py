"""The run context: what a run knows at run time, and how nested runs inherit it.

``RunConfig`` is the serializable, frozen part (identities, tags, metadata, limits); ``RunContext``
adds the live handles (stores, event sink, usage and cost trackers, cache registry, cancellation
token, context-window budget) and the typed application data. Nothing here is global: a nested call
gets everything through ``RunContext.child``, which follows the seed's inheritance rules:

================================  ==========================================================
root run id                       same as the parent's
parent run id                     the parent's run id
thread id                         kept unless overridden
event sink, cancellation, stores  the same objects (one stream, one Stop, one database)
usage, cost, cache registry       the same objects (so a subtree's cost rolls up)
tags                              parent's, then local ones, without duplicates
metadata, configurable            parent's merged with local (local wins)
limits (timeout, caps, depth cap) inherited; depth is parent's + 1, capped by ``max_depth``
================================  ==========================================================

The parent's config is never mutated: a child gets a new frozen ``RunConfig``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from ._cancel import CancellationToken
from ._clock import RANDOM_IDS, SYSTEM_CLOCK, Clock, IdSource
from ._config import RunConfig, _normalize_tags
from ._cost import CostRecord, CostTracker
from ._errors import ConfigurationError
from ._events import AgentEvent, CostRecorded, UsageRecorded
from ._ids import RunId, ThreadId
from ._json import FrozenJson
from ._sink import EventSink
from ._steering import SteeringHandle
from ._usage import Usage, UsageTracker
from ._window import ContextWindow
from .stores import CacheRegistry, StoreRegistry

if TYPE_CHECKING:
    from ._approval import ApprovalDesk
    from ._budget import TreeBudget

__all__ = ["DataT", "RunConfig", "RunContext"]

DataT = TypeVar("DataT")
"""The application's typed context data carried by ``RunContext.data``."""
ChildDataT = TypeVar("ChildDataT")
EventT = TypeVar("EventT", bound=AgentEvent)


class _Inherit:
    def __repr__(self) -> str:
        return "<inherit>"


_INHERIT: Any = _Inherit()


class RunContext(Generic[DataT]):
    """Everything a run knows at run time; pass it to nested calls, never reach for a global.

    Build a root context with ``RunContext(config=..., data=...)`` (fresh handles for anything not
    given) and nested ones with ``child()``.
    """

    __slots__ = (
        "approvals",
        "budgets",
        "cache",
        "cancellation",
        "clock",
        "config",
        "context_window",
        "costs",
        "count_model_call",
        "data",
        "deadline",
        "events",
        "ids",
        "journal",
        "steering",
        "stop_request",
        "stores",
        "streaming",
        "usage",
    )

    config: RunConfig
    data: DataT
    stores: StoreRegistry
    events: EventSink
    usage: UsageTracker
    costs: CostTracker
    cache: CacheRegistry
    cancellation: CancellationToken
    context_window: ContextWindow | None
    steering: SteeringHandle | None
    """This run's steering queue, if it accepts steering; not inherited (commands address one run)."""
    deadline: float | None
    """The absolute ``time.monotonic()`` deadline of the enclosing run; children inherit it so no
    descendant outlives its ancestor's wall-clock budget."""
    streaming: bool
    """Whether the enclosing run streams; sub-agents inherit it so their deltas reach the shared sink too."""
    approvals: ApprovalDesk | None
    """Where tool calls that need approval wait; shared by the run tree (``None``: nobody can answer)."""
    budgets: tuple[TreeBudget, ...]
    """The spending limits binding this run, each anchored at the run that set it; children inherit them."""
    clock: Clock
    """Stamps event ``ts``; a run installs its policy's clock while it runs, and children inherit it."""
    ids: IdSource
    """Mints child run ids; a run installs its policy's id source while it runs, and children inherit it."""
    stop_request: str | None
    """A pending ``request_stop`` final text (not inherited: a child's stop does not end its parent)."""
    count_model_call: Callable[[], None] | None
    """Counts a model call the harness makes for the running run outside its loop (a summarizer's)
    toward its ``max_model_calls``; set by the run while it runs, not inherited."""

    @overload
    def __init__(
        self: RunContext[None],
        *,
        config: RunConfig | None = None,
        stores: StoreRegistry | None = None,
        events: EventSink | None = None,
        usage: UsageTracker | None = None,
        costs: CostTracker | None = None,
        cache: CacheRegistry | None = None,
        cancellation: CancellationToken | None = None,
        context_window: ContextWindow | None = None,
        steering: SteeringHandle | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        *,
        data: DataT,
        config: RunConfig | None = None,
        stores: StoreRegistry | None = None,
        events: EventSink | None = None,
        usage: UsageTracker | None = None,
        costs: CostTracker | None = None,
        cache: CacheRegistry | None = None,
        cancellation: CancellationToken | None = None,
        context_window: ContextWindow | None = None,
        steering: SteeringHandle | None = None,
    ) -> None: ...

    def __init__(
        self,
        *,
        data: Any = None,
        config: RunConfig | None = None,
        stores: StoreRegistry | None = None,
        events: EventSink | None = None,
        usage: UsageTracker | None = None,
        costs: CostTracker | None = None,
        cache: CacheRegistry | None = None,
        cancellation: CancellationToken | None = None,
        context_window: ContextWindow | None = None,
        steering: SteeringHandle | None = None,
    ) -> None:
        self.config = config if config is not None else RunConfig()
        if not isinstance(self.config, RunConfig):
            raise ConfigurationError(f"config must be a RunConfig, got {type(self.config).__name__}")
        self.data = data
        self.stores = stores if stores is not None else StoreRegistry()
        self.events = events if events is not None else EventSink()
        self.usage = usage if usage is not None else UsageTracker()
        self.costs = costs if costs is not None else CostTracker()
        self.cache = cache if cache is not None else CacheRegistry()
        self.cancellation = cancellation if cancellation is not None else CancellationToken()
        self.context_window = context_window
        self.steering = steering
        self.deadline: float | None = None
        self.streaming = False
        self.approvals: ApprovalDesk | None = None
        self.budgets: tuple[TreeBudget, ...] = ()
        self.clock = SYSTEM_CLOCK
        self.ids = RANDOM_IDS
        self.stop_request: str | None = None
        self.count_model_call: Callable[[], None] | None = None
        self.journal: object | None = None  # the root's durable journal (a Middleware), so sub-agents journal in it

    # ---------------------------------------------------------------------------- identity
    # RunConfig validates these into RunId/ThreadId instances; the casts only tell the type checker.
    @property
    def run_id(self) -> RunId:
        return cast(RunId, self.config.run_id)

    @property
    def thread_id(self) -> ThreadId | None:
        return cast(ThreadId | None, self.config.thread_id)

    @property
    def parent_run_id(self) -> RunId | None:
        return cast(RunId | None, self.config.parent_run_id)

    @property
    def root_run_id(self) -> RunId:
        return self.config.root

    @property
    def depth(self) -> int:
        return self.config.depth

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(self.config.tags)

    @property
    def metadata(self) -> Mapping[str, FrozenJson]:
        return self.config.metadata

    # ---------------------------------------------------------------------------- derivation
    @overload
    def child(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
        configurable: Mapping[str, object] | None = None,
    ) -> RunContext[DataT]: ...

    @overload
    def child(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
        configurable: Mapping[str, object] | None = None,
        data: ChildDataT,
    ) -> RunContext[ChildDataT]: ...

    def child(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
        configurable: Mapping[str, object] | None = None,
        data: Any = _INHERIT,
    ) -> RunContext[Any]:
        """Derive a nested run's context by the inheritance rules (see the module docstring)."""
        config = self.config.child(
            run_id=run_id if run_id is not None else self.ids.run_id(),
            thread_id=thread_id,
            tags=tags,
            metadata=metadata,
            configurable=configurable,
        )
        # both ledgers learn the link now: a middle run that records nothing itself (a cache hit, a
        # provider without usage) must still carry its subtree's usage and cost up to the root
        self.usage.register_run(config.run_id, config.parent_run_id)
        self.costs.register_run(config.run_id, config.parent_run_id)
        child: RunContext[Any] = RunContext(
            config=config,
            data=self.data if data is _INHERIT else data,
            stores=self.stores,
            events=self.events,
            usage=self.usage,
            costs=self.costs,
            cache=self.cache,
            cancellation=self.cancellation,
            context_window=self.context_window,
        )
        child.deadline = self.deadline
        child.streaming = self.streaming
        child.approvals, child.budgets = self.approvals, self.budgets
        child.clock = self.clock
        child.ids = self.ids
        child.journal = self.journal
        return child

    def new_root(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | Any | None = _INHERIT,
        tags: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
        steering: SteeringHandle | None = None,
    ) -> RunContext[DataT]:
        """A new root run sharing this context's stores, sink, usage and cost trackers, cache and data.

        The new run has depth 0, its own id tree and its own cancellation token. This is how a long-lived session (a notebook kernel) starts independent runs: one Stop
        cancels one run, while the session still sees every run's events, usage and cost.
        """
        cfg = self.config
        config = RunConfig(
            run_id=RunId(run_id) if run_id is not None else RunId.new(),
            thread_id=cfg.thread_id if thread_id is _INHERIT else thread_id,
            tags=(*cfg.tags, *_normalize_tags(tags)),
            metadata={**cfg.metadata, **(metadata or {})},
            configurable=cfg.configurable,
            timeout_s=cfg.timeout_s,
            max_model_calls=cfg.max_model_calls,
            max_tool_calls=cfg.max_tool_calls,
            max_turn_output_tokens=cfg.max_turn_output_tokens,
            max_depth=cfg.max_depth,
        )
        return RunContext(
            config=config,
            data=self.data,
            stores=self.stores,
            events=self.events,
            usage=self.usage,
            costs=self.costs,
            cache=self.cache,
            steering=steering,
        )

    def with_cancellation(self, token: CancellationToken) -> RunContext[DataT]:
        """The same context (same handles and config) with ``token`` installed as its cancellation."""
        clone = self._copy()
        clone.cancellation = token
        return clone

    def with_steering(self, handle: SteeringHandle | None) -> RunContext[DataT]:
        """The same context with ``handle`` as its steering queue."""
        clone = self._copy()
        clone.steering = handle
        return clone

    def with_config(self, **changes: Any) -> RunContext[DataT]:
        """The same handles with a config changed by ``dataclasses.replace`` (the original stays as it was)."""
        clone = self._copy()
        clone.config = replace(self.config, **changes)
        return clone

    def _copy(self) -> RunContext[DataT]:
        clone: RunContext[DataT] = object.__new__(RunContext)
        for name in RunContext.__slots__:
            object.__setattr__(clone, name, getattr(self, name))
        return clone

    def request_stop(self, final_text: str) -> None:
        """End this run after the current round trip, with ``final_text`` as its answer (the last request wins)."""
        if not isinstance(final_text, str):
            raise ConfigurationError(f"final_text must be a str, got {type(final_text).__name__}")
        self.stop_request = final_text

    # ---------------------------------------------------------------------------- events
    def emit(self, event_type: type[EventT], /, **fields: Any) -> EventT:
        """Build an event stamped with this run's lineage and emit it on the shared sink."""
        config = self.config
        event = event_type(
            run_id=config.run_id,
            parent_run_id=config.parent_run_id,
            root_run_id=config.root_run_id or config.run_id,
            depth=config.depth,
            ts=self.clock.time(),
            **fields,
        )
        self.events.emit(event)
        return event

    def record_usage(
        self, usage: Usage, *, model: str, provider: str | None = None, call_id: str | None = None
    ) -> CostRecord:
        """Record one model call's usage and cost against this run and emit ``usage.recorded``/``cost.recorded``.

        The trackers are shared with the whole tree, so the call counts towards every ancestor's subtree.
        """
        cfg = self.config
        root = cfg.root_run_id or cfg.run_id
        self.usage.record(
            run_id=cfg.run_id,
            parent_run_id=cfg.parent_run_id,
            root_run_id=root,
            depth=cfg.depth,
            usage=usage,
            model=model,
            provider=provider,
            call_id=call_id,
        )
        cost = self.costs.record(
            run_id=cfg.run_id,
            parent_run_id=cfg.parent_run_id,
            root_run_id=root,
            depth=cfg.depth,
            usage=usage,
            model=model,
            provider=provider,
            call_id=call_id,
        )
        self.emit(UsageRecorded, call_id=call_id, model=model, usage=usage)
        self.emit(CostRecorded, call_id=call_id, model=model, usd=None if cost.cost is None else cost.cost.total_usd)
        return cost

    def __repr__(self) -> str:
        cfg = self.config
        parts = [f"run_id={str(cfg.run_id)!r}", f"depth={cfg.depth}"]
        if cfg.parent_run_id is not None:
            parts.append(f"parent_run_id={str(cfg.parent_run_id)!r}")
        if cfg.thread_id is not None:
            parts.append(f"thread_id={str(cfg.thread_id)!r}")
        return f"RunContext({', '.join(parts)})"
