"""Steering a running sub-agent: the ``SubAgentHandle`` a parent (or a person) gets for each child.

When the parent run accepts steering (its context has a ``SteeringHandle``), each sub-agent it
starts gets a steering queue of its own, with the parent's policy, and a cancellation token linked
to the parent's: cancelling the parent still stops the child, but a ``Cancel`` sent to the child
stops only the child's subtree (its parent's tool call then returns an error result the parent's
model can react to). The child is listed on the parent's handle while it runs, so
``AgentStream.children()`` finds it, and its own children are reachable the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._cancel import CancellationToken
from ._context import RunContext
from ._errors import SteeringError
from ._messages import UserMessage
from ._steering import InjectMessage, Pause, Redirect, Resume, SteeringCommand, SteeringHandle, SteeringReceipt

__all__ = ["SubAgentHandle", "find_child", "make_steerable"]


class SubAgentHandle:
    """Steers one running sub-agent; get it from ``AgentStream.children()`` or ``.child(run_id)``.

    Attributes:
        run_id: The sub-agent's run.
        name: The sub-agent's name.
        steering: Its steering queue (the parent run's policy applies).
    """

    __slots__ = ("_cancellation", "name", "run_id", "steering")

    def __init__(self, run_id: str, name: str, steering: SteeringHandle, cancellation: CancellationToken) -> None:
        self.run_id = run_id
        self.name = name
        self.steering = steering
        self._cancellation = cancellation

    def steer(self, command: SteeringCommand | str) -> SteeringReceipt:
        """Send a command (a string is an injected user message); applied at the child's next checkpoint."""
        return self.steering.send(
            InjectMessage(message=UserMessage(text=command)) if isinstance(command, str) else command
        )

    def pause(self, reason: str | None = None) -> SteeringReceipt:
        return self.steer(Pause(reason=reason))

    def resume(self) -> SteeringReceipt:
        return self.steer(Resume())

    def redirect(self, instruction: str) -> SteeringReceipt:
        return self.steer(Redirect(instruction=instruction))

    def cancel(self, reason: str | None = None) -> None:
        """Stop this sub-agent's subtree now (not the parent: its tool call gets an error result)."""
        self._cancellation.cancel(reason or "sub-agent cancelled")

    def children(self) -> list[SubAgentHandle]:
        """This sub-agent's own running sub-agents."""
        return list(self.steering._children())

    @property
    def is_cancelled(self) -> bool:
        return self._cancellation.is_cancelled

    def __repr__(self) -> str:
        return f"SubAgentHandle(run_id={self.run_id!r}, name={self.name!r})"


def make_steerable(parent: RunContext[Any], child: RunContext[Any], name: str) -> Callable[[], None]:
    """Give ``child`` its own steering queue and linked token, listed on the parent's handle.

    Does nothing (and returns a no-op) when the parent accepts no steering. Returns the function
    that unlists the child and unlinks its token, to call when the child's run is over.
    """
    steering = parent.steering
    if steering is None:
        return _nothing
    token = CancellationToken()
    unlink = parent.cancellation.on_cancel(lambda t: token.cancel(t.reason))
    child.cancellation = token
    child.steering = SteeringHandle(steering.policy)
    run_id = str(child.run_id)
    steering._adopt(run_id, SubAgentHandle(run_id, name, child.steering, token))

    def release() -> None:
        steering._disown(run_id)
        unlink()

    return release


def find_child(handles: list[SubAgentHandle], run_id: str) -> SubAgentHandle:
    """The running sub-agent ``run_id`` among ``handles`` and their descendants.

    Raises:
        SteeringError: No such sub-agent is running (it never existed, or it already ended).
    """
    pending = list(handles)
    while pending:
        handle = pending.pop()
        if handle.run_id == run_id:
            return handle
        pending.extend(handle.children())
    raise SteeringError(f"no running sub-agent {run_id!r} under this run", hint="list them with .children()")


def _nothing() -> None:
    return None
