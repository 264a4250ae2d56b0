"""Steering: typed runtime control of a run that is already going.

A human (a notebook button, another cell), a parent agent or a test holds a ``SteeringHandle`` and
``send``s commands from any thread; the loop drains them at its safe checkpoint, before each model
call. Commands are serializable values so steering can be logged and replayed. A run allows nothing
by default: its handle's ``SteeringPolicy`` must name the command kinds it accepts, and a batch with
a disallowed command applies nothing and fails the run with ``SteeringError``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from ._errors import Cancelled, ConfigurationError, SteeringError
from ._events import SteeringApplied
from ._json import freeze_json_object
from ._messages import Message, SystemMessage

if TYPE_CHECKING:
    from ._context import RunContext

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
    "SteeringPolicy",
    "steering_from_dict",
    "steering_to_dict",
]

SteeringKind = Literal["pause", "resume", "cancel", "inject_message", "redirect", "set_metadata"]
ALL_KINDS: frozenset[str] = frozenset(SteeringKind.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True, slots=True)
class Pause:
    """Hold the run at its next checkpoint until ``Resume`` (or a cancel) arrives."""

    reason: str | None = None
    command: Literal["pause"] = "pause"


@dataclass(frozen=True, kw_only=True, slots=True)
class Resume:
    """Release a paused run."""

    command: Literal["resume"] = "resume"


@dataclass(frozen=True, kw_only=True, slots=True)
class Cancel:
    """Cancel the run (and, through the shared token, its sub-agents)."""

    reason: str | None = None
    command: Literal["cancel"] = "cancel"


@dataclass(frozen=True, kw_only=True, slots=True)
class InjectMessage:
    """Append a message to the transcript; the very next model request contains it."""

    message: Message
    command: Literal["inject_message"] = "inject_message"


@dataclass(frozen=True, kw_only=True, slots=True)
class Redirect:
    """Change course: appended as a system instruction ``[steering:redirect] ...``."""

    instruction: str
    command: Literal["redirect"] = "redirect"


@dataclass(frozen=True, kw_only=True, slots=True)
class SetMetadata:
    """Merge keys into the run's metadata (the run gets a new frozen config; nothing is mutated)."""

    metadata: Mapping[str, Any] = field(default_factory=dict)
    command: Literal["set_metadata"] = "set_metadata"

    def __post_init__(self) -> None:
        freeze_json_object(self.metadata, what="SetMetadata.metadata")


SteeringCommand: TypeAlias = Annotated[
    Pause | Resume | Cancel | InjectMessage | Redirect | SetMetadata, Field(discriminator="command")
]


@cache
def _adapter() -> TypeAdapter[SteeringCommand]:
    return TypeAdapter(SteeringCommand)


def steering_to_dict(command: SteeringCommand) -> dict[str, Any]:
    """A JSON-able dict of a command (the inverse of ``steering_from_dict``)."""
    dumped: dict[str, Any] = _adapter().dump_python(command, mode="json")
    return dumped


def steering_from_dict(data: Mapping[str, Any]) -> SteeringCommand:
    """Rebuild a command from its dict; raises ``pydantic.ValidationError`` on bad input."""
    return _adapter().validate_python(dict(data))


@dataclass(frozen=True, slots=True)
class SteeringPolicy:
    """Which command kinds a run accepts. ``SteeringPolicy()`` accepts nothing."""

    allowed: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.allowed) - ALL_KINDS
        if unknown:
            raise ConfigurationError(f"unknown steering kind(s): {sorted(unknown)}; known: {sorted(ALL_KINDS)}")

    def allow(self, *kinds: str) -> SteeringPolicy:
        return SteeringPolicy(self.allowed | frozenset(kinds))

    @classmethod
    def allow_all(cls) -> SteeringPolicy:
        return cls(ALL_KINDS)

    def permits(self, kind: str) -> bool:
        return kind in self.allowed


class _State:
    __slots__ = ("lock", "pause_reason", "paused", "queue", "waiters")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: deque[SteeringCommand] = deque()
        self.paused = False
        self.pause_reason: str | None = None
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []


class SteeringHandle:
    """A thread-safe queue of steering commands for one run; ``clone()``s share it.

    Args:
        policy: The command kinds the run accepts (nothing by default).
    """

    __slots__ = ("_state", "policy")

    def __init__(self, policy: SteeringPolicy | None = None, *, _state: _State | None = None) -> None:
        self.policy = policy if policy is not None else SteeringPolicy()
        self._state = _state if _state is not None else _State()

    def clone(self) -> SteeringHandle:
        """Another handle on the same queue (e.g. one for a widget, one for a parent agent)."""
        return SteeringHandle(self.policy, _state=self._state)

    def send(self, command: SteeringCommand) -> None:
        """Queue a command; safe from any thread. It takes effect at the run's next checkpoint."""
        if not isinstance(command, Pause | Resume | Cancel | InjectMessage | Redirect | SetMetadata):
            raise ConfigurationError(f"not a steering command: {command!r}")
        state = self._state
        with state.lock:
            state.queue.append(command)
            waiters, state.waiters = state.waiters, []
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:  # loop closed
                continue

    def send_all(self, commands: Iterable[SteeringCommand]) -> None:
        for command in commands:
            self.send(command)

    def drain(self) -> list[SteeringCommand]:
        """Take every pending command, oldest first."""
        state = self._state
        with state.lock:
            batch = list(state.queue)
            state.queue.clear()
        return batch

    @property
    def pending(self) -> int:
        return len(self._state.queue)

    @property
    def is_paused(self) -> bool:
        return self._state.paused

    @property
    def pause_reason(self) -> str | None:
        return self._state.pause_reason

    def _latch_pause(self, reason: str | None) -> None:
        state = self._state
        if not state.paused:
            state.paused = True
            state.pause_reason = reason

    def _release(self) -> None:
        self._state.paused = False
        self._state.pause_reason = None

    async def wait_for_command(self) -> None:
        """Wait until a command is queued (returns at once if one is pending)."""
        state = self._state
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (loop, fut)
        with state.lock:
            if state.queue:
                return
            state.waiters.append(entry)
        try:
            await fut
        finally:
            with state.lock:
                if entry in state.waiters:
                    state.waiters.remove(entry)

    def __repr__(self) -> str:
        return f"SteeringHandle(pending={self.pending}, paused={self.is_paused}, allowed={sorted(self.policy.allowed)})"


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def apply_batch(
    ctx: RunContext[Any], handle: SteeringHandle, batch: list[SteeringCommand], messages: list[Message]
) -> None:
    """Apply a drained batch at a checkpoint: all or nothing, one ``steering.applied`` event per command.

    Raises:
        SteeringError: A command's kind is not permitted (nothing in the batch is applied).
        Cancelled: The batch contains ``Cancel`` (later commands are ignored).
    """
    refused = next((c for c in batch if not handle.policy.permits(c.command)), None)
    if refused is not None:
        ctx.emit(SteeringApplied, command=refused.command, accepted=False, detail="not permitted")
        raise SteeringError(
            f"steering command `{refused.command}` is not permitted by the run's steering policy",
            hint="create the SteeringHandle with SteeringPolicy().allow(...) or SteeringPolicy.allow_all()",
        )
    for command in batch:
        detail = ""
        if isinstance(command, Pause):
            handle._latch_pause(command.reason)
            detail = command.reason or ""
        elif isinstance(command, Resume):
            handle._release()
        elif isinstance(command, Cancel):
            ctx.emit(SteeringApplied, command=command.command, accepted=True, detail=command.reason or "")
            ctx.cancellation.cancel(command.reason or "cancelled by steering")
            raise Cancelled(ctx.cancellation.reason)
        elif isinstance(command, InjectMessage):
            messages.append(command.message)
            detail = command.message.text[:200]
        elif isinstance(command, Redirect):
            messages.append(SystemMessage(text=f"[steering:redirect] {command.instruction}"))
            detail = command.instruction[:200]
        else:
            ctx.config = replace(ctx.config, metadata={**ctx.config.metadata, **command.metadata})
            detail = ", ".join(sorted(command.metadata))
        ctx.emit(SteeringApplied, command=command.command, accepted=True, detail=detail)
