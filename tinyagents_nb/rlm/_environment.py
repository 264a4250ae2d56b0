"""What an RLM environment is: a REPL namespace that runs code blocks, one run at a time.

Two implementations: ``KernelEnvironment`` (a child ipykernel; the default) and
``LocalEnvironment`` (a fresh namespace in this process). Both run a block under a per-block
timeout and a ``should_stop`` callback polled while it runs (the run's Stop, or a fatal sub-query
limit), and both turn an exception in the block into output: errors are data for the model.
"""

from __future__ import annotations

import io
import keyword
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ._config import ContextValueError
from ._helpers import bound_write

if TYPE_CHECKING:
    from ._bridge import SubQueries

__all__ = ["BoundedOutput", "Environment", "ExecutionResult", "StopReason", "check_names", "trim_traceback"]

StopReason = Literal["stop", "timeout"]
OUTPUT_HEAD = 1_000_000
"""Characters of a block's output kept from its start (the model sees far fewer: ``max_output_chars``)."""
OUTPUT_TAIL = 4_000
"""Characters kept from its end, after a flood: where a loop's last lines and the error are."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TRACEBACK_LINES = 12
_RESERVED = frozenset(
    {
        "llm",
        "llm_batch",
        "llm_query",
        "llm_query_batched",
        "rlm_query",
        "rlm_query_batched",
        "FINAL",
        "FINAL_VAR",
        "SHOW_VARS",
        "RLMCallError",
        "answer",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionResult:
    """One block's outcome.

    Attributes:
        output: What it printed (stdout, stderr, its last expression's value, a trimmed traceback).
        error_type: The exception it raised, if any (``KeyboardInterrupt`` when it was stopped).
        stopped: Why it was interrupted: ``"stop"`` (the run was stopped or hit a fatal limit) or
            ``"timeout"``; ``None`` when it ran to its end.
        duration_s: Wall time of the block.
    """

    output: str
    error_type: str | None = None
    stopped: StopReason | None = None
    duration_s: float = 0.0


@runtime_checkable
class Environment(Protocol):
    """A REPL for RLM runs; reused across runs, each run starting from a fresh namespace."""

    @property
    def name(self) -> str:
        """``"kernel"`` or ``"local"`` (shown to the model and in events)."""
        ...

    def prepare_values(self, values: Mapping[str, Any]) -> Any:
        """Check (and for a child process, serialize) the values before the run starts.

        Raises:
            ContextValueError: A value cannot be given to this environment; the message names it.
        """
        ...

    async def start_run(self, prepared: Any, queries: SubQueries) -> None:
        """A fresh namespace holding the values and the helpers, wired to ``queries``."""
        ...

    async def execute(self, code: str, *, timeout_s: float | None, should_stop: Callable[[], bool]) -> ExecutionResult:
        """Run one block; interrupt it when ``should_stop()`` turns true or the timeout passes."""
        ...

    async def end_run(self) -> None:
        """Release the run's namespace (the environment stays up for the next run)."""
        ...

    def close(self) -> None:
        """Shut the environment down for good (a child kernel is stopped)."""
        ...


class BoundedOutput(io.TextIOBase):
    """A write-only text stream that keeps a block's first ``head`` and last ``tail`` characters.

    What a block prints is held while it streams, so it must be bounded then, not cut afterwards: a
    50 MB ``print`` or a ``while True: print()`` would otherwise grow the notebook process until the
    block's timeout. The middle is counted, not kept, and ``getvalue`` says how much went.
    """

    def __init__(self, *, head: int = OUTPUT_HEAD, tail: int = OUTPUT_TAIL) -> None:
        super().__init__()
        self._limits = (head, tail)
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self._overflow = 0  # characters past the head, kept (the tail) or not
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        head, tail = self._limits
        with self._lock:
            part, rest, self._tail = bound_write(text, head - self._head_len, self._tail, tail)
            if part:
                self._head.append(part)
                self._head_len += len(part)
            self._overflow += rest
        return len(text)

    @property
    def dropped(self) -> int:
        """Characters written but not kept."""
        return self._overflow - len(self._tail)

    def getvalue(self) -> str:
        with self._lock:
            kept = "".join(self._head)
            if self._overflow == 0:
                return kept
            dropped = self._overflow - len(self._tail)
            note = f"\n[… output flood: {dropped:,} characters in the middle were not kept]\n" if dropped else ""
            return kept + note + self._tail


def check_names(values: Mapping[Any, Any]) -> None:
    """Every name must be a plain identifier that does not shadow a helper."""
    for name in values:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ContextValueError(str(name), f"context name {name!r} is not a valid Python variable name")
        if name in _RESERVED:
            raise ContextValueError(name, f"context name {name!r} would hide the REPL helper of that name")


def trim_traceback(text: str, *, lines: int = _TRACEBACK_LINES) -> str:
    """A traceback without colour codes, cut to its last ``lines`` lines (where the error is)."""
    kept = _ANSI.sub("", text).rstrip().splitlines()
    if len(kept) > lines:
        kept = ["Traceback (most recent call last, trimmed):", *kept[-lines:]]
    return "\n".join(kept)
