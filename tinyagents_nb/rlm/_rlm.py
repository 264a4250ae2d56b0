"""``RLM``: run a task as a recursive language model over values held in a REPL.

Each run is an ordinary harness run (``AgentHarness`` around the ``REPLDialect`` of the root
model, with the ``repl`` tool and the RLM middleware), so it has the run's usual identity, events,
limits, Stop, streaming and dashboard; its sub-queries are child runs of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
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
    SystemMessage,
    UserMessage,
    resolve_model,
)

from ._config import RLMLimits
from ._dialect import CodeApproval, REPLDialect, REPLTool, RLMMiddleware, RLMRunState
from ._environment import Environment
from ._kernel import KernelEnvironment
from ._local import LocalEnvironment
from ._prompt import first_message, system_prompt

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
        self.sub_harness: AgentHarness[Any] = AgentHarness(model=self.sub_model, policy=self.policy, name="llm")

    # ------------------------------------------------------------------ one run
    def prepare(self, task: str, context: Mapping[str, Any] | None = None) -> tuple[AgentHarness[Any], list[Message]]:
        """The harness and the opening messages of one run (checks the values first).

        Raises:
            ConfigurationError: An empty task.
            ContextValueError: A value cannot be given to the environment (named in the message).
        """
        if not task.strip():
            raise ConfigurationError("the RLM task is empty", hint="say what to compute over the context values")
        values = dict(context or {})
        state = RLMRunState(
            environment=self.environment,
            prepared=self.environment.prepare_values(values),
            limits=self.limits,
            sub_harness=self.sub_harness,
            approve=self.approve_code,
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
            middleware=[RLMMiddleware(state), *self.middleware],
            # its one tool's output is bounded by the RLM's own ``max_output_chars`` (and while it streams)
            policy=dataclasses.replace(self.policy, limits=run_limits, tool_result_limit=None),
            name=self.name,
            pressure=None,
        )
        prompt = system_prompt(limits) + (f"\n{self.instructions.strip()}\n" if self.instructions else "")
        opening = first_message(task, values, environment=self.environment.name, limits=limits)
        return harness, [SystemMessage(text=prompt), UserMessage(text=opening)]

    async def invoke(
        self, task: str, *, context: Mapping[str, Any] | None = None, config: RunConfig | None = None
    ) -> AgentRun:
        """Run to the end as a root run; raises the run's error (``LimitExceeded``, ``RunCancelled``, ...)."""
        harness, messages = self.prepare(task, context)
        return await harness.invoke(messages, config=config)

    async def invoke_in_context(
        self, ctx: RunContext[Any], task: str, *, context: Mapping[str, Any] | None = None
    ) -> AgentRun:
        """Run inside an existing context (a notebook session's root, or a parent run's child)."""
        harness, messages = self.prepare(task, context)
        return await harness.invoke_in_context(ctx, messages)

    def invoke_streaming(
        self,
        task: str,
        *,
        context: Mapping[str, Any] | None = None,
        config: RunConfig | None = None,
        run_context: RunContext[Any] | None = None,
    ) -> AgentStream:
        """A streaming run (what ``%%agent --rlm`` shows in its dashboard); iterate it or await it."""
        harness, messages = self.prepare(task, context)
        return harness.invoke_streaming(messages, config=config, context=run_context)

    def run_sync(
        self, task: str, *, context: Mapping[str, Any] | None = None, config: RunConfig | None = None
    ) -> AgentRun:
        """Blocking twin of ``invoke`` (works inside Jupyter's running loop too)."""
        harness, messages = self.prepare(task, context)
        return harness.run_sync(messages, config=config)

    def close(self) -> None:
        """Shut the environment down (a child kernel is stopped)."""
        self.environment.close()

    def __repr__(self) -> str:
        return f"RLM(model={self.model.model_name!r}, environment={self.environment.name!r})"
