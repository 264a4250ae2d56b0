"""Sub-agents: a whole agent run as a function call, one level deeper in the recursion tree.

A child runs through ``RunContext.child``: same root, parent = the caller, same event sink,
cancellation token, stores, usage and cost trackers, so the parent's stream shows the child's events,
one cancel stops the whole tree, and the child's usage rolls up into every ancestor's subtree totals.
``SubAgentTool`` lets a model delegate to a sub-agent like any tool; a child that hits a limit
becomes an error result the parent model can react to, not a crashed parent.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._cancel import RunCancelled
from ._child_steering import make_steerable
from ._config import RunConfig
from ._context import RunContext
from ._errors import ConfigurationError, LimitExceeded, RunTimeout, SubAgentDepthError
from ._events import AgentEvent, SubAgentCompleted, SubAgentReused, SubAgentStarted
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ._middleware import Middleware, MiddlewareStack
from ._model import ToolSchema
from ._run import AgentRun
from ._tool_progress import current_reporter
from ._tools import ToolResult

if TYPE_CHECKING:
    from ._harness import AgentHarness, AgentInput

__all__ = ["SUBAGENT_INPUT_FIELD", "SubAgent", "SubAgentSession", "SubAgentTool"]

SUBAGENT_INPUT_FIELD = "input"
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class SubAgent:
    """A named agent that other agents (or code) can call.

    Args:
        name: A tool-safe name (letters, digits, ``_``, ``-``).
        harness: The harness that runs the child loop.
        description: What the sub-agent is for; the parent model reads it when it is a tool.
        system_prompt: Prepended to every child run (in addition to the harness's own).
    """

    def __init__(
        self, name: str, harness: AgentHarness[Any], *, description: str = "", system_prompt: str | None = None
    ) -> None:
        if not _TOOL_NAME.match(name):
            raise ConfigurationError(f"sub-agent name {name!r} must match {_TOOL_NAME.pattern}")
        self.name = name
        self.harness = harness
        self.description = description or f"Delegate a task to the {name} agent."
        self.system_prompt = system_prompt
        self._journaled: tuple[Middleware, AgentHarness[Any]] | None = None

    def _harness_in(self, parent: RunContext[Any]) -> AgentHarness[Any]:
        """The harness to run a child with: the root's durable journal added, so a resume finds the child's steps."""
        journal = parent.journal
        own = self.harness.middleware.middleware
        if not isinstance(journal, Middleware) or any(type(m) is type(journal) for m in own):
            return self.harness  # not journaled, or its own journal of that kind journals it already
        if self._journaled is None or self._journaled[0] is not journal:
            harness = copy.copy(self.harness)
            harness.middleware = MiddlewareStack([*self.harness.middleware.middleware, journal])
            self._journaled = (journal, harness)
        return self._journaled[1]

    def _input(self, input: AgentInput) -> list[Message]:
        if isinstance(input, str):
            messages: list[Message] = [UserMessage(text=input)]
        elif isinstance(input, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
            messages = [input]
        else:
            messages = list(input)
        # the sub-agent's prompt comes after the harness's own (both kept, each once)
        prompts = [p for p in (self.harness.system_prompt, self.system_prompt) if p]
        leading = [m.text for m in messages[: len(prompts)] if isinstance(m, SystemMessage)]
        if prompts and leading != prompts:
            messages[:0] = [SystemMessage(text=p) for p in prompts]
        return messages

    async def invoke(self, input: AgentInput, *, config: RunConfig | None = None, data: Any = None) -> AgentRun:
        """Run the sub-agent on its own, as a root run (its own sink, token and trackers)."""
        return await self.harness.invoke(self._input(input), config=config, data=data)

    async def invoke_with_events(
        self, input: AgentInput, *, config: RunConfig | None = None, data: Any = None
    ) -> tuple[AgentRun, list[AgentEvent]]:
        """Run on its own, as a root run, and return the run with its events; never raises a run error."""
        return await self.harness.invoke_with_events(self._input(input), config=config, data=data)

    async def invoke_in_parent(self, parent: RunContext[Any], input: AgentInput) -> AgentRun:
        """Run as a child of ``parent`` at ``parent.depth + 1``; raises the child's error.

        The depth check happens before anything is emitted or any model is called.
        """
        cap = min(parent.config.max_depth, self.harness.policy.limits.max_depth)
        if parent.depth + 1 > cap:
            raise SubAgentDepthError(cap)
        child = parent.child(tags=(f"subagent:{self.name}",), metadata={"subagent": self.name})
        release = make_steerable(parent, child, self.name)  # a steerable parent can steer its children
        parent.emit(SubAgentStarted, name=self.name, child_run_id=child.run_id, call_id=current_reporter().call_id)
        try:
            run, _ = await self._harness_in(parent).invoke_with_status(
                child, self._input(input), streaming=parent.streaming
            )
        except BaseException as exc:
            release()
            # the child never returned (a tool timeout or a task cancel cut it off, or its input was
            # bad): still close its node, so the run tree never dangles
            status = "failed" if isinstance(exc, Exception) else "cancelled"
            usage = parent.usage.for_subtree(child.run_id)
            parent.emit(SubAgentCompleted, name=self.name, child_run_id=child.run_id, status=status, usage=usage)
            raise
        release()
        parent.emit(SubAgentCompleted, name=self.name, child_run_id=child.run_id, status=run.status, usage=run.usage)
        if run.error is not None:
            raise run.error
        return run

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> SubAgentTool:
        """This sub-agent as a tool whose model-visible input field is ``input``."""
        return SubAgentTool(self, name=name, description=description)

    def __repr__(self) -> str:
        return f"SubAgent({self.name!r}, model={self.harness.model.model_name!r})"


class SubAgentTool:
    """A ``Tool`` that runs a sub-agent as a child of the calling run."""

    def __init__(self, subagent: SubAgent, *, name: str | None = None, description: str | None = None) -> None:
        self.subagent = subagent
        tool_name = name or subagent.name
        if not _TOOL_NAME.match(tool_name):
            raise ConfigurationError(f"tool name {tool_name!r} must match {_TOOL_NAME.pattern}")
        self._schema = ToolSchema(
            name=tool_name,
            description=description or subagent.description,
            parameters={
                "type": "object",
                "properties": {
                    SUBAGENT_INPUT_FIELD: {"type": "string", "description": "The task for the sub-agent, in full."}
                },
                "required": [SUBAGENT_INPUT_FIELD],
                "additionalProperties": False,
            },
        )

    @property
    def name(self) -> str:
        return self._schema.name

    @property
    def description(self) -> str:
        return self._schema.description

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    @property
    def timeout_s(self) -> float | None:
        return None

    async def call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> ToolResult:
        task = arguments.get(SUBAGENT_INPUT_FIELD)
        if not isinstance(task, str) or not task.strip():
            return ToolResult.error(f"`{self.name}` needs a non-empty string `{SUBAGENT_INPUT_FIELD}` argument")
        try:
            run = await self.subagent.invoke_in_parent(ctx, task)
        except (LimitExceeded, SubAgentDepthError) as exc:
            return ToolResult.error(_limit_message(self.name, exc))
        except RunCancelled as exc:
            if ctx.cancellation.is_cancelled:  # the parent was cancelled too: that ends the parent
                raise
            return ToolResult.error(f"sub-agent `{self.name}` was cancelled: {exc.reason or 'no reason given'}")
        return ToolResult.ok(run.final_text)

    def __repr__(self) -> str:
        return f"SubAgentTool({self.name!r})"


def _limit_message(name: str, exc: Exception) -> str:
    if isinstance(exc, RunTimeout):
        what = "its wall-clock deadline"
    elif isinstance(exc, SubAgentDepthError):
        what = "the recursion depth limit"
    else:
        what = "its configured run limit"
    return (
        f"sub-agent `{name}` stopped because it hit {what} ({exc}). This is a limit signal, not an answer: "
        "narrow the task, split it, or answer without this sub-agent."
    )


class SubAgentSession:
    """One sub-agent kept alive across turns, accumulating its transcript.

    Each ``send`` runs over the whole transcript so far plus the new input and keeps the child's
    final transcript; from the second turn on it emits ``subagent.reused``.
    """

    def __init__(self, subagent: SubAgent) -> None:
        self.subagent = subagent
        self._transcript: list[Message] = []
        self._turns = 0

    @property
    def turns(self) -> int:
        return self._turns

    @property
    def transcript(self) -> list[Message]:
        return list(self._transcript)

    async def send(self, input: str | Message, *, parent: RunContext[Any] | None = None) -> AgentRun:
        """Continue the conversation; runs as a child of ``parent`` when given."""
        new = UserMessage(text=input) if isinstance(input, str) else input
        messages = [*self._transcript, new]
        if parent is not None and self._turns:
            parent.emit(SubAgentReused, name=self.subagent.name, turn=self._turns)
        if parent is not None:
            run = await self.subagent.invoke_in_parent(parent, messages)
        else:
            run = await self.subagent.invoke(messages)
        self._transcript = list(run.messages)
        self._turns += 1
        return run

    def reset(self) -> None:
        self._transcript = []
        self._turns = 0
