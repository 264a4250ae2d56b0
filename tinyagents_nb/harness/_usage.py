"""Token usage: the per-call value and the tracker a whole recursion tree shares.

A root run and every sub-agent beneath it hold the *same* `UsageTracker`, so one object answers
"what did this run cost in tokens", "what did it cost with everything it spawned" and "what did the
whole tree cost" without the runs reporting to each other. Lineage (run → parent) is recorded with
each call, so a subtree total is right even when a grandchild records before its parent has made a
model call of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, Self, TypeVar

from ._errors import ConfigurationError
from ._holds import Holds
from ._ids import CallId, RunId

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Usage", "UsageRecord", "UsageTracker"]

_TOKEN_FIELDS: Final = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
)
_LINEAGE_COLUMNS: Final = ("run_id", "parent_run_id", "root_run_id", "depth", "model", "provider", "call_id")
_ID_COLUMNS: Final = ("run_id", "parent_run_id", "root_run_id", "call_id")
_USAGE_COLUMNS: Final = (*_TOKEN_FIELDS, "total_tokens")
_new: Final = object.__new__
_set: Final = object.__setattr__  # writes a frozen dataclass's slot
_UNKNOWN_MODEL: Final = "unknown"  # the by_model() key for calls recorded without a model name


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens used by one model call, or a sum of calls.

    Counts follow the OpenAI convention, which provider adapters normalise to: ``input_tokens`` is
    the whole prompt *including* ``cached_input_tokens`` (prompt-cache reads) and
    ``cache_write_tokens`` (tokens written to a prompt cache, billed by Anthropic); likewise
    ``output_tokens`` *includes* ``reasoning_tokens``. The parts are therefore checked against
    their totals: a violation means an adapter mis-normalised, and pricing it would be wrong.

    Attributes:
        input_tokens: All prompt tokens, cached ones included.
        output_tokens: All completion tokens, reasoning included.
        cached_input_tokens: The part of ``input_tokens`` read from a prompt cache.
        reasoning_tokens: The part of ``output_tokens`` spent on hidden reasoning.
        cache_write_tokens: The part of ``input_tokens`` written to a prompt cache.
        cache_write_1h_tokens: The part of ``cache_write_tokens`` written with a one-hour lifetime
            (Anthropic bills those at twice the input price, five-minute writes at 1.25x).
        estimated: The counts are the harness's estimate, not the provider's report (a stream that
            sent no usage, a call cut short by Stop); a sum is estimated when any part is.

    Raises:
        ConfigurationError: A count is negative or not an int, or a part exceeds its total.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    estimated: bool = False

    def __post_init__(self) -> None:
        # One fused check on the hot path (`__add__` runs per model call); the OR of ints is
        # negative iff one of them is, and a non-int raises TypeError.
        try:
            valid = (
                self.input_tokens
                | self.output_tokens
                | self.cached_input_tokens
                | self.reasoning_tokens
                | self.cache_write_tokens
                | self.cache_write_1h_tokens
            ) >= 0 and (
                self.cached_input_tokens + self.cache_write_tokens <= self.input_tokens
                and self.reasoning_tokens <= self.output_tokens
                and self.cache_write_1h_tokens <= self.cache_write_tokens
            )
        except TypeError:
            valid = False
        if not valid:
            self._explain_invalid()

    def _explain_invalid(self) -> None:
        for name in _TOKEN_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigurationError(f"Usage.{name} must be an int, got {type(value).__name__}")
            if value < 0:
                raise ConfigurationError(f"Usage.{name} must not be negative, got {value}")
        if self.cache_write_1h_tokens > self.cache_write_tokens:
            raise ConfigurationError(
                f"Usage.cache_write_1h_tokens ({self.cache_write_1h_tokens}) exceeds cache_write_tokens "
                f"({self.cache_write_tokens})",
                hint="cache_write_tokens must include the one-hour writes (OpenAI convention)",
            )
        if self.reasoning_tokens > self.output_tokens:
            raise ConfigurationError(
                f"Usage.reasoning_tokens ({self.reasoning_tokens}) exceeds output_tokens ({self.output_tokens})",
                hint="output_tokens must include reasoning tokens (OpenAI convention)",
            )
        raise ConfigurationError(
            f"Usage.cached_input_tokens ({self.cached_input_tokens}) + cache_write_tokens "
            f"({self.cache_write_tokens}) exceeds input_tokens ({self.input_tokens})",
            hint="input_tokens must include cache reads and writes (OpenAI convention)",
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output; the parts are already inside those two."""
        return self.input_tokens + self.output_tokens

    @property
    def is_empty(self) -> bool:
        """True when no tokens at all were counted."""
        return self.input_tokens == 0 and self.output_tokens == 0

    def __add__(self, other: Usage) -> Usage:
        if type(other) is not Usage:  # typed for checkers; still polite to other types at runtime
            return NotImplemented
        # Runs per model call: skip __init__ and validation (about 3x faster). Sums of valid
        # usages are valid: counts stay non-negative ints and each part stays within its total.
        total = _new(Usage)
        _set(total, "input_tokens", self.input_tokens + other.input_tokens)
        _set(total, "output_tokens", self.output_tokens + other.output_tokens)
        _set(total, "cached_input_tokens", self.cached_input_tokens + other.cached_input_tokens)
        _set(total, "reasoning_tokens", self.reasoning_tokens + other.reasoning_tokens)
        _set(total, "cache_write_tokens", self.cache_write_tokens + other.cache_write_tokens)
        _set(total, "cache_write_1h_tokens", self.cache_write_1h_tokens + other.cache_write_1h_tokens)
        _set(total, "estimated", self.estimated or other.estimated)
        return total

    def __radd__(self, other: int) -> Usage:
        # `sum(usages)` starts from the int 0.
        if type(other) is int and other == 0:
            return self
        return NotImplemented

    def to_dict(self) -> dict[str, int]:
        """The counts as a plain dict (with ``estimated`` when set); ``Usage(**u.to_dict()) == u``."""
        counts = {name: getattr(self, name) for name in _TOKEN_FIELDS}
        if self.estimated:
            counts["estimated"] = True
        return counts


_ZERO: Final = Usage()


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageRecord:
    """Usage of one model call, with the lineage that places it in the recursion tree.

    Responses served from the local response cache are not billed, so the loop records nothing
    for them (a ``cache.hit`` event makes them visible instead).
    """

    run_id: RunId
    parent_run_id: RunId | None
    root_run_id: RunId
    depth: int
    usage: Usage
    model: str | None = None
    provider: str | None = None
    call_id: CallId | None = None
    ts: float
    """Wall-clock time of the call, in seconds since the epoch."""


def _lineage(
    run_id: str, parent_run_id: str | None, root_run_id: str, depth: int
) -> tuple[RunId, RunId | None, RunId, int]:
    """Validate and type the lineage fields shared by usage and cost records."""
    if type(depth) is not int or depth < 0:  # bool is rejected too
        raise ConfigurationError(f"depth must be a non-negative int, got {depth!r}")
    parent = None if parent_run_id is None else RunId(parent_run_id)
    return RunId(run_id), parent, RunId(root_run_id), depth


class _RunTree:
    """Parent links and child lists of the runs a tracker has seen; callers hold the lock.

    A run's parent is fixed the first time it is given: restating it is a no-op, contradicting it
    is an error (it would silently move usage between subtrees). A link made after a run's
    descendants recorded carries their totals up (the ledger's ``_link``), which keeps subtree
    totals right when a grandchild records first.
    """

    __slots__ = ("_parent",)

    def __init__(self) -> None:
        self._parent: dict[RunId, RunId | None] = {}

    def link(self, run_id: RunId, parent_run_id: RunId | None) -> bool:
        """Record the link; ``True`` when it is new."""
        if run_id in self._parent:
            known = self._parent[run_id]
            if known != parent_run_id:
                raise ConfigurationError(f"run {run_id!s} was registered with parent {known!s}, not {parent_run_id!s}")
            return False
        if parent_run_id is not None:
            ancestor: RunId | None = parent_run_id
            while ancestor is not None:
                if ancestor == run_id:
                    raise ConfigurationError(f"run {run_id!s} cannot descend from itself")
                ancestor = self._parent.get(ancestor)
        self._parent[run_id] = parent_run_id
        return True

    def lineage(self, run_id: RunId | None) -> list[RunId]:
        """The run and its known ancestors, nearest first."""
        found: list[RunId] = []
        while run_id is not None:
            found.append(run_id)
            run_id = self._parent.get(run_id)
        return found

    def runs(self) -> tuple[RunId, ...]:
        return tuple(self._parent)


def _record_rows(records: Iterable[Any], extra: Iterable[str] = ()) -> tuple[list[dict[str, Any]], list[str]]:
    """Flatten usage-bearing records (usage or cost) into DataFrame rows."""
    extra = tuple(extra)
    columns = [*_LINEAGE_COLUMNS, *extra, *_USAGE_COLUMNS, "ts"]
    rows: list[dict[str, Any]] = []
    for record in records:
        row: dict[str, Any] = {name: getattr(record, name) for name in _LINEAGE_COLUMNS}
        for name in _ID_COLUMNS:  # plain str, so the frame pickles and compares without our types
            if row[name] is not None:
                row[name] = str(row[name])
        row.update({name: getattr(record, name) for name in extra})
        usage: Usage = record.usage
        row.update(usage.to_dict())
        row["total_tokens"] = usage.total_tokens
        row["ts"] = record.ts
        rows.append(row)
    return rows, columns


def _usage_dtypes() -> dict[str, str]:
    text = dict.fromkeys(("run_id", "parent_run_id", "root_run_id", "model", "provider", "call_id"), "object")
    return {**text, "depth": "int64", **dict.fromkeys(_USAGE_COLUMNS, "int64"), "ts": "float64"}


def _frame(rows: list[dict[str, Any]], columns: list[str], dtypes: dict[str, str]) -> pd.DataFrame:
    import pandas as pd

    # Build as object first so text columns keep None for "absent" on pandas 2 and 3 alike (pandas 3
    # would infer its NaN-based string dtype); then type the numeric columns.
    frame = pd.DataFrame(rows, columns=columns, dtype=object)
    return frame.astype({name: dtype for name, dtype in dtypes.items() if dtype != "object"})


class _Summable(Protocol):
    def __add__(self, other: Self, /) -> Self: ...


_RecordT = TypeVar("_RecordT")
_AmountT = TypeVar("_AmountT", bound=_Summable)


class _Ledger(Generic[_RecordT, _AmountT]):
    """Records plus running amounts per run, per model and overall, all under one lock.

    The usage and cost trackers are both this: keeping per-run amounts and a child map as calls
    arrive makes `for_run` a lookup and `for_subtree` a walk over runs, not calls. Being a shared
    handle, a ledger is always truthy, even when empty (so ``tracker or UsageTracker()`` never
    silently forks it).
    """

    def __init__(self, zero: _AmountT) -> None:
        self._lock = threading.Lock()
        self._zero = zero
        self._records: list[_RecordT] = []
        self._tree = _RunTree()
        self._per_run: dict[RunId, _AmountT] = {}
        # running subtree totals, kept by adding each amount to its run's ancestors: a budget check
        # per request reads one (a walk over a 1,000-run fan-out per request was quadratic)
        self._per_subtree: dict[RunId, _AmountT] = {}
        self._per_model: dict[str, _AmountT] = {}
        self._total = zero

    def _link(self, run: RunId, parent: RunId | None) -> None:
        """Link under the lock; a subtree that already has amounts carries them to its new ancestors."""
        if self._tree.link(run, parent) and parent is not None:
            carried = self._per_subtree.get(run)
            if carried is not None:
                self._add_up(parent, carried)

    def _add_up(self, run: RunId, amount: _AmountT) -> None:
        totals, zero = self._per_subtree, self._zero
        for node in self._tree.lineage(run):
            totals[node] = totals.get(node, zero) + amount

    def _store(self, record: _RecordT, run: RunId, parent: RunId | None, model: str, amount: _AmountT) -> None:
        with self._lock:
            self._link(run, parent)
            self._records.append(record)
            self._add_up(run, amount)
            self._per_run[run] = self._per_run.get(run, self._zero) + amount
            self._per_model[model] = self._per_model.get(model, self._zero) + amount
            self._total = self._total + amount

    def register_run(self, run_id: str, parent_run_id: str | None) -> None:
        """Declare a run's parent, so it links its descendants before recording anything itself.

        Raises:
            ConfigurationError: The run was registered with a different parent, or the link
                would make a cycle.
        """
        run = RunId(run_id)
        parent = None if parent_run_id is None else RunId(parent_run_id)
        with self._lock:
            self._link(run, parent)

    def total(self) -> _AmountT:
        """Everything recorded, across the whole tree."""
        with self._lock:
            return self._total

    def for_run(self, run_id: str) -> _AmountT:
        """This run's own calls only (zero for a run that has recorded nothing)."""
        with self._lock:
            return self._per_run.get(RunId(run_id), self._zero)

    def for_subtree(self, run_id: str) -> _AmountT:
        """This run plus every run beneath it."""
        with self._lock:
            return self._per_subtree.get(RunId(run_id), self._zero)

    def by_model(self) -> dict[str, _AmountT]:
        """Amounts per model name; usage recorded without one is under ``"unknown"``."""
        with self._lock:
            return dict(self._per_model)

    def runs(self) -> tuple[RunId, ...]:
        """Every run registered or recorded, in first-seen order."""
        with self._lock:
            return self._tree.runs()

    @property
    def records(self) -> tuple[_RecordT, ...]:
        """A snapshot of every record, oldest first."""
        with self._lock:
            return tuple(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __bool__(self) -> bool:
        return True


class UsageTracker(_Ledger[UsageRecord, Usage]):
    """Thread-safe usage ledger shared by a root run and all its descendants.

    `total`, `for_run` and `for_subtree` return `Usage`; `by_model` maps model names to `Usage`.
    """

    def __init__(self) -> None:
        super().__init__(_ZERO)
        self.holds = Holds()
        """Tokens and dollars reserved by requests in flight on the budgets of the runs sharing this ledger."""

    def record(
        self,
        *,
        run_id: str,
        parent_run_id: str | None,
        root_run_id: str,
        depth: int,
        usage: Usage,
        model: str | None = None,
        provider: str | None = None,
        call_id: str | None = None,
        ts: float | None = None,
    ) -> UsageRecord:
        """Record one model call's usage (and the run's lineage) and return the stored record.

        Raises:
            ConfigurationError: Bad lineage (see `register_run`), a negative depth, or ``usage``
                is not a `Usage`.
        """
        if not isinstance(usage, Usage):
            raise ConfigurationError(f"usage must be a Usage, got {type(usage).__name__}")
        run, parent, root, depth = _lineage(run_id, parent_run_id, root_run_id, depth)
        record = UsageRecord(
            run_id=run,
            parent_run_id=parent,
            root_run_id=root,
            depth=depth,
            usage=usage,
            model=model,
            provider=provider,
            call_id=None if call_id is None else CallId(call_id),
            ts=time.time() if ts is None else ts,
        )
        self._store(record, run, parent, _UNKNOWN_MODEL if model is None else model, usage)
        return record

    def __repr__(self) -> str:
        return f"UsageTracker(records={len(self)}, total_tokens={self.total().total_tokens})"

    def to_dataframe(self) -> pd.DataFrame:
        """One row per record; an empty tracker gives an empty frame with the same columns.

        Columns: run_id, parent_run_id, root_run_id, depth, model, provider, call_id, the
        `Usage` counts, total_tokens and ts (epoch seconds, float). Text columns are ``object``
        with ``None`` for absent values.
        """
        rows, columns = _record_rows(self.records)
        return _frame(rows, columns, _usage_dtypes())
