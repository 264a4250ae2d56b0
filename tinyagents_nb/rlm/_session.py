"""``RLMSession``: RLM runs that build on each other, one REPL namespace and one transcript across them.

A follow-up task often needs what the last one computed (``df`` was cleaned, ``hits`` were found):
the session's REPL is its own environment that is not reset between runs, and each run continues
the session's transcript (its system prompt, the earlier tasks, code, outputs and answers), with
the new task as the next user message. ``%%agent --rlm --thread NAME`` keeps one per thread.

Only completed runs extend the transcript (a failed or stopped run's turns are dropped, its REPL
changes stay). Runs of one session go one at a time.
"""

from __future__ import annotations

from typing import Any, Literal

from tinyagents_nb.harness import AgentRun, Message, Middleware, RunContext

from ._config import RLMError
from ._environment import Environment
from ._kernel import KernelEnvironment
from ._local import LocalEnvironment

__all__ = ["RLMSession"]


class RLMSession:
    """A REPL namespace and a transcript kept across RLM runs (pass it as ``RLM.invoke(..., session=)``).

    Args:
        environment: ``"kernel"`` (default: a child kernel of the session's own) or ``"local"``;
            the session owns it (``close()`` stops it).
    """

    def __init__(self, environment: Literal["kernel", "local"] = "kernel") -> None:
        if environment == "kernel":
            env: KernelEnvironment | LocalEnvironment = KernelEnvironment()
        elif environment == "local":
            env = LocalEnvironment()
        else:
            raise RLMError(f"an RLM session's environment must be 'kernel' or 'local', got {environment!r}")
        env.keep_namespace = True
        self.environment: Environment = env
        self.messages: list[Message] = []
        """The transcript so far (empty before the first completed run)."""
        self.runs = 0
        """Completed runs."""
        self.busy = False

    def begin(self) -> None:
        """Claim the session for one run (runs of a session go one at a time)."""
        if self.busy:
            raise RLMError("this RLM session is running a task", hint="wait for it to end, or use another session")
        self.busy = True

    def middleware(self) -> Middleware:
        return _Keep(self)

    def close(self) -> None:
        """Stop the session's REPL (its variables are lost)."""
        self.environment.close()

    def __repr__(self) -> str:
        return f"RLMSession(environment={self.environment.name!r}, runs={self.runs})"


class _Keep(Middleware):
    """Keeps a completed run's transcript in the session and frees the session when the run ends."""

    def __init__(self, session: RLMSession) -> None:
        self.session = session

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        if run.status == "completed":
            self.session.messages = list(run.messages)
            self.session.runs += 1
        self.session.busy = False

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self.session.busy = False
