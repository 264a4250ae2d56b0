"""What the agent may know about the kernel's variables: a bounded list and a bounded description of one.

Only the person's own variables count: not modules, not IPython's namespace (``In``, ``Out``,
``get_ipython``, what ``%who`` leaves out), not ``_``-names, not the extension's own objects (run
handles, the session), not functions or classes imported from elsewhere. Every text is cut to a size
bound, whatever the value's size, and sizes are computed without copying: a DataFrame's memory is its
shallow ``memory_usage``, its statistics come from an evenly strided sample when it is long, so a
10-million-row frame is described in a fraction of a second.
"""

from __future__ import annotations

import reprlib
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from ._mask import MASK, Masker

__all__ = ["clip", "describe_variable", "list_variables", "shape_text", "user_variables"]

_TIMES: Final = "\u00d7"
_SAMPLE_ROWS: Final = 100_000
_ARRAY_SAMPLE: Final = 1_000_000
_HEAD_ROWS: Final = 5
_COLUMNS: Final = 40
_LIST_COLUMNS: Final = 8
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 200
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = _repr.maxdeque = 10
_repr.maxlevel = 3


def clip(text: str, limit: int, what: str = "description") -> str:
    """``text`` cut to ``limit`` characters, saying so (the cut note counts toward the limit)."""
    if len(text) <= limit:
        return text
    note = f"\n… ({what} cut to {limit:,} characters)"
    return text[: max(0, limit - len(note))].rstrip() + note


def _pandas() -> Any:
    return sys.modules.get("pandas")  # never imported here: a kernel without pandas has no DataFrame


def _numpy() -> Any:
    return sys.modules.get("numpy")


def _own(value: Any) -> bool:
    """Whether ``value`` is something the person made in this notebook (not a module, not an import)."""
    if isinstance(value, types.ModuleType):
        return False
    module = getattr(type(value), "__module__", "") or ""
    if module.startswith(("tinyagents_nb", "IPython", "ipykernel", "ipywidgets")):
        return False
    if isinstance(value, types.FunctionType | type):
        return getattr(value, "__module__", None) == "__main__"
    return not isinstance(value, types.BuiltinFunctionType | types.MethodWrapperType)


def user_variables(namespace: Mapping[str, Any], hidden_ns: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The person's variables: ``(name, value)`` in definition order."""
    for name, value in list(namespace.items()):
        if name.startswith("_") or (name in hidden_ns and hidden_ns[name] is value):
            continue
        if _own(value):
            yield name, value


def _size_bytes(value: Any) -> int | None:
    pd, np = _pandas(), _numpy()
    try:
        if pd is not None and isinstance(value, pd.DataFrame):
            return int(value.memory_usage(index=True, deep=False).sum())
        if pd is not None and isinstance(value, pd.Series):
            return int(value.memory_usage(index=True, deep=False))
        if np is not None and isinstance(value, np.ndarray):
            return int(value.nbytes)
        return sys.getsizeof(value)
    except Exception:  # a broken object must not break the listing
        return None


def _human(size: int | None) -> str:
    if size is None:
        return "size unknown"
    amount = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"~{amount:,.0f} {unit}" if unit == "B" else f"~{amount:,.1f} {unit}"
        amount /= 1000
    return f"~{amount:,.1f} TB"  # pragma: no cover


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    if module in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{module.split('.')[0]}.{kind.__qualname__}"


def shape_text(value: Any) -> str:
    """``10,000 x 8`` for a table, ``(3, 4)`` for an array, ``12 items`` for a container, ``""`` otherwise."""
    pd = _pandas()
    if pd is not None and isinstance(value, pd.DataFrame):
        rows, cols = value.shape
        return f"{rows:,} {_TIMES} {cols:,}"
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and not isinstance(value, type):
        return _TIMES.join(f"{n:,}" for n in shape) if len(shape) != 1 else f"{shape[0]:,} items"
    if isinstance(value, str | bytes | bytearray):
        return f"{len(value):,} chars" if isinstance(value, str) else f"{len(value):,} bytes"
    if isinstance(value, type | types.FunctionType):
        return ""
    try:
        return f"{len(value):,} items"
    except Exception:
        return ""


def _columns_text(frame: Any, limit: int) -> str:
    pairs = [f"{col}: {dtype}" for col, dtype in list(frame.dtypes.items())[:limit]]
    more = f", … {frame.shape[1] - limit:,} more" if frame.shape[1] > limit else ""
    return ", ".join(pairs) + more


def list_variables(namespace: Mapping[str, Any], hidden_ns: Mapping[str, Any], masker: Masker, limit: int) -> str:
    """One line per variable: name, type, shape, approximate memory; a DataFrame's columns and dtypes."""
    pd = _pandas()
    lines: list[str] = []
    used = 0
    total = 0
    for name, value in user_variables(namespace, hidden_ns):
        if masker.is_hidden(name):
            continue
        total += 1
        if used > limit:
            continue
        if isinstance(value, types.FunctionType):
            line = f"- {name}: function {name}(…)"
        elif isinstance(value, type):
            line = f"- {name}: class"
        elif masker.secret_name(name):
            line = f"- {name}: {_type_name(value)} (value {MASK}: its name looks secret)"
        else:
            shape = shape_text(value)
            facts = [_type_name(value), *([shape] if shape else []), _human(_size_bytes(value))]
            line = f"- {name}: " + ", ".join(facts)
            if pd is not None and isinstance(value, pd.DataFrame):
                line += f"; columns: {_columns_text(value, _LIST_COLUMNS)}"
        lines.append(line)
        used += len(line) + 1
    if not lines:
        return "(no user variables yet)"
    text = "\n".join(lines)
    if used > limit:
        shown = text[:limit].rsplit("\n", 1)[0]
        count = shown.count("\n") + 1
        text = f"{shown}\n… {total - count:,} more variables (inspect one by name)"
    return f"{total:,} variable{'s' if total != 1 else ''}:\n{text}"


def _spread(size: int, count: int) -> Any:
    """``count`` sorted positions out of ``size``: one at random in each of ``count`` equal stretches.

    Even like a stride, but a stride aliases with periodic data (every 5th value missing, a 2-column
    array read as flat values) and can then see only one phase of it; a fixed seed keeps a
    description the same from one call to the next.
    """
    np = _numpy()
    starts = (np.arange(count, dtype="int64") * size) // count
    ends = (np.arange(1, count + 1, dtype="int64") * size) // count
    return starts + np.random.default_rng(0).integers(0, np.maximum(ends - starts, 1))


def _sample(frame: Any) -> tuple[Any, str]:
    rows = len(frame)
    if rows <= _SAMPLE_ROWS:
        return frame, ""
    return frame.iloc[
        _spread(rows, _SAMPLE_ROWS)
    ], f" (over {_SAMPLE_ROWS:,} of {rows:,} rows, spread evenly at random)"


def _frame(name: str, frame: Any) -> list[str]:
    rows, cols = frame.shape
    out = [f"`{name}`: pandas DataFrame, {rows:,} rows {_TIMES} {cols:,} columns, {_human(_size_bytes(frame))}"]
    shown = frame.iloc[:, :_COLUMNS]
    nulls = shown.isna().sum()
    out.append("columns (dtype, nulls):")
    out += [f"  {col}: {dtype}, {int(nulls[col]):,} null" for col, dtype in shown.dtypes.items()]
    if cols > _COLUMNS:
        out.append(f"  … {cols - _COLUMNS:,} more columns")
    out.append(f"head({_HEAD_ROWS}):")
    out.append(frame.head(_HEAD_ROWS).to_string(max_cols=12, max_colwidth=40))
    numeric = shown.select_dtypes(include="number")
    if numeric.shape[1]:
        sample, note = _sample(numeric)
        out.append(f"describe(){note}:")
        out.append(sample.describe().to_string(max_cols=12))
    return out


def _series(name: str, series: Any) -> list[str]:
    out = [f"`{name}`: pandas Series {series.name!r}, {len(series):,} values, dtype {series.dtype}"]
    out.append(f"nulls: {int(series.isna().sum()):,}")
    out.append(f"head({_HEAD_ROWS}):\n" + series.head(_HEAD_ROWS).to_string(max_rows=_HEAD_ROWS))
    sample, note = _sample(series)
    out.append(f"describe(){note}:\n" + sample.describe().to_string())
    return out


def _array(name: str, array: Any) -> list[str]:
    np = _numpy()
    out = [f"`{name}`: numpy ndarray, shape {array.shape}, dtype {array.dtype}, {_human(int(array.nbytes))}"]
    if array.size and np is not None and np.issubdtype(array.dtype, np.number):
        flat = array.reshape(-1)
        many = flat.size > _ARRAY_SAMPLE
        sample = (flat[_spread(flat.size, _ARRAY_SAMPLE)] if many else flat).astype("float64", copy=False)
        note = f" (over {_ARRAY_SAMPLE:,} of {flat.size:,} values, spread evenly at random)" if many else ""
        out.append(
            f"min {np.nanmin(sample):.6g}, max {np.nanmax(sample):.6g}, mean {np.nanmean(sample):.6g}, "
            f"std {np.nanstd(sample):.6g}, nan {int(np.isnan(sample).sum()):,}{note}"
        )
    out.append("starts: " + np.array2string(array.reshape(-1)[:10], threshold=10) if np is not None else "")
    return out


def _text(name: str, value: str, limit: int) -> list[str]:
    """Length, then the whole string or its head and tail (the tail kept within a small ``limit`` too)."""
    lines = value.count("\n") + 1 if value else 0
    out = [f"`{name}`: str, {len(value):,} characters, {lines:,} lines"]
    room = max(0, min(1_500, limit - len(out[0]) - 30))
    if len(value) <= room:
        out.append(value)
    else:
        out += ["head:", value[: room * 2 // 3], "…", "tail:", value[-(room // 4) :]]
    return out


def _container(name: str, value: Any) -> list[str]:
    out = [f"`{name}`: {_type_name(value)} with {len(value):,} items"]
    out.append("sample: " + _repr.repr(value))
    return out


_DESCRIBERS: Final[tuple[tuple[Callable[[Any], bool], Callable[[str, Any], list[str]]], ...]] = (
    (lambda v: _pandas() is not None and isinstance(v, _pandas().DataFrame), _frame),
    (lambda v: _pandas() is not None and isinstance(v, _pandas().Series), _series),
    (lambda v: _numpy() is not None and isinstance(v, _numpy().ndarray), _array),
    (lambda v: isinstance(v, list | tuple | dict | set | frozenset), _container),
)


def describe_variable(name: str, value: Any, limit: int) -> str:
    """A bounded, model-readable description of ``value`` (never more than ``limit`` characters)."""
    try:
        if isinstance(value, str):
            return clip("\n".join(_text(name, value, limit)), limit)
        for matches, describe in _DESCRIBERS:
            if matches(value):
                return clip("\n".join(line for line in describe(name, value) if line), limit)
        shape = shape_text(value)
        lines = [f"`{name}`: {_type_name(value)}" + (f", {shape}" if shape else "")]
        lines.append("repr: " + _repr.repr(value))
        return clip("\n".join(lines), limit)
    except Exception as exc:  # a broken __repr__ or a failing describe() must not break the run
        return f"`{name}`: {_type_name(value)} (could not describe it: {type(exc).__name__}: {exc})"
