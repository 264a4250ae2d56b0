"""Copying values into the child kernel: pickle for most, Arrow IPC files for large tables and arrays.

A 1 GB DataFrame pickled is a 1 GB ``bytes`` held by the notebook for the whole run (to load it
again after a restart) and, in the child, a 1 GB ``bytes`` read whole before a second gigabyte is
built from it. Large DataFrames, numeric arrays and Arrow tables go as Arrow IPC instead: written
in slices (the notebook holds one slice at a time) to a file the child memory-maps, so neither
process holds the serialized copy in its heap. The file lives in a private directory (``0700``, the
file ``0600``) until the run ends (a restarted kernel reads it again), and is removed then.

Only values that come back equal take that path: a DataFrame with an ``object`` column (Arrow
would turn Python strings into the ``str`` dtype), ``attrs``, or columns that are not unique and
flat is pickled as before, as is everything when ``pyarrow`` is not installed (extra ``[rlm]``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._config import ContextValueError

__all__ = ["ARROW_MIN_BYTES", "ArrowKind", "PreparedValues", "pack_values"]

ARROW_MIN_BYTES = 32 << 20
"""Values at least this large (in memory) go as Arrow IPC when they can; smaller ones are pickled."""
_SLICE_BYTES = 64 << 20  # rows converted at once when writing a DataFrame
ArrowKind = Literal["dataframe", "ndarray", "table"]


@dataclass(eq=False)
class PreparedValues:
    """What one run copies into its kernel: pickled values, and Arrow files for the large ones.

    Attributes:
        blobs: Each pickled value, by name.
        files: Each Arrow-encoded value as ``(kind, path)``, by name.
        transport: How each value travels: ``"pickle"`` or ``"arrow"``.
    """

    blobs: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, tuple[ArrowKind, str]] = field(default_factory=dict)
    transport: dict[str, str] = field(default_factory=dict)
    directory: str | None = None
    _finalizer: Any = None

    def folder(self) -> str:
        """The private directory for this run's files (made on first use, removed by ``cleanup``)."""
        if self.directory is None:
            self.directory = tempfile.mkdtemp(prefix="tinyagents-rlm-values-")  # 0700
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.directory, ignore_errors=True)
        return self.directory

    def cleanup(self) -> None:
        """Remove the Arrow files (the run ended; also done when this object is collected)."""
        if self._finalizer is not None:
            self._finalizer()


def _arrow_kind(value: Any) -> ArrowKind | None:
    """Which Arrow encoding round-trips ``value`` exactly (``None``: pickle it)."""
    cls = type(value)
    module, name = cls.__module__, cls.__name__
    if module.startswith("pandas") and name == "DataFrame":
        columns = value.columns
        if value.attrs or columns.nlevels != 1 or not columns.is_unique:
            return None
        index_dtypes = [value.index.dtype] if value.index.nlevels == 1 else list(value.index.dtypes)
        if any(str(dtype) == "object" for dtype in [*value.dtypes, *index_dtypes]):
            return None
        return "dataframe"
    if module == "numpy" and name == "ndarray":
        if value.ndim >= 1 and value.dtype.kind in "iuf" and value.flags.c_contiguous and value.dtype.byteorder != ">":
            return "ndarray"
        return None
    if module.startswith("pyarrow") and name == "Table":
        return "table"
    return None


def _size(value: Any, kind: ArrowKind) -> int:
    if kind == "dataframe":
        return int(value.memory_usage(index=True, deep=False).sum())
    return int(value.nbytes)


def _write(value: Any, kind: ArrowKind, path: str) -> None:
    import pyarrow as pa  # imported here: only runs that copy a large value need it

    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # 0600 before a byte is written
    with pa.OSFile(path, "wb") as sink:
        if kind == "ndarray":
            pa.ipc.write_tensor(pa.Tensor.from_numpy(value), sink)
        elif kind == "table":
            with pa.ipc.new_file(sink, value.schema) as writer:
                writer.write_table(value)
        else:
            schema = pa.Schema.from_pandas(value, preserve_index=None)
            rows = max(1, len(value) * _SLICE_BYTES // max(1, _size(value, kind)))
            with pa.ipc.new_file(sink, schema) as writer:
                for start in range(0, len(value), rows):
                    part = value.iloc[start : start + rows]
                    writer.write_batch(pa.RecordBatch.from_pandas(part, schema=schema, preserve_index=None))
                if len(value) == 0:
                    writer.write_table(schema.empty_table())


def _arrow_available() -> bool:
    try:
        import pyarrow.ipc  # noqa: F401
    except ImportError:
        return False
    return True


def pack_values(values: Mapping[str, Any], *, arrow_min_bytes: int | None = ARROW_MIN_BYTES) -> PreparedValues:
    """Serialize every value now (so a bad one is an error before the run starts).

    Raises:
        ContextValueError: A value cannot be pickled (an Arrow write that fails falls back to pickle).
    """
    prepared = PreparedValues()
    arrow = arrow_min_bytes is not None and any(_arrow_kind(v) is not None for v in values.values())
    arrow = arrow and _arrow_available()
    for name, value in values.items():
        kind = _arrow_kind(value) if arrow else None
        if kind is not None and arrow_min_bytes is not None and _size(value, kind) >= arrow_min_bytes:
            path = os.path.join(prepared.folder(), f"{name}.arrow")
            try:
                _write(value, kind, path)
            except Exception:  # a value pyarrow cannot encode (a nested type, an extension dtype): pickle it
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                prepared.files[name] = (kind, path)
                prepared.transport[name] = "arrow"
                continue
        try:
            prepared.blobs[name] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            prepared.cleanup()
            raise ContextValueError(
                name,
                f"context value {name!r} ({type(value).__name__}) cannot be copied into the REPL kernel: "
                f"{type(exc).__name__}: {exc}",
                hint="use the in-process environment (--rlm local / environment='local') or pass plain data",
            ) from None
        prepared.transport[name] = "pickle"
    return prepared
