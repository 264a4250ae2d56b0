"""``NotebookSession``: the one per-kernel object that outlives cells, and ``get_session()``.

It holds the root ``RunContext`` every ``%%agent`` run derives from with ``new_root`` (so all runs
share one event sink, store, usage and cost ledger, while each keeps its own Stop), the current
conversation thread, the chat history and session state in a ``SQLiteStore``, an event journal
(``SQLiteEventJournal`` fed by a ``JournalSink``), the models and tools registered from Python, and
the run handles. Everything here is plain Python over the public harness API: the magics only parse
a cell and call these methods, and a script can do the same through ``get_session()``.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import wait
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, Unpack, overload

from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    ChatModel,
    ConfigurationError,
    ContextWindow,
    FunctionTool,
    Message,
    RunConfig,
    RunContext,
    SQLiteStore,
    SteeringHandle,
    ThreadId,
    Tool,
    ToolRegistry,
    TreeBudget,
    resolve_model,
    tool,
)
from tinyagents_nb.harness.memory import MemoryMiddleware, SessionState, ShortTermMemory, StoreChatHistory
from tinyagents_nb.harness.observability import AgentObservation, JournalSink, SQLiteEventJournal, events_to_dataframe
from tinyagents_nb.harness.providers import ModelRegistry
from tinyagents_nb.harness.steering import SteeringPolicy
from tinyagents_nb.harness.stores import StoreRegistry

from . import _display, _durable
from ._budget import notebook_budgets
from ._gauge import fallback_window, window_source
from ._handle import NotebookRun, RunMode
from ._loop import SessionLoop
from ._offline import OFFLINE_MODEL, OfflineModel
from ._pricing import run_notes
from ._rerun import RERUN
from ._run_policy import notebook_policy
from ._servers import SessionServers
from ._tool_options import ToolOptions
from ._tracing import SessionTracing

if TYPE_CHECKING:
    import pandas as pd

    from tinyagents_nb.notebook import NotebookAccess

__all__ = ["NotebookSession", "get_session"]

P = ParamSpec("P")
R = TypeVar("R")

_META = ("notebook", "session")
_TAGS = ("notebook",)


class NotebookSession:
    """A kernel's agent session: one root context, threads, history, tools, models and runs.

    Args:
        store_path: The SQLite file for history, session state and the event journal; ``None`` or
            ``""`` keeps them in memory for this kernel only.
        default_model: Used when a run names no model; ``None`` means the offline demo model.
        system_prompt: The default system prompt of runs that do not pass one.
        max_model_calls: The default cap on model calls per run.
        continue_thread: Continue the thread the store saved last (``False``: start a new one; the
            notebook's default store does, so Restart & Run All does not feed the model old turns).
    """

    def __init__(
        self,
        *,
        store_path: str | os.PathLike[str] | None = None,
        default_model: str | None = None,
        system_prompt: str | None = None,
        max_model_calls: int = 25,
        continue_thread: bool = True,
    ) -> None:
        self._continue_thread = continue_thread
        self.models = ModelRegistry()
        self.tools = ToolRegistry()
        self.default_model = default_model or None
        self.system_prompt = system_prompt or None
        self.max_model_calls = max_model_calls
        self.mcp = SessionServers()  # MCP servers every run gets (%agent mcp); they outlive reset, like tools
        self.tracing = SessionTracing()  # OpenTelemetry export of every run (%agent trace); outlives reset too
        self.max_cost_usd: float | None = None
        """Dollar cap of each run's tree (``None``: none)."""
        self.session_max_cost_usd: float | None = None
        """Dollar cap across every run of the session (``None``: none)."""
        self.approvals = "auto"
        """``auto`` (ask when the frontend can answer), ``ask``, ``deny`` or ``approve`` (see ``_budget``)."""
        self.approval_timeout_s: float | None = None  # None: wait for the click (RunPolicy's 300 s is for scripts)
        self.token_counting: Literal["estimate", "exact"] = "estimate"  # AgentMagics.token_counting
        self.can_answer: Callable[[], bool] = lambda: True
        """Whether whoever executes the current cell can click (the magics read the kernel's request)."""
        self.notebook: NotebookAccess | None = None
        """What the agent may see and do in the notebook (set by the extension in a kernel; see ``_notebook``)."""
        self._built: dict[str, ChatModel] = {}
        self._offline: ChatModel | None = None
        self.thread_listeners: list[Callable[[str | None], object]] = []  # told a dropped thread's id (None: all)
        self.loop = SessionLoop()
        """The loop thread every run executes on (so runs stream on while cells run synchronous code)."""
        self._open(store_path)

    def _open(self, store_path: str | os.PathLike[str] | None) -> None:
        path = os.fspath(store_path) if store_path else ":memory:"
        self.store_path = path
        self.store = SQLiteStore(path)
        self.journal = SQLiteEventJournal(path)
        self.history = StoreChatHistory(self.store)
        self.state = SessionState(self.store)
        self._memory = MemoryMiddleware(ShortTermMemory(self.history))
        saved = self.store.get(_META, "thread_id") if self._continue_thread else None
        thread = ThreadId(saved) if isinstance(saved, str) else ThreadId.new()
        self.context: RunContext[None] = RunContext(
            config=RunConfig(thread_id=thread, tags=_TAGS), stores=StoreRegistry(self.store)
        )
        """The root context: every run is ``context.new_root(...)`` and shares its sink, store and ledgers."""
        self.context.costs.warn_unknown = False  # a run's record says it in one line (run_notes), not a traceback
        self.noted: set[str] = set()  # what run_notes already said in this session (once each)
        self._runs: list[NotebookRun] = []
        self._rerun_stopped: dict[str, list[NotebookRun]] = {}
        self._agent_names: dict[str, str] = {}
        events = self.context.events
        # no token deltas: a write per token would dominate a stream; model/run.completed record every call
        journal_sink = JournalSink(self.journal, exclude_kinds={"model.delta"})
        self._detach = [
            events.add_listener(journal_sink),
            events.add_listener(self._on_event),
            self.tracing.attach(events),
        ]
        self.store.put(_META, "thread_id", str(thread))

    def _on_event(self, offset: int, event: AgentEvent) -> None:
        if event.kind == "subagent.started":
            self._agent_names[str(getattr(event, "child_run_id", ""))] = str(getattr(event, "name", ""))

    # ------------------------------------------------------------------ threads
    @property
    def thread_id(self) -> str:
        """The conversation follow-up runs continue."""
        return str(self.context.thread_id)

    def use_thread(self, thread_id: str | None = None) -> str:
        """Make ``thread_id`` (a fresh one when ``None``) the current thread; returns it.

        Raises:
            InvalidIdError: ``thread_id`` is empty or has whitespace.
        """
        thread = ThreadId.new() if thread_id is None else ThreadId(thread_id)
        self.context = self.context.with_config(thread_id=thread)
        self.store.put(_META, "thread_id", str(thread))
        return str(thread)

    def drop_thread(self, thread_id: str) -> None:
        """Forget a thread: its saved messages, and what was kept for it (an RLM thread's REPL stops)."""
        self.history.clear(thread_id)
        for listener in list(self.thread_listeners):
            listener(thread_id)

    def messages(self, thread_id: str | None = None) -> list[Message]:
        """The saved conversation of a thread (the current one by default)."""
        return self.history.load(thread_id or self.thread_id)

    # ------------------------------------------------------------------ models and tools
    def register_model(self, name: str, model: ChatModel | Callable[[], ChatModel]) -> None:
        """Make ``model`` (or a zero-argument factory) selectable as ``%%agent --model name``; re-registering replaces."""
        self.models.register(name, model, replace=True)
        self._built.pop(name.strip(), None)

    def resolve_model(self, name: str | None = None) -> ChatModel:
        """The model a run named ``name`` would use (the default model, else the offline demo model).

        Raises:
            ModelNotFound: ``name`` is neither registered nor ``provider:model``; the hint lists both.
            ConfigurationError: The provider's API key is not set (the hint names the variable).
        """
        spec = (name or self.default_model or "").strip()
        if not spec or spec == OFFLINE_MODEL:
            if self._offline is None:
                self._offline = OfflineModel()
            return self._offline
        if spec in self.models:
            return self.models.resolve(spec)
        model = self._built.get(spec)
        if model is None:  # one instance per spec, so its HTTP clients are reused across runs
            model = self._built[spec] = resolve_model(spec, registry=self.models)
        return model

    def model_name(self, name: str | None = None) -> str:
        """How a run's model is labelled: the name asked for, else the default, else the offline model."""
        return (name or self.default_model or OFFLINE_MODEL).strip()

    def register_tool(
        self, fn: Tool | Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """Offer ``fn`` to every run (unless ``--tools`` narrows it); re-registering a name replaces it.

        The function keeps seeing the notebook's globals; parameters typed as runtime handles
        (``RunContext``, stores, ...) are injected and hidden from the model, as with ``@tool``.

        Raises:
            ConfigurationError: ``fn`` is not a function (a class, a value) or cannot be described.
        """
        if isinstance(fn, Tool) and name is None and description is None:
            item: Tool = fn
        elif isinstance(fn, type) or not callable(fn):
            raise ConfigurationError(
                f"{fn!r} is not a function", hint="pass a def or async def with annotated parameters"
            )
        else:
            item = tool(fn, name=name, description=description)
        return self.tools.register(item, replace=True)

    @overload
    def tool(self, fn: Callable[P, R], /, **options: Unpack[ToolOptions]) -> FunctionTool[P, R]: ...
    @overload
    def tool(self, /, **options: Unpack[ToolOptions]) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]) -> Any:
        """``@session.tool`` or ``@session.tool(requires_approval=True, ...)``: every option of ``tool()``."""

        def register(function: Callable[..., Any]) -> FunctionTool[..., Any]:
            item = tool(function, **options)
            self.tools.register(item, replace=True)
            return item

        return register if fn is None else register(fn)

    def _select_tools(self, names: Sequence[str] | None) -> list[Tool]:
        if names is None:
            return list(self.tools)
        unknown = [n for n in names if n not in self.tools]
        if unknown:
            known = ", ".join(self.tools.names()) or "none"
            raise ConfigurationError(
                f"unknown tool(s): {', '.join(unknown)}",
                hint=f"registered tools: {known}; add one with %agent tools add <function>",
            )
        return [self.tools[n] for n in names]

    # ------------------------------------------------------------------ runs
    def new_run(
        self,
        prompt: str,
        *,
        model: str | None = None,
        system: str | None = None,
        tools: Sequence[str] | None = None,
        thread_id: str | None = None,
        new_thread: bool = False,
        max_model_calls: int | None = None,
        timeout_s: float | None = None,
        name: str | None = None,
        cell_key: str | None = None,
        extra_tools: Sequence[Tool] = (),
    ) -> NotebookRun:
        """Prepare a steerable run of ``prompt`` in the current (or given, or a new) thread; not started yet.

        ``tools=None`` offers every registered tool; ``extra_tools`` are offered besides (the notebook tools). ``run.start()`` (or awaiting it) runs it on
        the session's loop thread, queued behind the unfinished run of its thread if there is one.

        Raises:
            ConfigurationError: An empty prompt, an unknown tool, a bad limit, or a missing API key.
            ModelNotFound: The model is unknown.
        """
        if not prompt.strip():
            raise ConfigurationError("the prompt is empty", hint="write the prompt in the cell below %%agent")
        chat_model = self.resolve_model(model)
        tools, servers = self.mcp.split(tools)  # an MCP server's name in --tools selects its tools
        selected = self._select_tools(tools)
        attended, policy = notebook_policy(self, chat_model, max_model_calls=max_model_calls)
        harness: AgentHarness[None] = AgentHarness(
            model=chat_model,
            tools=[*selected, *extra_tools, *servers],
            middleware=[self._memory, _durable.journal_for(_durable.run_store_of(self), name, self.model_name(model))],
            policy=policy,
            system_prompt=system or self.system_prompt,
            name=name,
        )
        if new_thread or thread_id is not None:
            self.use_thread(thread_id)
        ctx = self.context.new_root(tags=_TAGS, steering=SteeringHandle(SteeringPolicy.allow_all()))
        ctx.budgets = self.budgets_for(ctx, chat_model)
        if timeout_s is not None:
            ctx = ctx.with_config(timeout_s=timeout_s)
        stream = harness.invoke_streaming(prompt, context=ctx)
        stream.approvals.attended = attended
        run = NotebookRun(
            stream=stream,
            harness=harness,
            prompt=prompt,
            model=self.model_name(model),
            name=name,
            cell_key=cell_key,
            launcher=lambda run, mode: self.start(run, mode=mode),
            notes=functools.partial(run_notes, self.context.costs, self.noted),
        )
        self._runs.append(run)
        return run

    def budgets_for(self, ctx: RunContext[Any], model: ChatModel) -> tuple[TreeBudget, ...]:
        """The dollar caps of a run the notebook starts: ``max_cost_usd`` over its tree, ``session_max_cost_usd`` over all."""
        unknown_price: Literal["allow", "refuse"] = "allow" if isinstance(model, OfflineModel) else "refuse"
        return notebook_budgets(ctx.run_id, self.max_cost_usd, self.session_max_cost_usd, unknown_price)

    def adopt(self, run: NotebookRun) -> None:
        self._runs.append(run)  # a run made elsewhere (%agent resume's) is one of this session's

    @property
    def runs(self) -> list[NotebookRun]:
        """Every run of this session, oldest first."""
        return list(self._runs)

    def active_runs(self) -> list[NotebookRun]:
        """Runs started and not yet finished, oldest first."""
        return [r for r in self._runs if r.mode is not None and not r.done]

    def find_run(self, ref: str | None = None) -> NotebookRun:
        """A run by ``--name`` (the newest with it), run id, id suffix (4+ characters) or index (``-1``).

        ``None`` means the latest active run, else the latest.

        Raises:
            LookupError: Nothing (or more than one run) matches.
        """
        runs = self._runs
        if not runs:
            raise LookupError("no agent runs yet in this session")
        if ref is None:
            active = self.active_runs()
            return active[-1] if active else runs[-1]
        matches = [r for r in runs if ref == r.run_id] or [r for r in runs if ref == r.name][-1:]  # newest of a name
        if not matches and ref.lstrip("-").isdigit() and len(ref) <= 4:
            matches = [runs[int(ref)]] if -len(runs) <= int(ref) < len(runs) else []
        elif not matches and len(ref) >= 4:
            matches = [r for r in runs if r.run_id.endswith(ref)]
        if len(matches) != 1:
            labels = ", ".join(r.label for r in runs[-5:])
            found = "no run" if not matches else f"{len(matches)} runs"
            raise LookupError(f"{found} matches {ref!r}; recent runs: {labels}")
        return matches[0]

    def predecessor(self, run: NotebookRun) -> NotebookRun | None:
        """The unfinished run that ``run`` would queue behind: the newest started run on its thread."""
        for other in reversed(self._runs):
            if other is not run and other.mode is not None and other.thread_id == run.thread_id:
                return None if other.done else other
        return None

    def start(self, run: NotebookRun, *, mode: RunMode) -> None:
        """Start ``run`` on the session's loop thread, queued behind the unfinished run on its thread."""
        run.launch(self.loop, mode=mode, after=self.predecessor(run))

    def interrupt_background(self) -> list[NotebookRun]:
        """Cancel every active background run (■ pressed while the kernel is idle); returns them."""
        runs = [r for r in self.active_runs() if r.mode == "background"]
        for run in runs:
            run.cancel("interrupted")
            say = getattr(run.view, "transient", None)  # in the run's output: its record replaces the line
            if say is not None:
                say(f"■ interrupt: stopping background run {run.label}")
        return runs

    def supersede(self, cell_key: str) -> list[NotebookRun]:
        """Cancel the active runs started by the same cell (it is being run again); returns them.

        Also returns, once, the runs of that cell a re-run already stopped while their cell waited
        (``stopped_by_rerun``): the new run is where that is said.
        """
        old = [r for r in self.active_runs() if r.cell_key == cell_key]
        for run in old:
            run.cancel(RERUN)
        earlier = self._rerun_stopped.pop(cell_key, [])
        return [*earlier, *(r for r in old if r not in earlier)]

    def stopped_by_rerun(self, run: NotebookRun) -> None:
        """``run`` was stopped because its cell was run again (its cell was waiting for it)."""
        if run.cell_key is not None:
            self._rerun_stopped.setdefault(run.cell_key, []).append(run)

    # ------------------------------------------------------------------ reports
    def runs_frame(self) -> pd.DataFrame:
        """A pandas DataFrame with one row per run."""
        return _durable.with_interrupted(_display.runs_frame(self._runs, self.context.usage, self.context.costs), self)

    def cost_frame(self) -> pd.DataFrame:
        """A pandas DataFrame of cost and tokens by run, agent (main or sub-agent) and model."""
        labels = {r.run_id: r.label for r in self._runs}
        return _display.cost_frame(self.context.costs.records, labels, self._agent_names)

    def history_frame(self, thread_id: str | None = None) -> pd.DataFrame:
        """A pandas DataFrame of a thread's saved messages."""
        return _display.history_frame(self.messages(thread_id))

    def journal_frame(self, run: NotebookRun | None = None) -> pd.DataFrame:
        """A pandas DataFrame of journaled events: one run's tree, or those of every run of this session.

        The store may hold earlier kernels' events too (it outlives the kernel); they are not this session's.
        """
        roots = [run] if run is not None else self._runs
        found: list[AgentObservation] = [o for r in roots for o in self.journal.read_from(0, root_run_id=r.run_id)]
        found.sort(key=lambda o: o.offset)  # runs of a session may overlap
        return events_to_dataframe(found)

    def context_window(self, thread_id: str | None = None) -> tuple[ContextWindow | None, str, str]:
        """``(window, model, source)`` for a thread: the last run's measured window, else an estimate of its history."""
        thread = thread_id or self.thread_id
        last = next((r for r in reversed(self._runs) if r.thread_id == thread), None)
        window = last.context.context_window if last is not None else None
        if last is not None and window is not None:  # the last run's model, never an older run's
            return window, last.model, window_source(window)
        model = last.model if last is not None else self.model_name()  # the thread's model, not the default
        return fallback_window(model, last, self.context.usage.records, lambda: self.messages(thread))

    # ------------------------------------------------------------------ lifecycle
    def reopen(self, store_path: str | os.PathLike[str] | None = None) -> None:
        """Cancel active runs and reopen on ``store_path`` (its saved thread continues); models and tools stay."""
        self.close()
        self._open(store_path)

    def reset(self, *, store_path: str | os.PathLike[str] | None = None) -> None:
        """Cancel active runs and start over: new root context, new thread, no runs; models and tools stay."""
        self.reopen(self.store_path if store_path is None else store_path)
        self.use_thread()

    def close(self) -> None:
        """Cancel active runs, detach from the event sink and close the store and journal."""
        active = self.active_runs()
        for run in active:
            run.cancel("the agent session was closed")
        if not self.loop.in_loop_thread():  # let them end (and show their records) before the stores close
            wait([r.future for r in active if r.future is not None], timeout=5.0)
        for detach in self._detach:
            detach()
        self._detach = []
        for listener in list(self.thread_listeners):
            listener(None)
        self.journal.close()
        self.store.close()

    def __repr__(self) -> str:
        return f"NotebookSession(thread_id={self.thread_id!r}, runs={len(self._runs)}, store={self.store_path!r})"


_current: NotebookSession | None = None
_current_lock = threading.Lock()


def get_session() -> NotebookSession:
    """This kernel's session, created on first use (``%load_ext tinyagents_nb`` creates it with its config)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = NotebookSession()
        return _current


def _replace_session(session: NotebookSession | None) -> NotebookSession | None:
    """Install ``session`` as the kernel's session (``None`` forgets it); returns the previous one."""
    global _current
    with _current_lock:
        previous, _current = _current, session
        return previous
