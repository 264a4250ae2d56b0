"""What a map reads and writes: the rows (a DataFrame or a list of dicts), their prompts, the result frame.

pandas is imported only when a frame is built or read: a map over a list of dicts never needs it
until the result is assembled, and importing the harness stays light.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._errors import ConfigurationError
from .._prompt import PromptTemplate

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RESULT_COLUMNS",
    "MapRows",
    "Prompt",
    "RowOutcome",
    "RowStatus",
    "build_frame",
    "output_columns",
    "read_rows",
    "render_prompts",
]

RowStatus: TypeAlias = Literal["done", "failed", "pending"]
"""A row's state in the result: answered, failed on its own, or not (yet) run."""

Prompt: TypeAlias = str | Callable[[Mapping[str, Any]], str]
"""A ``{{column}}`` template over a row's columns, or a function of the row returning its prompt."""

RESULT_COLUMNS = ("status", "error", "tokens", "cost_usd")
"""The bookkeeping columns every result frame ends with."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MapRows:
    """The input, normalized: row keys (the index labels) beside each row's values.

    Attributes:
        labels: The index labels, in order (0..n-1 for a list of dicts).
        records: Each row as a dict of the columns the prompt may read.
        frame: The input DataFrame, when it was one (the result is built on a copy of it).
    """

    labels: list[Any]
    records: list[dict[str, Any]]
    frame: Any = None

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(slots=True)
class RowOutcome:
    """What became of one row (mutable: executors fill it in as the row ends)."""

    status: RowStatus = "pending"
    output: Any = None
    error: str | None = None
    tokens: int = 0
    cost_usd: float | None = None


def _is_frame(data: object) -> bool:
    module = type(data).__module__
    return module.startswith("pandas") and type(data).__name__ == "DataFrame"


def read_rows(data: object) -> MapRows:
    """Normalize ``data`` (a pandas DataFrame, or a sequence of mappings) without copying the values twice.

    Raises:
        ConfigurationError: ``data`` is neither, or one of its items is not a mapping.
    """
    if _is_frame(data):
        frame: Any = data
        if not frame.columns.is_unique:
            raise ConfigurationError("the DataFrame has duplicate column names", hint="rename them first")
        return MapRows(labels=list(frame.index), records=frame.to_dict("records"), frame=frame)
    if isinstance(data, str | bytes) or not isinstance(data, Sequence):
        raise ConfigurationError(
            f"data must be a pandas DataFrame or a list of dicts, got {type(data).__name__}",
            hint="wrap single values as [{'text': value}, ...]",
        )
    records: list[dict[str, Any]] = []
    for position, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise ConfigurationError(f"row {position} is a {type(item).__name__}, not a dict")
        records.append(dict(item))
    return MapRows(labels=list(range(len(records))), records=records)


def render_prompts(rows: MapRows, prompt: Prompt) -> list[str]:
    """Every row's prompt, rendered up front so a missing column fails before any request is sent.

    Raises:
        ConfigurationError: The template names a column the rows lack, the callable raised, or a
            prompt came out empty.
    """
    if isinstance(prompt, str):
        template = PromptTemplate(prompt, allow_extra=True)
        names = template.variables
        if not names and len(rows) > 1:
            raise ConfigurationError(
                "the prompt names no column, so every row would get the same prompt",
                hint="refer to a column as {{name}}",
            )
        out: list[str] = []
        for position, record in enumerate(rows.records):
            missing = names.difference(record)
            if missing:
                raise ConfigurationError(
                    f"row {rows.labels[position]!r} has no column {sorted(missing)[0]!r} for the prompt",
                    hint=f"columns: {sorted(record)[:12]}",
                )
            out.append(template.render(**{name: record[name] for name in names}))
    elif callable(prompt):
        out = []
        for position, record in enumerate(rows.records):
            try:
                text = prompt(record)
            except Exception as exc:
                raise ConfigurationError(f"the prompt function failed on row {rows.labels[position]!r}: {exc}") from exc
            if not isinstance(text, str):
                raise ConfigurationError(f"the prompt function returned {type(text).__name__}, not str")
            out.append(text)
    else:
        raise ConfigurationError(f"prompt must be a str template or a callable, got {type(prompt).__name__}")
    for position, text in enumerate(out):
        if not text.strip():
            raise ConfigurationError(f"the prompt for row {rows.labels[position]!r} is empty")
    return out


def row_key(label: object) -> str:
    """A stable text key for an index label (what a checkpoint stores)."""
    return json.dumps(label, default=str, sort_keys=True)


def prompt_digest(text: str) -> str:
    """Fingerprint of one row's prompt: a checkpointed row is reused only if its prompt is unchanged."""
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def output_columns(output: object) -> tuple[str, ...]:
    """The columns an output type adds: a pydantic model's fields, a JSON schema's properties, else ``answer``."""
    fields = getattr(output, "model_fields", None)
    if isinstance(fields, Mapping) and fields:
        return tuple(str(name) for name in fields)
    if isinstance(output, Mapping):
        props = output.get("properties")
        if output.get("type") == "object" and isinstance(props, Mapping) and props:
            return tuple(str(name) for name in props)
    return ("answer",)


def _cells(columns: tuple[str, ...], value: object) -> list[Any]:
    if columns == ("answer",):
        return [value]
    if isinstance(value, Mapping):
        return [value.get(name) for name in columns]
    return [None] * len(columns)


def build_frame(rows: MapRows, outcomes: Sequence[RowOutcome], columns: tuple[str, ...]) -> pd.DataFrame:
    """The result: the input's columns and index, then the output columns, then ``RESULT_COLUMNS``."""
    import pandas as pd  # lazy: only a built result needs pandas

    values: list[list[Any]] = [[] for _ in columns]
    for outcome in outcomes:
        for slot, cell in zip(values, _cells(columns, outcome.output), strict=True):
            slot.append(cell)
    outputs = pd.DataFrame(dict(zip(columns, values, strict=True)), index=pd.RangeIndex(len(outcomes)))
    if len(outcomes):  # nullable dtypes: a failed row's missing int keeps the column int (Int64), not float
        outputs = outputs.convert_dtypes()
    added: dict[str, Any] = {name: outputs[name].array for name in columns}
    added["status"] = pd.Categorical([o.status for o in outcomes], categories=["done", "failed", "pending"])
    added["error"] = [o.error for o in outcomes]
    added["tokens"] = pd.array([o.tokens for o in outcomes], dtype="int64")
    added["cost_usd"] = pd.array([o.cost_usd for o in outcomes], dtype="Float64")
    if rows.frame is not None:
        base = rows.frame.drop(columns=[c for c in added if c in rows.frame.columns])
        extra = pd.DataFrame(added, index=rows.frame.index)
        combined: pd.DataFrame = pd.concat([base, extra], axis=1)
        return combined
    base = pd.DataFrame.from_records(rows.records, index=pd.RangeIndex(len(rows.records)))
    base = base.drop(columns=[c for c in added if c in base.columns])
    result: pd.DataFrame = pd.concat([base, pd.DataFrame(added, index=base.index)], axis=1)
    return result
