"""``%%agent --rlm``: the cell's prompt as a recursive-language-model run over notebook values.

A thin adapter: pick the named notebook values, build an ``RLM`` on the session's models, and hand
the magic a ``NotebookRun`` like any other (same dashboard, handle, blocking/background modes, Stop).
The child kernel is made once per session and reused by its RLM runs; ``--rlm local`` runs the code
in this kernel's process instead (trusted code only: see ``docs/rlm.md``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tinyagents_nb.harness import ConfigurationError, SteeringHandle
from tinyagents_nb.harness.steering import SteeringPolicy
from tinyagents_nb.rlm import RLM, Environment, KernelEnvironment, LocalEnvironment, RLMLimits

from ._handle import NotebookRun
from ._offline import OfflineModel
from ._session import NotebookSession

__all__ = ["rlm_starter"]

_KERNELS: weakref.WeakKeyDictionary[NotebookSession, KernelEnvironment] = weakref.WeakKeyDictionary()
_TAGS = ("notebook", "rlm")


def session_kernel(session: NotebookSession) -> KernelEnvironment:
    """The session's child kernel for RLM runs (started by its first run, reused after)."""
    env = _KERNELS.get(session)
    if env is None:
        env = _KERNELS[session] = KernelEnvironment()
    return env


def context_values(names: str | None, user_ns: Mapping[str, Any]) -> dict[str, Any]:
    """The notebook values named by ``--context a,b`` (an unknown name is a one-line error)."""
    values: dict[str, Any] = {}
    for name in (n.strip() for n in (names or "").split(",")):
        if not name:
            continue
        if name not in user_ns:
            raise ConfigurationError(
                f"--context: no notebook variable named {name!r}", hint="define it in a cell first"
            )
        values[name] = user_ns[name]
    return values


def rlm_starter(
    session: NotebookSession,
    environment: str,
    *,
    context: str | None,
    sub_model: str | None,
    user_ns: Mapping[str, Any],
) -> Callable[..., NotebookRun]:
    """A stand-in for ``session.new_run`` that starts an RLM run instead (same keyword arguments)."""
    values = context_values(context, user_ns)
    env: Environment = session_kernel(session) if environment == "kernel" else LocalEnvironment()

    def new_run(
        prompt: str,
        *,
        model: str | None = None,
        system: str | None = None,
        tools: Sequence[str] | None = None,
        max_model_calls: int | None = None,
        timeout_s: float | None = None,
        name: str | None = None,
        cell_key: str | None = None,
        **_thread: Any,  # RLM runs do not join the conversation thread's history
    ) -> NotebookRun:
        if tools:
            raise ConfigurationError("--tools does not apply to --rlm", hint="the REPL's helpers are its tools")
        limits = RLMLimits() if max_model_calls is None else RLMLimits(max_iterations=max_model_calls)
        chat_model = session.resolve_model(model)
        if isinstance(chat_model, OfflineModel):
            raise ConfigurationError(
                "--rlm needs a model that writes Python code, and the offline demo model only echoes the prompt",
                hint="pass --model with a real provider (e.g. --model openai:gpt-4o-mini), or script one offline: "
                'from tinyagents_nb.magics import demo_model; demo_model(["```python\nFINAL(len(df))\n```"]) '
                "then --model demo",
            )
        rlm = RLM(
            model=chat_model,
            sub_model=session.resolve_model(sub_model) if sub_model else None,
            environment=env,
            limits=limits,
            instructions=system or None,
            name=name or "rlm",
        )
        harness, messages = rlm.prepare(prompt, values)
        ctx = session.context.new_root(tags=_TAGS, steering=SteeringHandle(SteeringPolicy.allow_all()))
        ctx.budgets = session.budgets_for(ctx, rlm.model)  # the notebook's caps bind the run and its sub-queries
        if timeout_s is not None:
            ctx = ctx.with_config(timeout_s=timeout_s)
        stream = harness.invoke_streaming(messages, context=ctx)
        run = NotebookRun(
            stream=stream, harness=harness, prompt=prompt, model=session.model_name(model), name=name, cell_key=cell_key
        )
        session._runs.append(run)  # the session's run list: %agent runs/stop/steer find it like any run
        return run

    return new_run
