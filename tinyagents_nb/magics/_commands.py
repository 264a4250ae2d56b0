"""The ``%agent <command>`` subcommands: each parses its few arguments and calls the session.

A command returns what the cell should show (a DataFrame becomes the cell's result) or prints a
line and returns ``None``. Errors are raised as ``UsageError`` here or as harness errors that
``AgentMagics`` turns into one line. A command that changes several things checks them all first,
so a mistake in the third name changes nothing.

To add a command (or a family such as ``%agent mcp …``), write ``def _name(host, session, args)``
and add it to ``COMMANDS``: the ``%agent`` parser takes its choices, its "did you mean" and its
listing of commands from that mapping. ``host`` is a ``CommandHost``, the side of ``AgentMagics``
the commands see: they sit below the magics that dispatch to them.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, cast

from IPython.core.error import UsageError

from tinyagents_nb.harness import AgentRun, Tool
from tinyagents_nb.harness.providers import known_providers

from ._approval_commands import APPROVAL_COMMANDS
from ._batch_commands import batch_command
from ._command_host import Command, CommandHost
from ._display import context_text, models_frame, summary_line, tools_frame, usd_text
from ._handle import NotebookRun
from ._mcp import mcp_command
from ._notebook import NOTEBOOK_COMMANDS
from ._offline import OFFLINE_MODEL
from ._pricing import set_price
from ._resume_cell import ResumeHost, resume_command
from ._rlm_commands import RLM_COMMANDS
from ._session import NotebookSession
from ._store_place import session_store_path
from ._trace import trace_command
from ._waiting import WaitOutcome, sync_delivery, wait_runs, wait_runs_async

__all__ = ["COMMANDS", "run_command", "wait_command_async"]


def _no_args(name: str, args: list[str]) -> None:
    if args:
        raise UsageError(f"%agent {name} takes no arguments, got {' '.join(args)!r}")


def _at_most_one(name: str, args: list[str], what: str) -> str | None:
    if len(args) > 1:
        raise UsageError(f"%agent {name} takes at most one {what}, got {' '.join(args)!r}")
    return args[0] if args else None


def _run_and_text(name: str, args: list[str]) -> tuple[str | None, str]:
    """``[-r RUN | --run RUN] words…`` → (run ref, text); quoting the text is optional."""
    ref = None
    if args and args[0] in ("-r", "--run"):
        if len(args) < 2:
            raise UsageError(f"%agent {name}: {args[0]} needs a run name or id")
        ref, args = args[1], args[2:]
    text = " ".join(args).strip()
    if not text:
        raise UsageError(f'%agent {name} needs text, e.g. %agent {name} "focus on the totals"')
    return ref, text


def _active(session: NotebookSession, ref: str | None, verb: str) -> NotebookRun:
    run = session.find_run(ref)
    if run.done or run.mode is None:
        raise UsageError(f"cannot {verb} run {run.label}: it is {run.status}")
    return run


# ------------------------------------------------------------------------------------------ commands
def _status(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    _no_args("status", args)
    active = session.active_runs()
    usage, cost = session.context.usage.total(), session.context.costs.total().total_usd
    model = session.default_model or f"{OFFLINE_MODEL} (no model configured)"
    running = ", ".join(f"{r.label} {r.status}" for r in active)
    print(f"thread: {session.thread_id} · default model: {model} · store: {session.store_path}")
    print(f"runs: {len(session.runs)} ({len(active)} active{': ' + running if running else ''})")
    estimated = " (part estimated: a provider reported no usage, or a call was stopped)" if usage.estimated else ""
    print(f"usage: {'~' if usage.estimated else ''}{usage.total_tokens:,} tokens · {usd_text(cost)}{estimated}")
    print(
        f"tools: {', '.join(session.tools.names()) or 'none'} · models: {', '.join(session.models.names()) or 'none'}"
    )


def _runs(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    _no_args("runs", args)
    # narrow enough for a notebook: the run's name says which; get_session().runs_frame() has the ids
    return session.runs_frame().drop(columns=["thread_id", "run_id"])


def _stop(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    ref = _at_most_one("stop", args, "run")
    if ref == "all":
        runs = session.active_runs()
    else:
        runs = [_active(session, ref, "stop")] if ref is not None or session.active_runs() else []
    if not runs:
        print("no active run to stop")
        return
    for run in runs:
        run.cancel("stopped with %agent stop")
    print(f"stopping {', '.join(r.label for r in runs)}")


def _wait_plan(session: NotebookSession, args: list[str]) -> tuple[list[NotebookRun], float | None]:
    """``%agent wait``'s arguments: the runs to wait for and the timeout (no run: it says so and there is nothing to do)."""
    timeout_s, rest = None, list(args)
    if "--timeout" in rest:
        at = rest.index("--timeout")
        value = rest[at + 1] if at + 1 < len(rest) else ""
        try:
            timeout_s = float(value)
        except ValueError:
            timeout_s = -1.0
        if not timeout_s > 0:
            raise UsageError(f"%agent wait: --timeout needs a number of seconds > 0, got {value!r}")
        del rest[at : at + 2]
    ref = _at_most_one("wait", rest, "run")
    if ref in (None, "all"):
        runs = session.active_runs()
    else:
        runs = [session.find_run(ref)]
        if runs[0].future is None:
            raise UsageError(f"cannot wait for run {runs[0].label}: it was never started")
    if not runs:
        print("no active run to wait for")
    return runs, timeout_s


def _futures(runs: list[NotebookRun]) -> list[Future[AgentRun]]:
    return [r.future for r in runs if r.future is not None]


def _wait_report(runs: list[NotebookRun], outcome: WaitOutcome, timeout_s: float | None) -> None:
    for run in runs:
        print(f"{run.label}: {summary_line(run) if run.done else '[' + run.status + ']'}")
    still = [r.label for r in runs if not r.done]
    if outcome == "interrupted":
        print(f"stopped waiting; still active: {', '.join(still)} (%agent stop all stops them)")
    elif outcome == "timeout":
        print(f"stopped waiting after {timeout_s:g} s; still active: {', '.join(still)}")


def _wait(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    """``%agent wait [RUN|all] [--timeout S]``: a notebook waits for its background runs before it goes on (or ends)."""
    runs, timeout_s = _wait_plan(session, args)
    if runs:
        access = session.notebook  # the runs' run_code calls need this (the main) thread while it waits
        work = access.runner.drain if access is not None else None
        outcome = wait_runs(_futures(runs), timeout_s=timeout_s, delivery=sync_delivery(host.shell), work=work)
        _wait_report(runs, outcome, timeout_s)


async def wait_command_async(host: CommandHost, args: list[str]) -> None:
    """``%agent wait`` awaiting on the kernel's loop (ipykernel 7.x): the runs' buttons work meanwhile."""
    runs, timeout_s = _wait_plan(host.session, args)
    if runs:
        outcome = await wait_runs_async(_futures(runs), timeout_s=timeout_s)
        _wait_report(runs, outcome, timeout_s)


def _pause(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    run = _active(session, _at_most_one("pause", args, "run"), "pause")
    run.pause("paused with %agent pause")
    print(f"pausing {run.label} before its next model call (%agent resume continues it)")


def _resume(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    """A paused run of this kernel continues; otherwise an interrupted run resumes from its journal (see ``_resume_cell``)."""
    resume_command(cast(ResumeHost, host), args)  # AgentMagics is both; the table is typed on the narrower one


def _steer(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    ref, text = _run_and_text("steer", args)
    run = _active(session, ref, "steer")
    run.steer(text)
    print(
        f"queued for {run.label}'s next model call "
        "(if the run is in its last answer there is none, and the message is not delivered)"
    )


def _redirect(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    ref, text = _run_and_text("redirect", args)
    run = _active(session, ref, "redirect")
    run.redirect(text)
    print(f"redirecting {run.label} before its next model call")


def _cost(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    _no_args("cost", args)
    usage, cost = session.context.usage.total(), session.context.costs.total()
    calls = f"{cost.calls:,} billed model call" + ("" if cost.calls == 1 else "s")
    print(f"notebook total: {calls} · {usage.total_tokens:,} tokens · {usd_text(cost.total_usd)}")
    billed = {str(record.root_run_id) for record in session.context.costs.records}
    unbilled: dict[str, int] = {}  # by model (no run ids: the line stays the same run after run, for nbval)
    for run in session.runs:
        if run.outcome is not None and run.outcome.model_calls and run.run_id not in billed:
            if run.model != OFFLINE_MODEL:  # the offline demo model is free, not unpriced
                unbilled[run.model] = unbilled.get(run.model, 0) + 1
    if unbilled:
        which = ", ".join(f"{count:,} run{'s' if count != 1 else ''} on {model}" for model, count in unbilled.items())
        print(f"not in the table: {which} (no price is known for that model, so no cost was recorded)")
    return session.cost_frame()


def _context(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    thread = _at_most_one("context", args, "thread") or session.thread_id
    window, model, source = session.context_window(thread)
    print(context_text(window, thread_id=thread, model=model, source=source))


def _price(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    """``%agent price MODEL INPUT OUTPUT``: USD per million input and output tokens, for this session."""
    if len(args) != 3:
        raise UsageError(
            "usage: %agent price MODEL INPUT OUTPUT (USD per million tokens, e.g. %agent price smollm2 0 0)"
        )
    set_price(session.context.costs, session.noted, *args)
    print(f"price for {args[0]}: ${args[1]} in, ${args[2]} out per million tokens (this session)")


def _history(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    thread = _at_most_one("history", args, "thread")
    if thread is not None and thread != session.thread_id and thread not in session.history.threads():
        known = ", ".join(session.history.threads()) or "none"
        raise UsageError(
            f"no thread {thread!r} in this session (threads with messages: {known}; %agent thread shows the current one)"
        )
    return session.history_frame(thread)


def _thread(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    if args[:1] == ["drop"]:
        if len(args) != 2:
            raise UsageError("usage: %agent thread drop THREAD")
        session.drop_thread(args[1])  # its messages are forgotten, its RLM session's REPL stops
        print(f"dropped thread {args[1]}")
        return
    choice = _at_most_one("thread", args, "thread")
    if choice is not None:
        session.use_thread(None if choice == "new" else choice)
    print(f"thread: {session.thread_id} ({len(session.messages())} saved messages)")


def _model(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    name = _at_most_one("model", args, "model name")
    if name is not None:
        session.resolve_model(name)  # a bad name or a missing key fails here, not at the next run
        host.default_model = "" if name == OFFLINE_MODEL else name
    if session.default_model:
        print(f"default model: {session.default_model}")
        return
    ready = [spec.api_key_env for spec, ok in known_providers() if ok and spec.api_key_env]
    keys = f"keys found: {', '.join(ready)}" if ready else "no provider key is set"
    print(
        f"default model: {OFFLINE_MODEL} (no model configured; {keys}). "
        'Set one with %agent model openai:gpt-4o-mini or %config AgentMagics.default_model = "..."'
    )


def _models(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    _no_args("models", args)
    return models_frame(session.models.names(), session.default_model)


def _tools(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    if not args:
        return tools_frame(session.tools)
    action, names = args[0], args[1:]
    if action not in ("add", "remove") or not names:
        raise UsageError("use %agent tools, %agent tools add <function> …, or %agent tools remove <name> …")
    if action == "remove":
        unknown = [name for name in names if name not in session.tools]
        if unknown:  # all or nothing: a typo in one name removes none
            registered = ", ".join(session.tools.names()) or "none"
            raise UsageError(
                f"no tool named {', '.join(map(repr, unknown))}; nothing removed (registered: {registered})"
            )
        for name in names:
            session.tools.unregister(name)
        print(f"removed {', '.join(names)}; tools: {', '.join(session.tools.names()) or 'none'}")
        return None
    namespace: Mapping[str, Any] = host.shell.user_ns if host.shell is not None else {}
    for name in names:  # every name is checked before any is registered
        if name not in namespace:
            raise UsageError(f"name {name!r} is not defined in the notebook; define the function first")
        fn = namespace[name]
        if not (inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, Tool)):
            raise UsageError(f"{name!r} is a {type(fn).__name__}, not a function; tools are def or async def")
        if getattr(fn, "__name__", "") == "<lambda>":
            raise UsageError(
                f"{name!r} is a lambda, which has no name the model can call; define it with def {name}(...)"
            )
    for name in names:
        session.register_tool(namespace[name])
    print(f"tools: {', '.join(session.tools.names())}")
    return None


def _journal(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    ref = _at_most_one("journal", args, "run")
    return session.journal_frame(None if ref is None else session.find_run(ref))


def _reset(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    _no_args("reset", args)
    stopped = len(session.active_runs())
    session.reset(store_path=session_store_path(host.store_path, host.shell))
    note = f"; stopped {stopped} active run(s)" if stopped else ""
    print(f"session reset: new thread {session.thread_id}{note}")
    host.open_store(session)


COMMANDS: Mapping[str, Command] = {
    "status": _status,
    "runs": _runs,
    "stop": _stop,
    "wait": _wait,
    "pause": _pause,
    "resume": _resume,
    "steer": _steer,
    "redirect": _redirect,
    "cost": _cost,
    "context": _context,
    "price": _price,
    "history": _history,
    "thread": _thread,
    "model": _model,
    "models": _models,
    "tools": _tools,
    "journal": _journal,
    "mcp": mcp_command,
    "batch": batch_command,
    "trace": trace_command,
    "reset": _reset,
    **APPROVAL_COMMANDS,
    **NOTEBOOK_COMMANDS,
    **RLM_COMMANDS,
}


def run_command(host: CommandHost, command: str, args: list[str]) -> Any:
    """Dispatch ``%agent <command> <args…>``."""
    return COMMANDS[command](host, host.session, args)
