"""Steering: typed runtime control of a run that is already going.

A human (a notebook button, another cell), a parent agent or a test holds a ``SteeringHandle`` and
``send``s commands from any thread; the loop drains them at its safe checkpoint, before each model
call. Commands are serializable values so steering can be logged and replayed. A run allows nothing
by default: its handle's ``SteeringPolicy`` must name the command kinds it accepts.

A bad command never ends the run: a kind the policy does not permit, or an injected message that
would break the transcript (a tool result answering no call, a tool call left unanswered; a provider
answers either with a 400), is rejected on its own. The sender learns it from the
``SteeringReceipt`` that ``send`` returns (``status="rejected"``, ``error`` a ``SteeringError``),
observers from a ``steering.applied`` event with ``accepted=False``, and the run goes on with the
commands that were valid.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from ._errors import ConfigurationError, SteeringError
from ._json import freeze_json_object
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage

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

    def __post_init__(self) -> None:
        if not isinstance(self.message, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
            raise ConfigurationError(f"InjectMessage.message must be a Message, got {type(self.message).__name__}")


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


ReceiptStatus = Literal["queued", "applied", "rejected"]


class SteeringReceipt:
    """What became of one sent command; resolved by the run at its next checkpoint (thread-safe).

    Attributes:
        command: The command sent.
        status: ``queued`` until the run's checkpoint, then ``applied`` or ``rejected``. A run that
            ends before its next checkpoint leaves it ``queued``.
        error: Why it was rejected (a ``SteeringError``), else ``None``.
    """

    __slots__ = ("_done", "command", "error", "status")

    def __init__(self, command: SteeringCommand) -> None:
        self.command = command
        self.status: ReceiptStatus = "queued"
        self.error: SteeringError | None = None
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def accepted(self) -> bool | None:
        """``True`` once applied, ``False`` once rejected, ``None`` while queued."""
        return None if self.status == "queued" else self.status == "applied"

    def wait(self, timeout: float | None = None) -> bool:
        """Block (from a thread, not the run's event loop) until resolved; ``False`` on timeout."""
        return self._done.wait(timeout)

    def _resolve(self, error: SteeringError | None = None) -> None:
        self.error = error
        self.status = "applied" if error is None else "rejected"
        self._done.set()

    def __repr__(self) -> str:
        why = f", error={self.error.message!r}" if self.error is not None else ""
        return f"SteeringReceipt({self.command.command}, status={self.status!r}{why})"


Pending: TypeAlias = tuple[SteeringCommand, SteeringReceipt]


class SteeringOutcome(enum.StrEnum):
    """What the run did after applying a batch of commands at a checkpoint (``handle.outcome``)."""

    CONTINUE = "continue"
    PAUSE = "pause"
    CANCEL = "cancel"


class _State:
    __slots__ = ("children", "lock", "outcome", "pause_reason", "paused", "queue", "waiters")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: deque[Pending] = deque()
        self.paused = False
        self.pause_reason: str | None = None
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.outcome: SteeringOutcome | None = None
        self.children: dict[str, Any] = {}  # run id -> SubAgentHandle of a running, steerable sub-agent


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

    def send(self, command: SteeringCommand) -> SteeringReceipt:
        """Queue a command; safe from any thread. It takes effect at the run's next checkpoint.

        Returns:
            A receipt the run resolves at that checkpoint: applied, or rejected with the reason
            (the run's policy does not permit the kind, or an injected message would break the
            transcript). A rejection never ends the run.

        Raises:
            ConfigurationError: ``command`` is not a steering command at all.
        """
        if not isinstance(command, Pause | Resume | Cancel | InjectMessage | Redirect | SetMetadata):
            raise ConfigurationError(f"not a steering command: {command!r}")
        receipt = SteeringReceipt(command)
        state = self._state
        with state.lock:
            state.queue.append((command, receipt))
            waiters, state.waiters = state.waiters, []
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:  # loop closed
                continue
        return receipt

    def send_all(self, commands: Iterable[SteeringCommand]) -> list[SteeringReceipt]:
        return [self.send(command) for command in commands]

    def drain(self) -> list[SteeringCommand]:
        """Take every pending command, oldest first (their receipts stay ``queued``)."""
        return [command for command, _ in self._take()]

    def _take(self) -> list[Pending]:
        state = self._state
        with state.lock:
            batch = list(state.queue)
            state.queue.clear()
        return batch

    @property
    def pending(self) -> int:
        return len(self._state.queue)

    @property
    def outcome(self) -> SteeringOutcome | None:
        """The outcome of the last batch the run applied (``None`` before its first)."""
        return self._state.outcome

    def _adopt(self, run_id: str, child: Any) -> None:
        with self._state.lock:
            self._state.children[run_id] = child

    def _disown(self, run_id: str) -> None:
        with self._state.lock:
            self._state.children.pop(run_id, None)

    def _children(self) -> list[Any]:
        with self._state.lock:
            return list(self._state.children.values())

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
