"""``DataFrameSchema``: a typed RLM answer that is a table (``RLM(output_type=DataFrameSchema(...))``).

The REPL sends a DataFrame put in ``answer["content"]`` as JSON (pandas' ``orient="table"``, which
carries the column types), and a list of row dicts or a dict of columns as plain JSON. Here it is
read back into a ``pandas.DataFrame`` and checked against the schema: each named column present,
readable as its dtype (an integer column holding ``1.5`` is not), no other column when
``strict``, and the row count within bounds. What fails is said in one line, for the re-ask and
for the final error. pandas is imported when a schema is first used, never with the package.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Mapping
from typing import Any

from tinyagents_nb.harness import ConfigurationError

__all__ = ["DataFrameSchema"]

_KINDS = {
    "int": "int64",
    "integer": "int64",
    "float": "float64",
    "number": "float64",
    "str": "object",
    "string": "object",
    "bool": "bool",
    "boolean": "bool",
    "datetime": "datetime64[ns]",
}


class DataFrameSchema:
    """The columns (name → dtype) a DataFrame answer must have.

    Args:
        columns: Column name → dtype: a pandas dtype name (``"int64"``, ``"float64"``,
            ``"datetime64[ns]"``, ``"category"``) or a kind (``"int"``, ``"float"``, ``"str"``,
            ``"bool"``, ``"datetime"``).
        strict: No columns beyond ``columns``.
        min_rows: At least this many rows.
        max_rows: At most this many rows (``None``: no bound).

    Raises:
        ConfigurationError: No columns, or a dtype pandas does not know.
    """

    def __init__(
        self, columns: Mapping[str, str], *, strict: bool = False, min_rows: int = 0, max_rows: int | None = None
    ) -> None:
        import pandas as pd

        if not columns:
            raise ConfigurationError("a DataFrameSchema needs at least one column")
        self.columns: dict[str, str] = {}
        self.spelled = {str(name): str(dtype) for name, dtype in columns.items()}  # as the caller wrote them
        for name, dtype in columns.items():
            wanted = _KINDS.get(str(dtype).lower(), str(dtype))
            try:
                pd.api.types.pandas_dtype(wanted)
            except TypeError:
                raise ConfigurationError(f"column {name!r}: pandas does not know the dtype {dtype!r}") from None
            self.columns[str(name)] = wanted
        self.strict = strict
        self.min_rows = min_rows
        self.max_rows = max_rows
        self.__name__ = "DataFrame(" + ", ".join(f"{k}: {v}" for k, v in self.spelled.items()) + ")"

    def instructions(self) -> str:
        """What the system prompt adds."""
        rows = f" with {self.min_rows} to {self.max_rows} rows" if self.max_rows is not None else ""
        extra = " and no other column" if self.strict else ""
        return (
            f"Your answer must be a pandas DataFrame{rows} with the columns {json.dumps(self.spelled)}{extra}: "
            "set answer['content'] to the DataFrame itself (it is sent as JSON with its column types), then "
            "answer['ready'] = True."
        )

    def check(self, text: str) -> tuple[Any, str | None]:
        """``(frame, None)`` when the answer fits, else ``(None, what does not)``."""
        frame = _read(text)
        if isinstance(frame, str):
            return None, frame
        problems = [f"missing column {name!r}" for name in self.columns if name not in frame.columns]
        for name, dtype in self.columns.items():
            if name in frame.columns:
                converted, problem = _as_dtype(frame[name], dtype)
                if problem is not None:
                    problems.append(f"column {name!r}: {problem}")
                else:
                    frame[name] = converted
        if self.strict:
            problems += [f"unexpected column {c!r}" for c in frame.columns if c not in self.columns]
        if len(frame) < self.min_rows or (self.max_rows is not None and len(frame) > self.max_rows):
            most = "" if self.max_rows is None else f" and at most {self.max_rows}"
            problems.append(f"{len(frame)} rows, expected at least {self.min_rows}{most}")
        if problems:
            shown = problems[:4] + ([f"and {len(problems) - 4} more"] if len(problems) > 4 else [])
            return None, "; ".join(shown)
        return frame, None

    def __repr__(self) -> str:
        return f"DataFrameSchema({self.columns!r}, strict={self.strict})"


def _read(text: str) -> Any:
    """The answer as a DataFrame, or a one-line reason it is not one."""
    import pandas as pd

    try:
        data = json.loads(text)
    except ValueError:
        return "the answer is not a DataFrame (set answer['content'] to the DataFrame, not its printout)"
    try:
        if isinstance(data, dict) and "schema" in data and "data" in data:
            return pd.read_json(io.StringIO(text), orient="table")
        if isinstance(data, list) and all(isinstance(row, dict) for row in data):
            return pd.DataFrame.from_records(data)
        if isinstance(data, dict) and all(isinstance(v, list) for v in data.values()):
            return pd.DataFrame(data)
    except (ValueError, TypeError, KeyError) as exc:
        return f"the answer could not be read as a table ({type(exc).__name__}: {str(exc)[:120]})"
    return "the answer is not a table (a DataFrame, a list of row dicts or a dict of columns)"


def _as_dtype(column: Any, dtype: str) -> tuple[Any, str | None]:
    """The column as ``dtype`` without losing values, or why it cannot be."""
    import pandas as pd

    target = pd.api.types.pandas_dtype(dtype)
    if pd.api.types.is_object_dtype(target):  # "str": the values must be strings, whatever the column's dtype
        if all(isinstance(v, str) for v in column.dropna()):
            return column.astype(object), None
        return None, f"{column.dtype} values are not strings"
    if str(column.dtype) == dtype:
        return column, None
    try:
        if pd.api.types.is_datetime64_any_dtype(target):
            with warnings.catch_warnings():  # "could not infer format": each value is parsed on its own, as wanted
                warnings.simplefilter("ignore", UserWarning)
                converted = pd.to_datetime(column, errors="raise")
        else:
            converted = column.astype(target)
    except (ValueError, TypeError, OverflowError):
        sample = next((repr(v) for v in column if v is not None), "")[:40]
        return None, f"{column.dtype} values (like {sample}) cannot be read as {dtype}"
    if pd.api.types.is_integer_dtype(target) and pd.api.types.is_float_dtype(column.dtype):
        if bool((column != converted).any()):
            return None, f"float values cannot be read as {dtype} without losing their fractions"
    if pd.api.types.is_bool_dtype(target) and not pd.api.types.is_bool_dtype(column.dtype):
        return None, f"{column.dtype} values are not {dtype}"
    return converted, None
