"""RLM trajectories: one run's tree (code steps, outputs, sub-calls, usage, cost, timings) as a versioned file.

A trajectory is built from the events the run already emitted (``rlm.code``, ``rlm.output``,
``run.*``, ``subagent.*``, ``usage.recorded``, ``cost.recorded``, ``model.*``, ``rlm.partial``),
never from a logger of its own, so a notebook session's journal and a live ``RLM`` give the same
file. The file is JSON Lines (see ``docs/rlm.md``, "Trajectories"): a header line naming the format
and its version, one line per run of the tree (parents before children) and an end line with the
count, so a truncated copy is an error, not a shorter trajectory. ``Trajectory.load`` checks all
of it and raises ``TrajectoryError`` (``TrajectoryVersionError`` for a file from a newer version).

Everything in a trajectory came from a model or from code it wrote: it is untrusted text. Secrets
(configured keys in the environment, key-shaped strings) are scrubbed when it is built. Its
notebook view is the magics' (``%load_ext tinyagents_nb`` registers it as the display of a
``Trajectory``), through the package's Markdown sanitiser; this family never imports the widgets.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

import pydantic

from tinyagents_nb.harness import Usage

from ._config import RLMError
from ._trajectory_model import TrajectoryRun

__all__ = [
    "TRAJECTORY_FORMAT",
    "TRAJECTORY_VERSION",
    "Trajectory",
    "TrajectoryError",
    "TrajectoryVersionError",
]

TRAJECTORY_FORMAT = "tinyagents-nb/rlm-trajectory"
TRAJECTORY_VERSION = 2
"""Version 2 added the model's prose around each step's code; version 1 files are read (without it)."""


class TrajectoryError(RLMError):
    """A trajectory file cannot be read: not one, corrupted or truncated (the message says which line)."""


class TrajectoryVersionError(TrajectoryError):
    """A trajectory file written by a newer version, in a format this version does not know.

    Attributes:
        version: The file's format version.
    """

    def __init__(self, version: int) -> None:
        super().__init__(
            f"this trajectory is format version {version}; this version of tinyagents-nb reads up to "
            f"{TRAJECTORY_VERSION}",
            hint="upgrade tinyagents-nb to read it",
        )
        self.version = version


_RUN = pydantic.TypeAdapter(TrajectoryRun)


def _usage_dict(usage: Usage) -> dict[str, Any]:
    return {f.name: getattr(usage, f.name) for f in dataclasses.fields(usage)}


def _run_line(run: TrajectoryRun) -> dict[str, Any]:
    data = dataclasses.asdict(run)
    data["usage"] = _usage_dict(run.usage)
    data["cost_usd"] = None if run.cost_usd is None else str(run.cost_usd)
    return {"type": "run", **data}


class Trajectory:
    """An RLM run's tree, ready to save, load and show (see the module docstring).

    Args:
        runs: Every run of the tree, the root first, each parent before its children.
        exported_at: When it was built or saved (epoch seconds).

    Raises:
        TrajectoryError: No runs, or a run whose parent is not in the tree.
    """

    def __init__(self, runs: list[TrajectoryRun], *, exported_at: float = 0.0) -> None:
        if not runs:
            raise TrajectoryError("a trajectory needs at least its root run")
        self.runs: tuple[TrajectoryRun, ...] = tuple(runs)
        self.exported_at = exported_at
        self._by_id = {run.run_id: run for run in self.runs}
        self._children: dict[str, list[TrajectoryRun]] = {}
        for run in self.runs[1:]:
            if run.parent_run_id not in self._by_id:
                raise TrajectoryError(f"run {run.run_id!r} names a parent {run.parent_run_id!r} not in the trajectory")
            self._children.setdefault(run.parent_run_id, []).append(run)

    @property
    def root(self) -> TrajectoryRun:
        return self.runs[0]

    def run(self, run_id: str) -> TrajectoryRun:
        """One run of the tree by id (``KeyError`` when it is not in it)."""
        return self._by_id[run_id]

    def children(self, run: TrajectoryRun | str) -> list[TrajectoryRun]:
        """The runs ``run`` started, in the order they started."""
        return list(self._children.get(run if isinstance(run, str) else run.run_id, ()))

    def walk(self) -> Iterator[TrajectoryRun]:
        """Every run, depth first (each run before its children)."""
        stack = [self.root]
        while stack:
            run = stack.pop()
            yield run
            stack.extend(reversed(self._children.get(run.run_id, ())))

    @property
    def usage(self) -> Usage:
        """Tokens of the whole tree."""
        total = Usage()
        for run in self.runs:
            total = total + run.usage
        return total

    @property
    def cost_usd(self) -> Decimal | None:
        """Dollars of the whole tree (``None`` when a price was unknown)."""
        total = Decimal(0)
        for run in self.runs:
            if run.cost_usd is None:
                return None
            total += run.cost_usd
        return total

    @property
    def answer(self) -> str:
        """The root's answer, else its partial answer, else ``""``."""
        return self.root.answer or self.root.partial_answer or ""

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trajectory as JSON Lines (the header, one line per run, the end line)."""
        header = {
            "type": "trajectory",
            "format": TRAJECTORY_FORMAT,
            "version": TRAJECTORY_VERSION,
            "root_run_id": self.root.run_id,
            "exported_at": self.exported_at,
            "runs": len(self.runs),
        }
        lines = [header, *(_run_line(run) for run in self.runs), {"type": "end", "runs": len(self.runs)}]
        text = "".join(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n" for line in lines)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Trajectory:
        """Read a file ``save`` wrote.

        Raises:
            TrajectoryVersionError: A newer format version.
            TrajectoryError: Not a trajectory, a corrupted line, or a truncated file.
        """
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except UnicodeDecodeError:
            raise TrajectoryError(f"{os.fspath(path)!r} is not a trajectory file (not UTF-8 text)") from None
        return cls.from_lines(lines, source=os.fspath(path))

    @classmethod
    def from_lines(cls, lines: list[str], *, source: str = "the trajectory") -> Trajectory:
        """Parse the lines of a trajectory file (see ``load``)."""
        rows = [line for line in lines if line.strip()]
        header = _json_line(rows[0], 1, source) if rows else None
        if (
            not isinstance(header, dict)
            or header.get("type") != "trajectory"
            or header.get("format") != TRAJECTORY_FORMAT
        ):
            raise TrajectoryError(
                f"{source} is not an RLM trajectory file (its first line is not a {TRAJECTORY_FORMAT} header)"
            )
        version = header.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise TrajectoryError(f"{source}: the header's version is {version!r}, not a format version")
        if version > TRAJECTORY_VERSION:
            raise TrajectoryVersionError(version)
        runs: list[TrajectoryRun] = []
        end: Any = None
        for number, row in enumerate(rows[1:], start=2):
            data = _json_line(row, number, source)
            if not isinstance(data, dict):
                raise TrajectoryError(f"{source}, line {number}: not a JSON object")
            if data.get("type") == "end":
                end = data
                if number < len(rows):
                    raise TrajectoryError(f"{source}, line {number}: lines after the end line")
                break
            if data.get("type") != "run":
                raise TrajectoryError(f"{source}, line {number}: unknown line type {data.get('type')!r}")
            runs.append(_parse_run(data, number, source))
        if end is None or end.get("runs") != len(runs) or header.get("runs") != len(runs):
            raise TrajectoryError(
                f"{source} is truncated or corrupted: the header promises {header.get('runs')!r} runs, "
                f"{len(runs)} were read{'' if end is not None else ' and the end line is missing'}"
            )
        exported = header.get("exported_at")
        return cls(runs, exported_at=float(exported) if isinstance(exported, int | float) else 0.0)

    def __repr__(self) -> str:
        root = self.root
        return (
            f"Trajectory(root_run_id={root.run_id!r}, status={root.status!r}, runs={len(self.runs)}, "
            f"steps={sum(len(r.steps) for r in self.runs)}, tokens={self.usage.total_tokens})"
        )


def _json_line(row: str, number: int, source: str) -> Any:
    try:
        return json.loads(row)
    except json.JSONDecodeError as exc:
        raise TrajectoryError(f"{source}, line {number}: not valid JSON ({exc.msg})") from None


def _parse_run(data: dict[str, Any], number: int, source: str) -> TrajectoryRun:
    body = {k: v for k, v in data.items() if k != "type"}
    cost = body.get("cost_usd")
    try:
        if cost is not None:
            body["cost_usd"] = Decimal(str(cost))
        return _RUN.validate_python(body, strict=False)
    except (pydantic.ValidationError, InvalidOperation, TypeError, ValueError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, pydantic.ValidationError) else str(exc)
        raise TrajectoryError(f"{source}, line {number}: not a trajectory run ({detail})") from None
