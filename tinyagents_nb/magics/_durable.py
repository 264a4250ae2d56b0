"""Durable runs in the notebook: interrupted runs in ``%agent runs`` and ``%agent resume RUN``.

Every run the session starts is journaled step by step to the session's ``RunStore`` (the same
SQLite file as its history when ``store_path`` is set). After a kernel restart, runs whose kernel
died show as ``interrupted`` with what they spent; ``%agent resume RUN`` continues one from its last
completed step with the session's current tools, on the session's loop, shown and waited for as a
``%%agent`` cell's run is: its dashboard streams, its Stop works, and a call the interruption cut off
(or whose approval was pending) is asked about on its approval card.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ChatModel,
    Message,
    RunContext,
    SteeringHandle,
    Tool,
    ToolMessage,
    TreeBudget,
)
from tinyagents_nb.harness.durable import (
    DurableJournal,
    ResumePlan,
    RunStore,
    StoredRun,
    bound_names,
    resume_streaming,
)
from tinyagents_nb.harness.steering import SteeringPolicy

from ._display import short_id
from ._handle import NotebookRun, RunMode
from ._pricing import run_notes
from ._run_policy import PolicySettings, notebook_policy

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "journal_for",
    "run_store_of",
    "with_interrupted",
    "announce_interrupted",
    "find_interrupted",
    "interrupted_note",
    "interrupted_rows",
    "missing_note",
    "missing_variables",
    "offer_cells",
    "resumed_run",
]


class _Session(Protocol):
    store_path: str

    @property
    def runs(self) -> list[Any]: ...


class _ResumingSession(_Session, PolicySettings, Protocol):
    """What ``resumed_run`` reads of a ``NotebookSession`` (a protocol: the session module imports this one)."""

    system_prompt: str | None
    context: RunContext[None]
    noted: set[str]

    def resolve_model(self, name: str | None = None) -> ChatModel: ...
    def model_name(self, name: str | None = None) -> str: ...
    def budgets_for(self, ctx: RunContext[Any], model: ChatModel) -> tuple[TreeBudget, ...]: ...
    def start(self, run: NotebookRun, *, mode: RunMode) -> None: ...
    def adopt(self, run: NotebookRun) -> None: ...


_stores: weakref.WeakKeyDictionary[Any, RunStore] = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


def run_store_of(session: _Session) -> RunStore:
    """The session's run store, in its SQLite file (or in memory); reopened when ``store_path`` changes."""
    with _stores_lock:
        store = _stores.get(session)
        if store is None or store.path != session.store_path:
            if store is not None:
                store.close()
            store = _stores[session] = RunStore(session.store_path)
        return store


def journal_for(store: RunStore, agent: str | None, model: str) -> DurableJournal:
    """The middleware that journals one notebook run's steps."""
    return DurableJournal(store, agent=agent, model=model)


def with_interrupted(frame: pd.DataFrame, session: _Session) -> pd.DataFrame:
    """``%agent runs``'s frame with the interrupted runs of dead kernels on top."""
    rows = interrupted_rows(run_store_of(session), {r.run_id for r in session.runs})
    if not rows:
        return frame
    import pandas as pd

    return pd.concat([pd.DataFrame(rows, columns=frame.columns), frame], ignore_index=True)


def _usd(value: Any) -> float | None:
    return None if value is None else float(value)


def interrupted_rows(store: RunStore, known: set[str]) -> list[dict[str, Any]]:
    """Rows (in ``%agent runs``'s columns) for the stored runs that were interrupted and not resumed."""
    rows = []
    for run in reversed(store.runs()):
        if run.status != "interrupted" or run.run_id in known:
            continue
        rows.append(
            {
                "run": f"interrupted {run.run_id[-8:]}",
                "status": "interrupted",
                "mode": None,
                "model": run.model,
                "thread_id": None,
                "model_calls": run.model_calls,
                "tool_calls": run.tool_calls,
                "input_tokens": run.usage.input_tokens,
                "output_tokens": run.usage.output_tokens,
                "total_tokens": run.usage.total_tokens,
                "cost_usd": _usd(run.cost_usd),
                "prompt": run.prompt[:80],
                "run_id": run.run_id,
            }
        )
    return rows


def interrupted_note(store: RunStore) -> str | None:
    """One line for the cell that opens the store: how many runs a dead kernel left, and how to resume them."""
    runs = [r for r in store.runs() if r.status == "interrupted"]
    if not runs:
        return None
    newest = runs[0].run_id
    many = f"{len(runs)} interrupted runs" if len(runs) > 1 else "1 interrupted run"
    return (
        f"tinyagents: {many} in {store.path} (%agent runs lists them; %agent resume {newest[-8:]} continues the newest)"
    )


def announce_interrupted(store: RunStore) -> None:
    """Print ``interrupted_note`` when there is something to say."""
    note = interrupted_note(store)
    if note:
        print(note)


def find_interrupted(store: RunStore, ref: str | None) -> StoredRun | None:
    """The interrupted run named by id or id suffix (4+ characters), or the newest when ``ref`` is ``None``.

    Named, a run that was stopped or failed can be continued too (one whose resume was stopped on
    its approval card, say); only interrupted runs are offered without a name.
    """
    runs = store.runs()
    if ref is None:
        return next((r for r in runs if r.status == "interrupted"), None)
    matches = [
        r
        for r in runs
        if r.status in ("interrupted", "cancelled", "failed")
        and (r.run_id == ref or (len(ref) >= 4 and r.run_id.endswith(ref)))
    ]
    return matches[0] if len(matches) == 1 else None


def missing_variables(messages: Sequence[Message], user_ns: Mapping[str, Any]) -> dict[str, str]:
    """Variables the run's ``run_code`` calls made that the (restarted) kernel no longer has: name -> code.

    Read from the journaled transcript: each ``run_code`` call that was answered without an error,
    the names its code binds at top level, those ``user_ns`` lacks.
    """
    failed = {m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.is_error}
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    missing: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            code = call.arguments.get("code") if isinstance(call.arguments, dict) else None
            if call.name != "run_code" or not isinstance(code, str) or call.id in failed or call.id not in answered:
                continue
            for name in bound_names(code):
                if name not in user_ns:
                    missing[name] = code
    return missing


def missing_note(missing: Mapping[str, str]) -> str:
    """What the resumed run's model is told about the variables a restart took away."""
    names = ", ".join(sorted(missing))
    return (
        f"The notebook's kernel restarted while this run was interrupted. Variables your earlier run_code calls "
        f"created no longer exist: {names}. Re-create them (run_code) before you use them."
    )


def offer_cells(shell: Any, missing: Mapping[str, str]) -> None:
    """Put the code that made the missing variables in a new cell below, for the person to run (or not)."""
    codes = list(dict.fromkeys(missing.values()))
    header = f"# re-creates {', '.join(sorted(missing))} (made by the interrupted run's run_code); run it if you want them back"
    if shell is not None and hasattr(shell, "set_next_input"):
        shell.set_next_input("\n\n".join([header, *codes]), replace=False)


def resumed_run(
    session: _ResumingSession,
    stored: StoredRun,
    plan: ResumePlan,
    *,
    tools: Sequence[Tool],
    note: str | None = None,
) -> NotebookRun:
    """A ``NotebookRun`` that continues ``stored`` (read as ``plan``) on the session (not started; ``present`` starts it).

    Its calls that need a decision (a cut-off call of a tool that is not idempotent, a pending
    approval) wait on the run's approval cards, as a ``%%agent`` run's do; where nobody can click
    (headless, or ``AgentMagics.approvals`` is ``deny``/``approve``) the setting decides at once:
    ``approve`` runs them again, anything else skips them with a note to the model.
    """
    store = run_store_of(session)
    model = session.resolve_model(stored.model)
    attended, policy = notebook_policy(session, model)  # the %%agent cell's: its approval timeout, token counting
    harness: AgentHarness[None] = AgentHarness(
        model=model,
        tools=list(tools),
        middleware=[DurableJournal(store, agent=stored.agent, model=stored.model)],
        policy=policy,
        system_prompt=session.system_prompt,
        name=stored.agent,
    )
    ctx = session.context.new_root(tags=("notebook",), steering=SteeringHandle(SteeringPolicy.allow_all()))
    ctx.budgets = session.budgets_for(ctx, model)
    stream = resume_streaming(harness, stored.run_id, store=store, context=ctx, note=note, plan=plan)
    stream.approvals.attended = attended
    resumed = f"resumed run {short_id(stored.run_id)} from step {stored.steps - 1}"
    notes = functools.partial(run_notes, session.context.costs, session.noted)
    run = NotebookRun(
        stream=stream,
        harness=harness,
        prompt=stored.prompt,
        model=stored.model or session.model_name(),
        name=stored.agent,
        launcher=lambda run, mode: session.start(run, mode=mode),
        notes=lambda run: [resumed, *notes(run)],
    )
    session.adopt(run)
    return run
