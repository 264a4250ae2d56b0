"""``DurableJournal``: the middleware that journals each completed step of a root run to a ``RunStore``.

It only writes at step boundaries (the input, each model answer, each tool start and result), one
small committed SQLite row each, so its overhead is a few inserts per turn, not per token.
A sub-agent's run is journaled in its root run's steps (kinds ``sub.*``, each naming the child, its
parent and the parent's tool call), so a resume continues a child that was cut off inside its parent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._controls import SkipTool
from .._errors import Cancelled
from .._messages import Message, ToolCall, UserMessage, dump_messages
from .._middleware import Middleware
from .._model import ModelResponse
from .._tool_progress import current_reporter
from .._usage import Usage
from ._run_store import RunStatus, RunStore, usage_dict

if TYPE_CHECKING:
    from .._context import RunContext
    from .._run import AgentRun
    from .._tools import ToolResult

__all__ = ["DurableJournal"]


def _prompt(messages: list[Message]) -> str:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


class DurableJournal(Middleware):
    """Journal every root run's completed steps so ``AgentHarness.resume`` can continue it after a crash.

    Args:
        store: A ``RunStore`` or the path of its SQLite file.
        agent: The agent's label in ``%agent runs``.
        model: The model name to resume with (a notebook resolves it again after a restart).
        meta: What kind of run this is, for whoever resumes it (an RLM run says ``{"kind": "rlm", ...}``);
            journaled with each root run, read back as ``ResumePlan.meta``.
    """

    def __init__(
        self,
        store: RunStore | str | os.PathLike[str],
        *,
        agent: str | None = None,
        model: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store if isinstance(store, RunStore) else RunStore(store)
        self.agent = agent
        self.model = model
        self.meta = dict(meta or {})
        self._resuming: dict[str, tuple[str, int, list[tuple[Usage, str, str | None]]]] = {}
        self._begun: set[str] = set()

    def resuming(
        self, run_id: str, original: str, from_step: int, spent: Sequence[tuple[Usage, str, str | None]] = ()
    ) -> None:
        """Announce that ``run_id`` continues ``original`` from its step ``from_step`` (set by resume).

        ``spent`` is what the original (and any run it continued) already spent: journaled with the new
        run, so resuming it in turn still counts that spend against its budgets.
        """
        self._resuming[run_id] = (original, from_step, list(spent))

    def begin(self, run_id: str, messages: list[Message]) -> None:
        """Start journaling a resumed run before its open calls are settled, so settling is journaled too."""
        self._start(run_id, messages)
        self._begun.add(run_id)

    def settled(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        """Journal one step of settling a resumed run's open calls (``tool.started``/``tool.done``)."""
        self.store.add_step(run_id, kind, data)

    def _sub(self, ctx: RunContext[Any], kind: str, data: dict[str, Any]) -> None:
        data["run"] = str(ctx.run_id)
        self.store.add_step(str(ctx.root_run_id), "sub." + kind, data)

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        if ctx.depth:
            name = ctx.metadata.get("subagent")
            call = current_reporter().call_id
            data = {"parent": str(ctx.parent_run_id), "call": call, "name": name, "messages": dump_messages(messages)}
            self._sub(ctx, "input", data)
            return
        ctx.journal = self
        if ctx.run_id in self._begun:  # resumed: started before settling; the full input now (with the note)
            self._begun.discard(ctx.run_id)
            self.store.add_step(ctx.run_id, "input", {"messages": dump_messages(messages)})
            return
        self._start(ctx.run_id, messages)

    def _start(self, run_id: str, messages: list[Message]) -> None:
        original, from_step, spent = self._resuming.pop(run_id, (None, None, []))
        earlier = self.store.get(original) if original is not None else None
        self.store.start_run(
            run_id,
            agent=self.agent,
            model=self.model,
            prompt=earlier.prompt if earlier is not None else _prompt(messages),  # not a resume's note
            resumed_from=original,
            from_step=from_step,
        )
        if self.meta:
            self.store.add_step(run_id, "meta", self.meta)
        if spent:
            carried = [{"usage": usage_dict(u), "model": m, "provider": p} for u, m, p in spent]
            self.store.add_step(run_id, "carried", {"spent": carried})
        self.store.add_step(run_id, "input", {"messages": dump_messages(messages)})
        if original is not None:  # only now: a kill before this point leaves the original resumable
            self.store.mark_resumed(original, run_id)

    def _step(self, ctx: RunContext[Any], kind: str, data: dict[str, Any]) -> None:
        if ctx.depth:
            self._sub(ctx, kind, data)
        else:
            self.store.add_step(ctx.run_id, kind, data)

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        data = {
            "message": dump_messages([response.message])[0],
            "usage": usage_dict(response.usage),
            "model": response.model,
            "provider": response.provider,
            "cached": response.resolved is not None and response.resolved.source == "cache",
        }
        self._step(ctx, "model", data)
        return response

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall | SkipTool:
        self._step(ctx, "tool.started", {"id": call.id, "name": call.name})
        return call

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        self._step(ctx, "tool.done", {"message": dump_messages([result.to_message(call)])[0]})
        return result

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        if ctx.depth:
            self._sub(ctx, "end", {"status": run.status, "text": run.final_text})
        else:
            self.store.end_run(ctx.run_id, "completed")

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        status: RunStatus = "cancelled" if isinstance(error, Cancelled) else "failed"
        if ctx.depth:
            self._sub(ctx, "end", {"status": status, "text": ""})
        else:
            self.store.end_run(ctx.run_id, status)
