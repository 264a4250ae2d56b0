"""JSON-lines persistence: an append-only line file, and ``JsonlEventJournal`` on top of it.

Each record is handed to the OS in one ``write`` call on an ``O_APPEND`` descriptor, so a killed
process leaves whole lines (power loss aside), and concurrent appenders never interleave within a
line. A line torn by a crash mid-write is skipped on reading, never fatal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError, StoreError
from ._journal import _JournalBase, _Query
from ._observability import AgentObservation, _dumps

__all__ = ["JsonlEventJournal"]

_log = logging.getLogger("tinyagents_nb")


def _read_json_lines(path: str) -> tuple[list[Any], int]:
    """The decoded lines of a JSONL file and how many were skipped for not parsing."""
    out: list[Any] = []
    skipped = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                out.append(json.loads(raw))
            except ValueError:
                skipped += 1
                _log.warning("skipping unparseable line %d of %s (torn by a crash?)", number, path)
    return out, skipped


class _JsonlFile:
    """Appends whole lines with one ``write`` each (``O_APPEND``), and reads back the lines that parse.

    A file whose last line was torn by a crash gets a newline before the next append, so the fragment
    stays a line of its own (skipped on reading) instead of corrupting the next record.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if not self.path:
            raise ConfigurationError("a JSONL path must not be empty")
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigurationError(f"cannot open {self.path!r} for appending: {exc}") from exc
        self.skipped = 0
        """Lines that did not parse as JSON on the last read (torn by a crash, or edited by hand)."""
        if not self._ends_with_newline():
            self._write(b"\n")

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return True
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def append(self, value: Any) -> None:
        self._write((_dumps(value) + "\n").encode("utf-8"))

    def read(self) -> list[Any]:
        values, self.skipped = _read_json_lines(self.path)
        return values

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class JsonlEventJournal(_JournalBase):
    """A journal as a JSON-lines file, one ``AgentObservation.to_dict()`` per line (greppable, diffable).

    Reading decodes the whole file, so it suits a session's worth of events; use SQLite for more.

    Args:
        path: The file; created (with parent directories) if missing, appended to if not.

    Raises:
        ConfigurationError: The file cannot be opened for appending.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self._file = _JsonlFile(path)

    @property
    def path(self) -> str:
        return self._file.path

    @property
    def skipped_lines(self) -> int:
        """Lines the last read skipped because they were not complete JSON."""
        return self._file.skipped

    def append(self, observation: AgentObservation) -> None:
        if not isinstance(observation, AgentObservation):
            raise ConfigurationError(f"journals append AgentObservation, got {type(observation).__name__}")
        with self._lock:
            self._check_open()
            try:
                self._file.append(observation.to_dict())
            except OSError as exc:
                raise StoreError(f"cannot append to {self.path!r}: {exc}") from exc

    def _all(self) -> list[AgentObservation]:
        with self._lock:
            self._check_open()
            try:
                lines = self._file.read()
            except OSError as exc:
                raise StoreError(f"cannot read {self.path!r}: {exc}") from exc
        out: list[AgentObservation] = []
        for data in lines:
            try:
                out.append(AgentObservation.from_dict(data, lenient=True))
            except ConfigurationError:
                self._file.skipped += 1
        return out

    def _read(self, query: _Query) -> list[AgentObservation]:
        out = [obs for obs in self._all() if query.matches(obs)]
        return out if query.limit is None else out[: query.limit]

    def __len__(self) -> int:
        return len(self._all())

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._file.close()

    def __repr__(self) -> str:
        return f"JsonlEventJournal({self.path!r})"
