"""The ``RunPolicy`` of every run the notebook starts, built in one place.

A ``%%agent`` cell and ``%agent resume`` once built their policies separately, and the resumed run
drifted (it ignored ``AgentMagics.token_counting``). Both now read the session's settings here, so a
setting (the approval timeout above all: a resumed run's card waits for the person too) applies to
every kind of run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from tinyagents_nb.harness import ChatModel, RunLimits, RunPolicy

from ._budget import unattended_decision
from ._offline import OfflineModel

__all__ = ["notebook_policy"]


class PolicySettings(Protocol):
    """The session settings a run's policy reads (``NotebookSession``'s, set by ``%config AgentMagics``)."""

    approvals: str
    approval_timeout_s: float | None
    token_counting: Literal["estimate", "exact"]
    max_model_calls: int
    can_answer: Callable[[], bool]


def notebook_policy(
    settings: PolicySettings, model: ChatModel, *, max_model_calls: int | None = None
) -> tuple[bool, RunPolicy]:
    """Whether a person can answer the run's approval cards, and the run's policy.

    Approvals wait for the person unless ``AgentMagics.approval_timeout`` is set (``RunPolicy``'s
    300 s default is for scripts, where nobody may be watching).
    """
    unknown_price: Literal["allow", "refuse"] = "allow" if isinstance(model, OfflineModel) else "refuse"
    limits = RunLimits(
        max_model_calls=settings.max_model_calls if max_model_calls is None else max_model_calls,
        unknown_price=unknown_price,
    )
    attended, unattended = unattended_decision(settings.approvals, settings.can_answer)
    policy = RunPolicy(
        limits=limits,
        unattended_approval=unattended,
        approval_timeout_s=settings.approval_timeout_s,
        token_counting=settings.token_counting,
    )
    return attended, policy
