"""``%agent resume``: a paused run of this kernel continues, or an interrupted run resumes as a waiting cell's run.

An interrupted run (its kernel died) is continued from its journal by a new run that this cell
shows and waits for exactly as a waiting ``%%agent`` cell does (``present``, then ``_waiting``'s
``wait_sync``/``wait_async``): the dashboard streams, Stop works, and a call the interruption cut
off in a tool that is not idempotent, or whose approval was pending, waits on the run's approval
card (**Run again** / **Skip** with a note to the model; a pending approval gets the usual card).
The card's clicks reach the cell by the same means as every waiting cell's: on ipykernel 7.x the
line becomes an awaiting statement (``agent_wait_transformer``), on 6.x the waiting cell pumps the
kernel. Where nobody can click (nbclient, papermill, nbval) ``AgentMagics.approvals`` decides, and
its default skips such calls with a note, as a script's resume does. An RLM run resumes the same
way, in a fresh REPL (``_rlm.resumed_rlm_run``); its cut-off block is skipped with a note, never
asked about. The journal is read once (``plan_resume``), and the lines it prints name runs by
their short ids, which ``%agent resume`` takes.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from IPython.core.error import UsageError

from tinyagents_nb.harness import ConfigurationError
from tinyagents_nb.harness.durable import StoredRun, plan_resume

from ._display import short_id, short_ids
from ._durable import find_interrupted, missing_note, missing_variables, offer_cells, resumed_run, run_store_of
from ._handle import NotebookRun
from ._notebook import run_access
from ._present import Presenter, present
from ._rlm import resumed_rlm_run
from ._session import NotebookSession
from ._usage import usage_error
from ._waiting import interrupts_counted, said_in, sync_delivery, wait_async, wait_sync

__all__ = ["resume_command", "resume_command_async"]


class ResumeHost(Presenter, Protocol):
    """What ``%agent resume`` reads of ``AgentMagics``."""

    @property
    def session(self) -> NotebookSession: ...


def _target(host: ResumeHost, args: list[str]) -> tuple[StoredRun, NotebookRun, str] | None:
    """The interrupted run to resume, its new run (not started) and what it is (``run``, ``RLM run``).

    ``None`` when a paused run was released.
    """
    session = host.session
    if len(args) > 1:
        raise UsageError(f"%agent resume takes at most one run, got {' '.join(args)!r}")
    ref = args[0] if args else None
    store = run_store_of(session)
    stored = None if session.active_runs() and ref is None else find_interrupted(store, ref)
    if stored is None:
        paused = session.find_run(ref)
        if paused.done or paused.mode is None:
            raise UsageError(f"cannot resume run {paused.label}: it is {paused.status}")
        paused.resume()
        print(f"resuming {paused.label}")
        return None
    try:
        plan = plan_resume(store, stored.run_id)  # read once: the run is built from this plan
    except ConfigurationError as exc:  # e.g. a run with nothing journaled: said with the short id
        raise UsageError(short_ids(str(usage_error(exc)), session.runs)) from None
    rlm = plan.meta.get("kind") == "rlm"
    what = "RLM run" if rlm else "run"
    print(f"resuming interrupted {what} {short_id(stored.run_id)} from step {stored.steps - 1}")
    user_ns = getattr(host.shell, "user_ns", None)
    if rlm:  # a fresh REPL, told what is gone; shown and waited for as a %%agent --rlm cell's run
        run = resumed_rlm_run(session, stored, plan, user_ns or {})
    else:
        missing = missing_variables(plan.messages, user_ns or {})
        if missing and user_ns is not None:
            print(
                f"gone with the restart: {', '.join(sorted(missing))} (made by the run's run_code); the run is "
                "told, and the code that made them is in a new cell below, to run if you want them back"
            )
            offer_cells(host.shell, missing)
        notebook_tools, _, announcer = run_access(cast(Any, host), None, mode="waiting", rlm=False, system=None)
        note = missing_note(missing) if missing and user_ns is not None else None
        run = resumed_run(session, stored, plan, tools=[*session.tools, *notebook_tools], note=note)
        if announcer is not None:
            announcer.run = run
    if host.shell is not None:  # the handle, as a %%agent cell binds it
        host.shell.user_ns["_agent"] = run
    return stored, run, what


def _ended(stored: StoredRun, run: NotebookRun, what: str) -> None:
    outcome = run.outcome
    tokens = f" · {outcome.usage.total_tokens:,} tokens in all" if outcome is not None else ""
    print(
        f"[{run.status} · run {short_id(run.run_id)} resumed {what} {short_id(stored.run_id)} "
        f"from step {stored.steps - 1}{tokens}]"
    )


def resume_command(host: ResumeHost, args: list[str]) -> None:
    """``%agent resume [RUN]`` as a synchronous line (ipykernel 6.x pumps the kernel while it waits)."""
    delivery = sync_delivery(host.shell)
    with interrupts_counted() as interrupts:  # a ■ while the run starts is kept for the wait
        target = _target(host, args)
        if target is None:
            return
        stored, run, what = target
        present(host, host.session, run, mode="waiting", delivery=delivery, title=run.name)
        future = run.future
        assert future is not None
        access = host.session.notebook  # the run's run_code calls need this (the main) thread while it waits
        work = access.runner.drain if access is not None else None
        wait_sync(run, future, delivery=delivery, say=said_in(run), work=work, interrupts=interrupts)
    _ended(stored, run, what)


async def resume_command_async(host: ResumeHost, args: list[str]) -> None:
    """``%agent resume [RUN]`` awaiting on the kernel's loop (ipykernel 7.x): the card's clicks and Stop reach it."""
    target = _target(host, args)
    if target is None:
        return
    stored, run, what = target
    present(host, host.session, run, mode="waiting", delivery="async", title=run.name)
    future = run.future
    assert future is not None
    await wait_async(run, future, say=said_in(run))
    _ended(stored, run, what)
