"""The records of a trajectory: one run of the tree, its code steps and its model calls (see ``_trajectory``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from tinyagents_nb.harness import Usage

__all__ = ["TrajectoryCall", "TrajectoryRun", "TrajectoryStep"]


@dataclass(frozen=True, kw_only=True)
class TrajectoryStep:
    """One code block of an RLM run: the code, what it printed, and the sub-calls it made.

    Attributes:
        iteration: The model reply that carried it (1 for the first).
        index: Its place among that reply's blocks (0 for the first).
        code: The code as the model wrote it.
        output: What it printed (bounded by ``RLMLimits.max_output_chars``; ``truncated`` says so).
        error_type: The exception it raised, or ``None``.
        duration_s: Its wall time.
        sub_calls: The run ids of the ``llm``/``llm_batch``/``rlm_query`` children it started.
        prose: The model's text before the block in its reply (format version 2; ``""`` in version 1).
        prose_after: The text after the reply's last block, on that block's step (version 2).
    """

    iteration: int
    index: int
    code: str
    output: str = ""
    error_type: str | None = None
    duration_s: float = 0.0
    truncated: bool = False
    sub_calls: tuple[str, ...] = ()
    prose: str = ""
    prose_after: str = ""


@dataclass(frozen=True, kw_only=True)
class TrajectoryCall:
    """One model call of a run (the REPL protocol's own closing turn is not one)."""

    call_id: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    duration_s: float = 0.0
    finish_reason: str | None = None
    error_type: str | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class TrajectoryRun:
    """One run of the tree: the RLM run, an ``rlm_query`` child (``kind="rlm"``) or a sub-query (``kind="llm"``).

    ``usage`` and ``cost_usd`` are the run's own model calls; ``Trajectory.usage`` adds up the
    tree. ``cost_usd`` is ``None`` when a call's price was unknown. Texts from events are bounded
    as the events bound them (2,000 characters for ``input``, ``answer`` and ``error``).
    """

    run_id: str
    parent_run_id: str | None = None
    depth: int = 0
    kind: str = "llm"
    agent: str | None = None
    model: str | None = None
    input: str = ""
    status: str = "running"
    answer: str = ""
    partial_answer: str | None = None
    partial_source: str | None = None
    error_type: str | None = None
    error: str | None = None
    limit: str | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal | None = Decimal(0)
    steps: tuple[TrajectoryStep, ...] = ()
    model_calls: tuple[TrajectoryCall, ...] = ()
