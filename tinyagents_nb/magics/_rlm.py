"""``%%agent --rlm``: the cell's prompt as a recursive-language-model run over notebook values.

A thin adapter: pick the named notebook values, build an ``RLM`` on the session's models, and hand
the magic a ``NotebookRun`` like any other (same dashboard, handle, blocking/background modes, Stop).
The child kernel is made once per session and reused by its RLM runs; ``--rlm local`` runs the code
in this kernel's process instead (trusted code only: see ``docs/rlm.md``). ``--thread NAME`` runs
in the thread's ``RLMSession``: a REPL of its own whose variables, and the transcript, carry over
from one cell to the next; the session joins the thread's conversation (its task and answer enter
the thread's history, and the chat turns since its last run come before its next task).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from IPython.core.error import UsageError

from tinyagents_nb.harness import ConfigurationError, Middleware, SteeringHandle
from tinyagents_nb.harness.durable import ResumePlan, StoredRun, resume_streaming
from tinyagents_nb.harness.steering import SteeringPolicy
from tinyagents_nb.rlm import (
    RLM,
    DataFrameSchema,
    Environment,
    KernelEnvironment,
    LocalEnvironment,
    RLMLimits,
    RLMSession,
    rlm_journal,
)

from . import _durable
from ._display import short_id
from ._handle import NotebookRun
from ._offline import OfflineModel
from ._session import NotebookSession

__all__ = ["close_thread", "output_class", "rlm_starter", "rlm_threads"]

_KERNELS: weakref.WeakKeyDictionary[NotebookSession, KernelEnvironment] = weakref.WeakKeyDictionary()
_THREADS: weakref.WeakKeyDictionary[NotebookSession, dict[str, RLMSession]] = weakref.WeakKeyDictionary()
_TAGS = ("notebook", "rlm")


def session_kernel(session: NotebookSession) -> KernelEnvironment:
    """The session's child kernel for RLM runs (started by its first run, reused after)."""
    env = _KERNELS.get(session)
    if env is None:
        env = _KERNELS[session] = KernelEnvironment()
    return env


def rlm_threads(session: NotebookSession) -> dict[str, RLMSession]:
    """The notebook session's RLM thread sessions by thread (their REPLs and transcripts)."""
    threads = _THREADS.get(session)
    if threads is None:
        threads = _THREADS[session] = {}
        session.thread_listeners.append(functools.partial(_dropped, weakref.ref(session)))
    return threads


def close_thread(session: NotebookSession, thread: str) -> RLMSession | None:
    """End an RLM thread's session: its REPL stops (at the end of a run going on); ``None`` if there is none."""
    kept = rlm_threads(session).pop(thread, None)
    if kept is not None:
        kept.close()
    return kept


def _dropped(ref: weakref.ReferenceType[NotebookSession], thread: str | None) -> None:
    """A thread was dropped (``None``: the session closed or reset): its RLM session's REPL stops."""
    session = ref()
    if session is None:
        return
    for name in list(rlm_threads(session)) if thread is None else [thread]:
        close_thread(session, name)
    kernel = _KERNELS.pop(session, None) if thread is None else None
    if kernel is not None:
        kernel.close()


def thread_session(session: NotebookSession, thread: str, environment: str) -> RLMSession:
    """The RLM session of ``--thread NAME`` (made by its first cell): its REPL and transcript persist."""
    threads = rlm_threads(session)
    kept = threads.get(thread)
    if kept is None or kept.closed:
        kind: Literal["kernel", "local"] = "local" if environment == "local" else "kernel"
        kept = threads[thread] = RLMSession(kind, history=session.history, thread_id=thread)
    elif kept.environment.name != ("local" if environment == "local" else "kernel"):
        raise ConfigurationError(
            f"--thread {thread}: its REPL is {kept.environment.name!r}, this cell asks for {environment!r}",
            hint="use the same --rlm environment in every cell of a thread, or another --thread name",
        )
    return kept


def rlm_run_journal(
    session: NotebookSession, name: str | None, model: str, values: Mapping[str, Any], environment: str
) -> Middleware:
    """Journal an RLM cell's run in the session's store, like a chat run (its context values by name only)."""
    store = _durable.run_store_of(session)
    return rlm_journal(store, agent=name or "rlm", model=model, context=list(values), environment=environment)


def resumed_rlm_run(
    session: NotebookSession, stored: StoredRun, plan: ResumePlan, user_ns: Mapping[str, Any]
) -> NotebookRun:
    """``%agent resume`` of an interrupted RLM run, as a run the cell shows and waits for (not started).

    It goes on in a fresh REPL of its kind holding the context values the journal names, read from
    the notebook again; the model is told which are missing and which REPL variables its blocks made
    are gone. A block the interruption cut off is skipped with a note, never asked about on a card:
    the REPL it ran in is gone, and the model knows what to run again. Its dashboard, Stop and
    record are a ``%%agent --rlm`` cell's.
    """
    store = _durable.run_store_of(session)
    environment = str(plan.meta.get("environment") or "kernel")
    env: Environment = session_kernel(session) if environment == "kernel" else LocalEnvironment()
    names = [str(n) for n in plan.meta.get("context") or ()]
    values = {n: user_ns[n] for n in names if n in user_ns}
    model = stored.model or session.model_name()
    rlm = RLM(
        model=session.resolve_model(stored.model),
        environment=env,
        name=stored.agent or "rlm",
        keep_children=False,
        keep_trajectories=0,
        middleware=[rlm_run_journal(session, stored.agent, model, values, environment)],
    )
    harness, note = rlm.prepare_resume(plan, values)
    ctx = session.context.new_root(tags=_TAGS, steering=SteeringHandle(SteeringPolicy.allow_all()))
    ctx.budgets = session.budgets_for(ctx, rlm.model)  # the notebook's caps bind the run and its sub-queries
    stream = resume_streaming(harness, stored.run_id, store=store, context=ctx, note=note, plan=plan)
    stream.approvals.attended = False  # a cut-off block: a note to the model (see above)
    resumed = f"resumed RLM run {short_id(stored.run_id)} from step {stored.steps - 1}"
    run = NotebookRun(
        stream=stream, harness=harness, prompt=stored.prompt, model=model, name=stored.agent, notes=lambda _: [resumed]
    )
    session.adopt(run)
    return run


def output_class(name: str | None, user_ns: Mapping[str, Any]) -> Any:
    """``--output NAME`` with ``--rlm``: the notebook class (or ``DataFrameSchema``) the answer must fit."""
    if not name:
        return None
    found = user_ns.get(name)
    if not isinstance(found, type | DataFrameSchema):
        raise UsageError(
            f"--output {name!r}: no class of that name in the notebook (a pydantic model, or a DataFrameSchema)"
        )
    return found


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
    output_type: Any = None,
) -> Callable[..., NotebookRun]:
    """A stand-in for ``session.new_run`` that starts an RLM run instead (same keyword arguments).

    ``output_type`` (a pydantic model) makes the answer a validated value (``RLM(output_type=...)``).
    """
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
        thread_id: str | None = None,
        **_thread: Any,  # --new-thread: an RLM run without --thread starts from a fresh REPL anyway
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
            output_type=output_type,
            keep_children=False,  # this RLM lives for one cell: its rlm_query kernels must not outlive it
            keep_trajectories=0,  # the session's journal has the events (%agent trajectory reads it)
            middleware=[rlm_run_journal(session, name, session.model_name(model), values, environment)],
        )
        kept = thread_session(session, thread_id, environment) if thread_id else None
        harness, messages = rlm.prepare(prompt, values, session=kept)
        if thread_id:  # like a chat run's --thread: it becomes the current thread, and the run's
            session.use_thread(thread_id)
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
