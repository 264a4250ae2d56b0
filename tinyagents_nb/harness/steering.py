"""Steering: the commands that change a running agent, the handle that sends them, and their outcomes.

The front namespace re-exports ``SteeringHandle`` and the everyday commands (``Pause``, ``Resume``,
``InjectMessage``); the other commands, ``SubAgentHandle``, the outcome, policy, receipts, kinds and
their JSON codec live here.
"""

from __future__ import annotations

from ._child_steering import (
    SubAgentHandle as SubAgentHandle,
)
from ._steering import (
    Cancel as Cancel,
    InjectMessage as InjectMessage,
    Pause as Pause,
    Redirect as Redirect,
    Resume as Resume,
    SetMetadata as SetMetadata,
    SteeringCommand as SteeringCommand,
    SteeringHandle as SteeringHandle,
    SteeringKind as SteeringKind,
    SteeringOutcome as SteeringOutcome,
    SteeringPolicy as SteeringPolicy,
    SteeringReceipt as SteeringReceipt,
    steering_from_dict as steering_from_dict,
    steering_to_dict as steering_to_dict,
)

__all__ = [
    "Cancel",
    "InjectMessage",
    "Pause",
    "Redirect",
    "Resume",
    "SetMetadata",
    "SteeringCommand",
    "SteeringHandle",
    "SteeringKind",
    "SteeringOutcome",
    "SteeringPolicy",
    "SteeringReceipt",
    "SubAgentHandle",
    "steering_from_dict",
    "steering_to_dict",
]
