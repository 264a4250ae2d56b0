"""``rlm_query`` children: RLM runs started from the REPL, each with its own REPL, at depth + 1.

A child is an ordinary RLM run of the same ``RLM`` (root model, sub-model, limits, policy) started
as a child run of the calling run (``SubAgent.invoke_in_parent``): it shares the run tree's sink,
cancellation token, usage and cost trackers and budgets, so its usage rolls up exactly and one
Stop cancels the whole tree. Its REPL is a fresh environment from a pool (an in-process namespace,
or one more child kernel, reused by later children) holding one value, ``context``.

Everything that bounds recursion is on the harness side, in ``RLMRunState`` and ``RLMLimits``: the
depth of the calling run, ``max_depth``, the count against ``max_sub_queries`` and the concurrency.
The REPL only sends prompts and contexts; it cannot name a depth or a limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from tinyagents_nb.harness import Cancelled, LimitExceeded, Message, Middleware, RunContext
from tinyagents_nb.harness.events import LimitReached

from ._environment import Environment
from ._kernel import KernelEnvironment
from ._local import LocalEnvironment

if TYPE_CHECKING:
    from ._bridge import SubQueries
    from ._dialect import RLMRunState

__all__ = ["Children", "ClosePool", "EnvironmentPool", "RecursionMiddleware", "child_factory"]

CHILD_AGENT = "rlm_query"
"""The sub-agent name child RLM runs carry in the run tree (``SubAgentStarted.name``)."""


def child_factory(environment: Environment) -> Callable[[], Environment] | None:
    """How to make a child's REPL like the root's: same kind, same settings (``None``: unknown kind)."""
    if isinstance(environment, LocalEnvironment):
        grace = environment.interrupt_grace_s
        return lambda: LocalEnvironment(interrupt_grace_s=grace)
    if isinstance(environment, KernelEnvironment):
        env = environment
        return lambda: KernelEnvironment(
            python=env.python,
            startup_timeout_s=env.startup_timeout_s,
            interrupt_grace_s=env.interrupt_grace_s,
            arrow_min_bytes=env.arrow_min_bytes,
        )
    return None


class EnvironmentPool:
    """Idle child REPLs, reused by later children (a child kernel starts once, not once per child)."""

    def __init__(self, factory: Callable[[], Environment]) -> None:
        self.factory = factory
        self._idle: list[Environment] = []
        self._all: list[Environment] = []
        self._lock = threading.Lock()

    def acquire(self) -> Environment:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        env = self.factory()
        with self._lock:
            self._all.append(env)
        return env

    def release(self, env: Environment) -> None:
        with self._lock:
            self._idle.append(env)

    @property
    def size(self) -> int:
        """How many child REPLs were made."""
        return len(self._all)

    def close(self) -> None:
        with self._lock:
            envs, self._all, self._idle = self._all, [], []
        for env in envs:
            env.close()


def _refusal(error_type: str, message: str) -> dict[str, Any]:
    return {"ok": False, "type": error_type, "error": message}


class Children:
    """The ``rlm`` requests of one RLM run: depth check, count, concurrency, then the child runs."""

    def __init__(self, ctx: RunContext[Any], state: RLMRunState, queries: SubQueries) -> None:
        self.ctx = ctx
        self.state = state
        self.queries = queries
        self._semaphore = anyio.Semaphore(state.limits.max_concurrency)

    async def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One ``rlm_query``/``rlm_query_batched`` request; every refusal is a reply the REPL raises."""
        state, queries = self.state, self.queries
        prompts, contexts = payload.get("prompts"), payload.get("contexts")
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            return _refusal("TypeError", "prompts must be a list of str")
        if not isinstance(contexts, list) or len(contexts) != len(prompts):
            return _refusal("ValueError", "one context (or None) per prompt")
        cap = state.limits.max_depth
        if state.spawn is None or state.depth >= cap:
            why = (
                "this RLM cannot start child runs" if state.spawn is None else f"this run is at RLM depth {state.depth}"
            )
            return _refusal(
                "RLMDepthError",
                f"rlm_query refused: {why} and RLMLimits.max_depth is {cap} (set by the harness, not the REPL); "
                "use llm()/llm_batch() for plain sub-queries",
            )
        if queries.fatal is not None:
            return _refusal(type(queries.fatal).__name__, str(queries.fatal))
        most = state.limits.max_sub_queries
        if queries.count + len(prompts) > most:
            exc = LimitExceeded(
                "rlm_sub_queries",
                f"{queries.count} sub-queries made, {len(prompts)} more asked, at most {most} per run",
                maximum=most,
            )
            self.ctx.emit(LimitReached, limit=exc.limit, maximum=most)
            queries.fatal = exc
            return _refusal(type(exc).__name__, str(exc))
        queries.count += len(prompts)
        try:
            return {"ok": True, "results": await self._run(prompts, contexts)}
        except Cancelled:
            raise
        except Exception as exc:
            return _refusal(type(exc).__name__, str(exc))

    async def _run(self, prompts: list[str], contexts: list[Any]) -> list[str]:
        spawn = self.state.spawn
        assert spawn is not None
        depth = self.state.depth + 1
        results: list[str] = [""] * len(prompts)
        errors: list[BaseException | None] = [None] * len(prompts)

        async def one(i: int) -> None:
            async with self._semaphore:
                try:
                    self.ctx.cancellation.raise_if_cancelled()
                    run = await spawn(self.ctx, prompts[i], contexts[i], depth)
                    results[i] = run.final_text
                except Exception as exc:
                    errors[i] = exc

        async with anyio.create_task_group() as tg:
            for i in range(len(prompts)):
                tg.start_soon(one, i)
        for error in errors:
            if isinstance(error, Cancelled):
                raise error
        for i, error in enumerate(errors):
            if error is not None:
                partial = getattr(error, "partial_answer", None)
                tail = f" (its partial answer: {partial!r})" if partial else ""
                raise RuntimeError(f"child run {i} failed: {type(error).__name__}: {error}{tail}") from error
        return results


class RecursionMiddleware(Middleware):
    """Answers the run's ``rlm`` requests (placed after ``RLMMiddleware``, which makes the run's gate)."""

    def __init__(self, state: RLMRunState) -> None:
        self.state = state

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        queries = self.state.queries
        assert queries is not None, "RLMMiddleware runs first"
        queries.ops["rlm"] = Children(ctx, self.state, queries).handle


class ClosePool(Middleware):
    """Stops the children's REPLs when the root run ends (``RLM(keep_children=False)``: no kernel outlives its run)."""

    def __init__(self, pool: EnvironmentPool) -> None:
        self.pool = pool

    async def after_agent(self, ctx: RunContext[Any], run: Any) -> None:
        await anyio.to_thread.run_sync(self.pool.close)

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        await anyio.to_thread.run_sync(self.pool.close)
