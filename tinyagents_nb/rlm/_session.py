"""``RLMSession``: RLM runs that build on each other, one REPL namespace and one transcript across them.

A follow-up task often needs what the last one computed (``df`` was cleaned, ``hits`` were found):
the session's REPL is its own environment that is not reset between runs, and each run continues
the session's transcript (its system prompt, the earlier tasks, code, outputs and answers), with
the new task as the next user message. ``%%agent --rlm --thread NAME`` keeps one per thread.

Joined to a conversation thread (``history`` and ``thread_id``), the session shares it with the
chat runs of that thread, both ways: a completed run's task and answer are appended to the
thread's history (tagged ``rlm-thread``), so a later chat run sees them like any turn, and the
chat turns added since the session's last run (their text; tool calls are the chat run's own
business) come before the next task in the RLM's transcript.

Only completed runs extend the transcript (a failed or stopped run's turns are dropped, its REPL
changes stay). Runs of one session go one at a time. ``close()`` stops the REPL (a child kernel is
shut down); a session closed while a run is going closes when that run ends. With
``idle_timeout_s`` a session no run used for that long closes itself (a child kernel holds memory
and a process for as long as the session lives).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any, Literal

from tinyagents_nb.harness import (
    AgentRun,
    AssistantMessage,
    Message,
    Middleware,
    RunContext,
    SystemMessage,
    UserMessage,
)
from tinyagents_nb.harness.memory import SUMMARY_TAG

from ._config import RLMError
from ._environment import Environment
from ._kernel import KernelEnvironment
from ._local import LocalEnvironment

if TYPE_CHECKING:
    from tinyagents_nb.harness.memory import ChatHistory

__all__ = ["THREAD_TAG", "RLMSession"]

THREAD_TAG = "rlm-thread"
"""The tag of the task and answer an RLM session appends to its conversation thread."""


class RLMSession:
    """A REPL namespace and a transcript kept across RLM runs (pass it as ``RLM.invoke(..., session=)``).

    Args:
        environment: ``"kernel"`` (default: a child kernel of the session's own) or ``"local"``;
            the session owns it (``close()`` stops it).
        history: The chat history of the thread to join (with ``thread_id``); ``None``: the
            session keeps its transcript to itself.
        thread_id: The conversation thread the session joins.
        idle_timeout_s: Close the session (stop its REPL) when no run has used it for this long
            after its last run ended; ``None``: it lives until ``close()``.
    """

    def __init__(
        self,
        environment: Literal["kernel", "local"] = "kernel",
        *,
        history: ChatHistory | None = None,
        thread_id: str | None = None,
        idle_timeout_s: float | None = None,
    ) -> None:
        if environment == "kernel":
            env: KernelEnvironment | LocalEnvironment = KernelEnvironment()
        elif environment == "local":
            env = LocalEnvironment()
        else:
            raise RLMError(f"an RLM session's environment must be 'kernel' or 'local', got {environment!r}")
        if (history is None) != (thread_id is None):
            raise RLMError("an RLM session joins a thread with both history= and thread_id=")
        idle: object = idle_timeout_s  # checked as any value: a notebook may pass anything
        if idle is not None and (
            isinstance(idle, bool) or not isinstance(idle, int | float) or not math.isfinite(idle) or idle <= 0
        ):
            raise RLMError(f"idle_timeout_s must be a number of seconds > 0 or None, got {idle_timeout_s!r}")
        self.idle_timeout_s = idle_timeout_s
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._why_closed = "closed"
        env.keep_namespace = True
        self.environment: Environment = env
        self.history = history
        self.thread_id = thread_id
        self.messages: list[Message] = []
        """The transcript so far (empty before the first completed run)."""
        self.runs = 0
        """Completed runs."""
        self.busy = False
        self.closed = False
        self._closing = False
        self._task = ""

    def begin(self, task: str = "") -> None:
        """Claim the session for one run (runs of a session go one at a time)."""
        with self._lock:
            self._cancel_timer()
            self.ensure_open()
            if self.busy:
                raise RLMError("this RLM session is running a task", hint="wait for it to end, or use another session")
            self.busy = True
            self._task = task

    def ensure_open(self) -> None:
        """Raise ``RLMError`` (saying why) when the session was closed or is closing."""
        if self.closed or self._closing:
            raise RLMError(
                f"this RLM session was {self._why_closed}", hint="start a new session (its variables are gone)"
            )

    def thread_turns(self) -> list[Message]:
        """The thread's chat turns since this session's last answer, as plain text turns (empty when not joined)."""
        if self.history is None or self.thread_id is None:
            return []
        stored = self.history.load(self.thread_id)
        last = max((i for i, m in enumerate(stored) if THREAD_TAG in m.tags), default=-1)
        turns: list[Message] = []
        for message in stored[last + 1 :]:
            if isinstance(message, UserMessage) and message.text.strip():
                turns.append(UserMessage(text=message.text, tags=("thread",)))
            elif isinstance(message, AssistantMessage) and message.text.strip():
                turns.append(AssistantMessage(text=message.text, tags=("thread",)))
            elif isinstance(message, SystemMessage) and SUMMARY_TAG in message.tags:
                turns.append(UserMessage(text=f"[earlier in this conversation, summarised]\n{message.text}"))
        return turns

    def middleware(self) -> Middleware:
        return _Keep(self)

    def close(self) -> None:
        """Stop the session's REPL (its variables are lost); during a run, when the run ends."""
        with self._lock:
            self._cancel_timer()
            if self.busy:
                self._closing = True
                return
            if self.closed:
                return
            self.closed = True
        self._shut()

    def _shut(self) -> None:
        self.closed = True
        self._closing = False
        self.environment.close()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _idle(self, timer: threading.Timer) -> None:
        with self._lock:
            if timer is not self._timer or self.busy or self.closed:
                return  # a run began (or the session closed) since this timer was set
            self._timer = None
            self.closed = True
            self._why_closed = f"closed after {self.idle_timeout_s:g} s without a run (idle_timeout_s)"
        self._shut()

    def _ended(self) -> None:
        with self._lock:
            self.busy = False
            closing = self._closing
            if not closing and self.idle_timeout_s is not None and not self.closed:
                timer = threading.Timer(self.idle_timeout_s, lambda: self._idle(timer))
                timer.daemon = True
                self._timer = timer
                timer.start()
        if closing:
            self._shut()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "running" if self.busy else "idle"
        thread = f", thread_id={self.thread_id!r}" if self.thread_id is not None else ""
        return f"RLMSession(environment={self.environment.name!r}, runs={self.runs}, {state}{thread})"


class _Keep(Middleware):
    """Keeps a completed run's transcript in the session (and its answer in the thread); frees the session."""

    def __init__(self, session: RLMSession) -> None:
        self.session = session

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        session = self.session
        try:
            if run.status == "completed":
                session.messages = list(run.messages)
                session.runs += 1
                if session.history is not None and session.thread_id is not None:
                    session.history.append(
                        session.thread_id,
                        [
                            UserMessage(text=session._task, tags=(THREAD_TAG,)),
                            AssistantMessage(text=run.final_text, tags=(THREAD_TAG,)),
                        ],
                    )
        finally:
            session._ended()

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self.session._ended()
