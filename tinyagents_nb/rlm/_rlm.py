"""``RLM``: run a task as a recursive language model over values held in a REPL.

Each run is an ordinary harness run (``AgentHarness`` around the ``REPLDialect`` of the root
model, with the ``repl`` tool and the RLM middleware), so it has the run's usual identity, events,
limits, Stop, streaming and dashboard; its sub-queries are child runs of it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from tinyagents_nb.harness import (
    AgentHarness,
    AgentRun,
    AgentStream,
    ChatModel,
    ConfigurationError,
    Message,
    Middleware,
    RunConfig,
    RunContext,
    RunPolicy,
    SubAgent,
    SystemMessage,
    UserMessage,
    resolve_model,
)
from tinyagents_nb.harness.durable import ResumePlan, RunStore, plan_resume, resume_run

from ._config import RLMLimits
from ._dialect import CodeApproval, REPLDialect, REPLTool, RLMMiddleware, RLMRunState
from ._environment import Environment
from ._kernel import KernelEnvironment
from ._local import LocalEnvironment
from ._partial import PartialAnswerMiddleware
from ._prompt import first_message, follow_up_message, system_prompt
from ._recursion import CHILD_AGENT, ClosePool, EnvironmentPool, RecursionMiddleware, child_factory
from ._resume import repl_calls, resume_note
from ._session import RLMSession
from ._trajectory import Trajectory, TrajectoryError
from ._trajectory_build import TrajectoryRecorder
from ._typed import AnswerType

__all__ = ["RLM", "EnvironmentName"]

EnvironmentName = Literal["kernel", "local"]


def make_environment(environment: EnvironmentName | Environment) -> Environment:
    """``"kernel"`` (a child ipykernel), ``"local"`` (in-process), or an ``Environment`` of your own."""
    if environment == "kernel":
        return KernelEnvironment()
    if environment == "local":
        return LocalEnvironment()
    if isinstance(environment, Environment):
        return environment
    raise ConfigurationError(f"environment must be 'kernel', 'local' or an Environment, got {environment!r}")


class RLM:
    """A recursive-language-model runner: the model works in a REPL where the context is a variable.

    Args:
        model: The root model (a ``ChatModel`` or a model string).
        sub_model: The model behind ``llm``/``llm_batch`` (default: the root model).
        environment: ``"kernel"`` (default: a sandboxed child kernel, values copied in),
            ``"local"`` (trusted: this process, values by reference) or an ``Environment``.
        limits: Iterations, per-block timeout, output size, sub-queries, concurrency, errors.
        policy: The harness policy of the root run (its model-call cap is raised to fit the
            iterations; time limits, retry and the rest apply as given) and of each sub-query.
        instructions: Extra system instructions after the protocol's.
        middleware: Extra middleware for the root run.
        approve_code: Called before each block runs; ``False`` skips it (a hook for approvals).
        name: The run's agent name (dashboards show it).
        child_environment: Makes the REPL of an ``rlm_query`` child (default: one like
            ``environment``, pooled and reused; required for ``rlm_query`` with an ``Environment``
            of your own).
        output_type: The type the root run's answer must validate against (a pydantic model, or
            any type pydantic validates, or a ``DataFrameSchema`` / a mapping of column names to
            dtypes for a DataFrame answer); one failed validation is sent back to the model, a second
            ends the run with ``StructuredOutputError``. The value is ``run.structured.value``.
        keep_children: Keep the children's REPLs (child kernels) for the next run (``close()``
            stops them); ``False`` stops them when each root run ends.
        keep_trajectories: How many of the latest root runs keep their events for
            ``trajectory(run)`` (``0``: none).
        system_prompt: Replaces the protocol's system prompt (``RLM_SYSTEM_PROMPT``) as is, for
            every run of the tree: e.g. a prompt written for the official implementation, whose
            names (``context``, ``llm_query``, ``rlm_query``, ``SHOW_VARS``, ``answer``) the REPL has.
            ``instructions`` and a typed answer's schema are still added after it.
    """

    def __init__(
        self,
        *,
        model: ChatModel | str,
        sub_model: ChatModel | str | None = None,
        environment: EnvironmentName | Environment = "kernel",
        limits: RLMLimits | None = None,
        policy: RunPolicy | None = None,
        instructions: str | None = None,
        middleware: Sequence[Middleware] = (),
        approve_code: CodeApproval | None = None,
        name: str = "rlm",
        child_environment: Callable[[], Environment] | None = None,
        output_type: Any = None,
        keep_children: bool = True,
        keep_trajectories: int = 8,
        system_prompt: str | None = None,
    ) -> None:
        self.model = resolve_model(model)
        self.sub_model = resolve_model(sub_model) if sub_model is not None else self.model
        self.environment = make_environment(environment)
        self.limits = limits if limits is not None else RLMLimits()
        self.policy = policy if policy is not None else RunPolicy()
        self.instructions = instructions
        self.middleware = tuple(middleware)
        self.approve_code = approve_code
        self.name = name
        # a sub-query has no tools: no tool-result limit (its middleware and reader provider cost every call)
        sub_policy = dataclasses.replace(self.policy, tool_result_limit=None)
        self.sub_harness: AgentHarness[Any] = AgentHarness(model=self.sub_model, policy=sub_policy, name="llm")
        factory = child_environment if child_environment is not None else child_factory(self.environment)
        self.children = EnvironmentPool(factory) if factory is not None else None
        self.output_type = output_type
        self.keep_children = keep_children
        self.keep_trajectories = max(0, keep_trajectories)
        if system_prompt is not None and not system_prompt.strip():
            raise ConfigurationError("system_prompt is empty", hint="leave it None for the protocol's own")
        self.system_prompt = system_prompt
        self._recorders: dict[str, TrajectoryRecorder] = {}
        if output_type is not None:
            try:
                AnswerType(output_type)
            except Exception as exc:
                raise ConfigurationError(f"output_type {output_type!r} cannot be validated: {exc}") from None

    # ------------------------------------------------------------------ one run
    def prepare(
        self, task: str, context: Mapping[str, Any] | None = None, *, session: RLMSession | None = None
    ) -> tuple[AgentHarness[Any], list[Message]]:
        """The harness and the opening messages of one run (checks the values first).

        With a ``session``, the run works in the session's REPL (not reset) and continues its transcript.

        Raises:
            ConfigurationError: An empty task.
            ContextValueError: A value cannot be given to the environment (named in the message).
            RLMError: The session is running another task, or was closed.
        """
        if session is None:
            return self._build(task, dict(context or {}), self.environment, depth=0)
        session.ensure_open()
        harness, messages = self._build(task, dict(context or {}), session.environment, depth=0, session=session)
        session.begin(task)
        return harness, messages

    def _build(
        self,
        task: str,
        values: dict[str, Any],
        environment: Environment,
        *,
        depth: int,
        session: RLMSession | None = None,
    ) -> tuple[AgentHarness[Any], list[Message]]:
        if not task.strip():
            raise ConfigurationError("the RLM task is empty", hint="say what to compute over the context values")
        if isinstance(environment, LocalEnvironment) and (self.limits.memory_mb or self.limits.cpu_seconds):
            raise ConfigurationError(
                "RLMLimits.memory_mb and cpu_seconds limit the child kernel; the in-process REPL cannot have them",
                hint="use environment='kernel', or leave them unset",
            )
        state = RLMRunState(
            environment=environment,
            prepared=environment.prepare_values(values),
            limits=self.limits,
            sub_harness=self.sub_harness,
            approve=self.approve_code,
            depth=depth,
            spawn=self._spawn if self.children is not None else None,
            typed=AnswerType(self.output_type) if self.output_type is not None and depth == 0 else None,
        )
        limits = self.limits
        calls = limits.max_iterations + limits.nudges + 2  # the RLM's own caps fire first
        run_limits = dataclasses.replace(
            self.policy.limits,
            max_model_calls=max(self.policy.limits.max_model_calls, calls),
            max_tool_calls=max(self.policy.limits.max_tool_calls, calls),
        )
        harness: AgentHarness[Any] = AgentHarness(
            model=REPLDialect(self.model, state),
            tools=[REPLTool(state)],
            middleware=[
                # first: its on_error runs last (the onion order), after rlm.partial was emitted
                *([_Record(self)] if depth == 0 and self.keep_trajectories else []),
                RLMMiddleware(state),
                RecursionMiddleware(state),
                PartialAnswerMiddleware(state),
                *([session.middleware()] if session is not None else []),
                *([ClosePool(self.children)] if depth == 0 and self.children and not self.keep_children else []),
                *self.middleware,
            ],
            # its one tool's output is bounded by the RLM's own ``max_output_chars`` (and while it streams)
            policy=dataclasses.replace(self.policy, limits=run_limits, tool_result_limit=None),
            name=self.name,
            # a session's transcript grows across runs: near the window it is compacted (the REPL
            # state never is); a run without a session keeps its protocol turns whole
            pressure="default" if session is not None else None,
        )
        turns = session.thread_turns() if session is not None else []  # the thread's chat turns since its last run
        if session is not None and session.messages:
            return harness, [*session.messages, *turns, UserMessage(text=follow_up_message(task, values))]
        taught = depth if state.spawn is not None else limits.max_depth  # rlm_query is taught where it works
        extra = f"\n{self.instructions.strip()}\n" if self.instructions else ""
        if state.typed is not None:
            extra += f"\n{state.typed.instructions()}\n"
        opening = first_message(task, values, environment=environment.name, limits=limits)
        own = self.system_prompt if self.system_prompt is not None else system_prompt(limits, depth=taught)
        system = SystemMessage(text=own + extra)
        return harness, [system, *turns, UserMessage(text=opening)]

    async def _spawn(self, ctx: RunContext[Any], prompt: str, context: Any, depth: int) -> AgentRun:
        """One ``rlm_query`` child: a pooled REPL holding ``context``, run as a child of ``ctx``."""
        assert self.children is not None
        env = self.children.acquire()
        try:
            values = {"context": prompt if context is None else context}  # as the official children have it
            harness, messages = self._build(prompt, values, env, depth=depth)
            agent = SubAgent(CHILD_AGENT, harness, description="A child RLM run started by rlm_query.")
            return await agent.invoke_in_parent(ctx, messages)
        finally:
            self.children.release(env)

    async def invoke(
        self,
        task: str,
        *,
        context: Mapping[str, Any] | None = None,
        config: RunConfig | None = None,
        session: RLMSession | None = None,
    ) -> AgentRun:
        """Run to the end as a root run; raises the run's error (``LimitExceeded``, ``RunCancelled``, ...)."""
        harness, messages = self.prepare(task, context, session=session)
        return await harness.invoke(messages, config=config)

    async def invoke_in_context(
        self,
        ctx: RunContext[Any],
        task: str,
        *,
        context: Mapping[str, Any] | None = None,
        session: RLMSession | None = None,
    ) -> AgentRun:
        """Run inside an existing context (a notebook session's root, or a parent run's child)."""
        harness, messages = self.prepare(task, context, session=session)
        return await harness.invoke_in_context(ctx, messages)

    def invoke_streaming(
        self,
        task: str,
        *,
        context: Mapping[str, Any] | None = None,
        config: RunConfig | None = None,
        run_context: RunContext[Any] | None = None,
        session: RLMSession | None = None,
    ) -> AgentStream:
        """A streaming run (what ``%%agent --rlm`` shows in its dashboard); iterate it or await it."""
        harness, messages = self.prepare(task, context, session=session)
        return harness.invoke_streaming(messages, config=config, context=run_context)

    def run_sync(
        self,
        task: str,
        *,
        context: Mapping[str, Any] | None = None,
        config: RunConfig | None = None,
        session: RLMSession | None = None,
    ) -> AgentRun:
        """Blocking twin of ``invoke`` (works inside Jupyter's running loop too)."""
        harness, messages = self.prepare(task, context, session=session)
        return harness.run_sync(messages, config=config)

    async def resume(
        self,
        run_id: str,
        *,
        store: RunStore | str | os.PathLike[str],
        context: Mapping[str, Any] | None = None,
        config: RunConfig | None = None,
    ) -> AgentRun:
        """Continue an RLM run a crash or restart interrupted, journaled by ``rlm_journal`` in ``middleware``.

        Its transcript and spend come back from ``store``; its REPL does not (a namespace of live objects
        is not saved): the run goes on in a fresh REPL holding ``context`` (give the values again), and
        the model is told which variables its earlier blocks made are gone, with the code that made
        them. A block cut off mid-run is never run again by itself (it ran in the REPL that is gone, and
        may have had effects): the model is told, and decides what to run in the new REPL.

        Raises:
            ConfigurationError: The run is unknown, not an RLM run, completed, already resumed or running.
        """
        runs = store if isinstance(store, RunStore) else RunStore(store)
        plan = plan_resume(runs, run_id)
        harness, note = self.prepare_resume(plan, context)
        return await resume_run(harness, run_id, store=runs, config=config, note=note, plan=plan)

    def prepare_resume(
        self, plan: ResumePlan, context: Mapping[str, Any] | None = None
    ) -> tuple[AgentHarness[Any], str]:
        """The harness that continues the RLM run ``plan`` (from ``plan_resume``) and the note its model is told.

        What ``resume`` runs; a notebook streams it instead (``resume_streaming(harness, ..., note=note,
        plan=plan)``). With no approval desk, or an unattended one, a cut-off block is skipped with a
        note (the harness has no unattended approval): the REPL it ran in is gone, the model decides.

        Raises:
            ConfigurationError: ``plan`` is not an RLM run's.
        """
        values = dict(context or {})
        note = resume_note(plan, values)  # refuses a run that is not an RLM run
        harness, _ = self._build("(resumed)", values, self.environment, depth=0)
        if isinstance(harness.model, REPLDialect):  # new blocks get new call ids, after the journaled ones
            harness.model.state.iterations = repl_calls(plan.messages)
        harness.policy = dataclasses.replace(harness.policy, unattended_approval=None)  # a cut-off block: a note
        return harness, note

    def trajectory(self, run: AgentRun | str) -> Trajectory:
        """The trajectory of one of this RLM's latest root runs (``run`` or its id), to save or show.

        Raises:
            TrajectoryError: The run is not one of the last ``keep_trajectories`` root runs.
        """
        run_id = run if isinstance(run, str) else run.run_id
        recorder = self._recorders.get(str(run_id))
        if recorder is None:
            raise TrajectoryError(
                f"no trajectory kept for run {run_id!r}",
                hint=f"this RLM keeps its last {self.keep_trajectories} root runs (RLM(keep_trajectories=...))",
            )
        return recorder.trajectory(answer=None if isinstance(run, str) else run.final_text)

    def _keep(self, recorder: TrajectoryRecorder) -> None:
        self._recorders[recorder.root_run_id] = recorder
        while len(self._recorders) > self.keep_trajectories:
            oldest = next(iter(self._recorders))
            self._recorders.pop(oldest).detach()

    def close(self) -> None:
        """Shut the environment down (a child kernel is stopped), and the children's REPLs."""
        self.environment.close()
        if self.children is not None:
            self.children.close()

    def __repr__(self) -> str:
        return f"RLM(model={self.model.model_name!r}, environment={self.environment.name!r})"


class _Record(Middleware):
    """Keeps a root RLM run's events for ``RLM.trajectory`` (the first middleware: see ``_build``)."""

    def __init__(self, rlm: RLM) -> None:
        self.rlm = rlm
        self.recorder: TrajectoryRecorder | None = None

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        self.recorder = TrajectoryRecorder(str(ctx.run_id), str(ctx.root_run_id))
        self.recorder.attach(ctx.events)
        self.rlm._keep(self.recorder)

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        if self.recorder is not None:  # after rlm.partial: the run's last event
            self.recorder.detach()
