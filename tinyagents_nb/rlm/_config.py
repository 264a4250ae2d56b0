"""The RLM's limits and errors.

Every limit is enforced on the session side (the harness), never by code in the REPL, so code the
model writes cannot raise one. Reaching a limit ends the run with ``LimitExceeded`` (its ``limit``
names it, e.g. ``"rlm_iterations"``) and the transcript so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinyagents_nb.harness import ConfigurationError, TinyAgentsError

__all__ = ["ContextValueError", "RLMError", "RLMLimits"]


class RLMError(TinyAgentsError):
    """An RLM environment could not do its job (the child kernel failed to start, a value could not be loaded)."""


class ContextValueError(RLMError, ConfigurationError):
    """A context value cannot be given to the REPL (a bad name, or not picklable for the child kernel).

    Attributes:
        name: The value's name.
    """

    def __init__(self, name: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.name = name


def _positive(name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"RLMLimits.{name} must be a number > 0, got {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class RLMLimits:
    """Caps on one RLM run (the harness's ``RunLimits`` and ``RunConfig`` caps apply as well).

    Attributes:
        max_iterations: Model replies whose code runs; the next model call fails the run.
        block_timeout_s: Wall clock per code block; the block is interrupted and the run ends.
        max_output_chars: What one reply's blocks may print, in total, before it is cut (the cut is
            marked, with the size that was dropped, so the model learns to print less).
        max_sub_queries: ``llm``/``llm_batch`` prompts per run; one more ends the run.
        max_concurrency: Sub-queries in flight at once (``llm_batch`` is queued beyond it).
        max_consecutive_errors: Replies in a row whose code raised; one more ends the run.
        nudges: Replies without code (and without ``FINAL``) answered with a reminder of the
            protocol before such a reply is taken as the final answer.
        max_depth: How deep ``rlm_query`` children may nest: the root run is at depth 0, its
            children at 1; ``rlm_query`` from a run at ``max_depth`` is refused (the REPL gets
            ``RLMCallError``). ``0`` turns ``rlm_query`` off. The harness holds the depth, so code in
            the REPL cannot raise it.
        memory_mb: The child kernel's memory (``RLIMIT_DATA``: its heap and anonymous memory; the
            kernel itself takes 150-250 MB of it). A block that needs more gets
            ``MemoryLimitExceeded`` and the kernel is restarted. Child kernel only, Linux.
        cpu_seconds: CPU time one block may use in the child kernel (``RLIMIT_CPU``, every thread
            counted); past it the kernel is ended with ``SIGXCPU``, the block gets
            ``CPULimitExceeded`` and the kernel is restarted. Child kernel only, Linux.
    """

    max_iterations: int = 20
    block_timeout_s: float | None = 120.0
    max_output_chars: int = 4_000
    max_sub_queries: int = 500
    max_concurrency: int = 8
    max_consecutive_errors: int = 5
    nudges: int = 1
    max_depth: int = 1
    memory_mb: int | None = None
    cpu_seconds: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_iterations", "max_output_chars", "max_sub_queries", "max_concurrency"):
            value = getattr(self, name)
            if not isinstance(value, int):
                raise ConfigurationError(f"RLMLimits.{name} must be an int, got {value!r}")
            _positive(name, value)
        _positive("block_timeout_s", self.block_timeout_s, allow_none=True)
        for name in ("max_consecutive_errors", "nudges", "max_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"RLMLimits.{name} must be an int >= 0, got {value!r}")
        for name in ("memory_mb", "cpu_seconds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ConfigurationError(f"RLMLimits.{name} must be an int > 0 or None, got {value!r}")
