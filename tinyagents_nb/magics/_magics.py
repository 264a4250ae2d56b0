"""``AgentMagics``: the ``%%agent`` cell magic, the ``%agent …`` line magics and their settings.

A thin adapter: parse the line (``magic_arguments``, so ``%agent?`` shows generated help), fill in
the prompt's ``{expr}`` fields, delegate to the kernel's ``NotebookSession``, display the result.
Bad input becomes a one-line ``UsageError`` with a hint, which IPython shows without a traceback.

Settings are traitlets, so ``%config AgentMagics.blocking = False`` and ``c.AgentMagics.…`` in a
config file work. Execution modes, and why (see ``_handle`` and ``_waiting``): by default a
``%%agent`` cell waits for its run, so its outputs stay in the cell and Run All, nbclient,
papermill and nbval act in order with no configuration; ``--background`` returns at once while the
run streams on the session's loop thread. ``AgentMagics.blocking = False`` or
``TINYAGENTS_NB_BLOCKING=0`` make background the default (``=1`` forces waiting). Executed headless
(nbclient, papermill, nbval: no frontend to update the cell later), a background cell waits and says
so, unless ``AgentMagics.headless_background = "keep"`` (see ``_headless``).

Re-running a cell whose earlier run is still going **stops** that run (cooperatively, with a
one-line notice) before starting the new one: the old dashboard then shows it as cancelled instead
of updating an output area the frontend has already discarded. Cells are told apart by the
frontend's cell id when it sends one, else by their source.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from IPython.core import magic, magic_arguments
from IPython.core.error import UsageError
from IPython.display import display as _display
from traitlets import Bool, Enum, Float, Int, Unicode, observe

from tinyagents_nb.harness import TinyAgentsError

from . import _map_cell
from ._budget import frontend_can_answer
from ._commands import COMMANDS, run_command, wait_command_async
from ._handle import NotebookRun, RunMode
from ._headless import RecordRelay, executed_headless
from ._interpolate import InterpolationError, interpolate
from ._notebook import NOTEBOOK_PROMPTS, new_access, prompt_async, run_access
from ._present import present
from ._rerun import RerunWatch
from ._resume_cell import resume_command_async
from ._rlm import output_class, rlm_starter
from ._run_settings import RunSettings
from ._session import NotebookSession, _replace_session, get_session
from ._store_place import StoreSettings, session_store_path
from ._usage import parse_line, positive_int, usage_error
from ._waiting import Delivery, interrupts_counted, said_in, sync_delivery, wait_async, wait_sync

__all__ = ["BLOCKING_ENV", "AgentMagics", "usage_error"]

BLOCKING_ENV = "TINYAGENTS_NB_BLOCKING"
"""An override of ``AgentMagics.blocking``: ``0`` makes background the default, ``1`` waiting."""
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_F = TypeVar("_F", bound=Callable[..., Any])


class _Decorator(Protocol):
    def __call__(self, fn: _F, /) -> _F: ...


# IPython's argument helpers are untyped and its magic markers return a union; give them their real types once.
_magic_arguments: Callable[[str], _Decorator] = magic_arguments.magic_arguments
_argument: Callable[..., _Decorator] = magic_arguments.argument
_cell_magic = cast("Callable[[str], _Decorator]", magic.cell_magic)
_line_magic = cast("Callable[[str], _Decorator]", magic.line_magic)
display: Callable[[Any], None] = _display


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()[:16]


@magic.magics_class
class AgentMagics(magic.Magics, StoreSettings, RunSettings):
    """Agent runs in notebook cells: ``%%agent`` runs the cell as a prompt, ``%agent`` inspects and controls."""

    default_model = Unicode(
        "",
        help='Model for runs without --model: a registered name or "provider:model" (e.g. "openai:gpt-4o-mini"); '
        "empty means the offline demo model.",
    ).tag(config=True)
    system_prompt = Unicode("", help="System prompt for runs without --system.").tag(config=True)
    blocking = Bool(
        True,
        help="Whether %%agent cells wait for their run (the default); False makes --background the default. "
        "The TINYAGENTS_NB_BLOCKING environment variable (0 or 1) overrides it.",
    ).tag(config=True)
    headless_background = Enum(
        ("wait", "keep"),
        "wait",
        help="Background cells executed headless (nbclient, nbconvert, papermill, nbval), where no frontend "
        "updates a cell after it ended: wait for their run (the default, so the record stays in the cell), or "
        "keep them in the background (a notebook that controls its runs from later cells; await each run or "
        "%agent wait before the notebook ends, or its record is lost).",
    ).tag(config=True)
    throttle_hz = Float(10.0, min=0.5, max=60.0, help="Dashboard updates per second while a run streams.").tag(
        config=True
    )
    max_model_calls = Int(25, min=1, help="Default cap on model calls per run (--max-model-calls overrides).").tag(
        config=True
    )
    max_cost_usd = Float(
        None, allow_none=True, min=0.0, help="Dollar cap of each run's tree (sub-agents included); None: no cap."
    ).tag(config=True)
    session_max_cost_usd = Float(
        None, allow_none=True, min=0.0, help="Dollar cap across every run of the session; None: no cap."
    ).tag(config=True)
    approvals = Enum(
        ("auto", "ask", "deny", "approve"),
        "auto",
        help="Tool calls that need approval: ask when the frontend can click (auto), always ask, or decide "
        "every one at once (deny, approve); auto denies under nbclient, papermill and nbval.",
    ).tag(config=True)
    approval_timeout = Float(
        None, allow_none=True, min=0.0, help="Seconds a tool call waits for a click; None or 0 (default): no limit."
    ).tag(config=True)
    notebook_access = Enum(
        ("read", "ask", "auto", "off"),
        "read",
        help="What %%agent runs may do in this notebook: read its variables, cells and errors (read), also run "
        "code and propose cells after a click (ask) or without asking (auto), or nothing (off). "
        "%%agent --access MODE overrides it for one run.",
    ).tag(config=True)
    notebook_max_chars = Int(4_000, min=200, help="The size bound of every notebook tool result, in characters.").tag(
        config=True
    )
    notebook_code_timeout = Float(
        60.0, min=0.1, help="Seconds the agent's run_code may take before it is interrupted."
    ).tag(config=True)
    otel_endpoint = Unicode(
        "",
        help="OTLP/HTTP collector (e.g. http://127.0.0.1:4318) that receives every run as OpenTelemetry GenAI "
        "spans, like %agent trace otlp URL; empty exports nothing. Needs the [otel] extra.",
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        self._ready = False
        super().__init__(shell=shell, **kwargs)
        self._cell: tuple[str | None, str] = (None, "")
        self.relay = RecordRelay()
        self.reruns = RerunWatch(lambda run: self.session.stopped_by_rerun(run))
        session = _replace_session(None)
        path, default = session_store_path(self.store_path, shell), self.store_path is None
        if session is None:
            session = NotebookSession(store_path=path, continue_thread=not default)
        elif session.store_path != path and (not default or session.store_path == ":memory:"):
            session.reopen(path)  # made by get_session() before the extension was loaded
            if default:
                session.use_thread()
        _replace_session(session)
        self.open_store(session)
        self.apply_run_settings(session)
        self._apply(session, only_set=True)
        self.proposing = False
        if session.notebook is None:
            session.notebook = new_access(
                shell, max_chars=self.notebook_max_chars, code_timeout_s=self.notebook_code_timeout
            )
        if self.otel_endpoint:
            session.tracing.start(self.otel_endpoint)
        self._ready = True

    @property
    def session(self) -> NotebookSession:
        return get_session()

    def _apply(self, session: NotebookSession, *, only_set: bool = False) -> None:
        if self.default_model or not only_set:
            session.default_model = self.default_model or None
        if self.system_prompt or not only_set:
            session.system_prompt = self.system_prompt or None
        session.max_model_calls = self.max_model_calls
        session.max_cost_usd, session.session_max_cost_usd = self.max_cost_usd, self.session_max_cost_usd
        session.approvals, session.can_answer = self.approvals, lambda: frontend_can_answer(self.shell)
        session.approval_timeout_s = self.approval_timeout or None

    @observe(
        "default_model", "system_prompt", "max_model_calls", "max_cost_usd", "session_max_cost_usd", "approvals",
        "approval_timeout",
    )  # fmt: skip
    def _settings_changed(self, change: Any) -> None:
        if self._ready:
            self._apply(self.session)

    @observe("notebook_max_chars", "notebook_code_timeout")
    def _notebook_settings_changed(self, change: Any) -> None:
        access = self.session.notebook if self._ready else None
        if access is not None:
            access.max_chars, access.code_timeout_s = self.notebook_max_chars, self.notebook_code_timeout

    @observe("otel_endpoint")
    def _otel_endpoint_changed(self, change: Any) -> None:
        if self._ready:
            tracing = self.session.tracing
            if self.otel_endpoint:
                tracing.start(self.otel_endpoint)
            else:
                tracing.stop()
            print(tracing.describe())

    # ------------------------------------------------------------------ cell identity (re-run detection)
    def pre_run_cell(self, info: Any) -> None:
        """``shell.events`` hook: remember the cell being run (its frontend id, when sent, and source)."""
        self._cell = (getattr(info, "cell_id", None), str(getattr(info, "raw_cell", "") or ""))
        kernel = getattr(self.shell, "kernel", None)
        if kernel is not None and hasattr(kernel, "get_parent"):
            self.relay.cell_started(kernel.get_parent())

    def post_run_cell(self, result: Any) -> None:
        """``shell.events`` hook: the cell ended (a late record now waits for the next one)."""
        self.relay.cell_finished()

    def _cell_key(self, line: str, cell: str) -> str:
        cell_id, raw = self._cell
        if raw and cell.strip() in raw and line.strip() in raw:
            return f"cell:{cell_id}" if cell_id else f"source:{_digest(raw.strip())}"
        return f"source:{_digest(line.strip() + chr(10) + cell.strip())}"

    # ------------------------------------------------------------------ %%agent
    @_magic_arguments("agent")
    @_argument("--model", "-m", help="a registered model name or provider:model (default: AgentMagics.default_model)")
    @_argument("--system", "-s", help="the system prompt for this run")
    @_argument("--tools", "-t", help="comma-separated tool names to offer, or 'none' (default: every registered tool)")
    @_argument("--thread", help="run in this conversation thread (it becomes the current one)")
    @_argument("--new-thread", action="store_true", help="start a new conversation thread")
    @_argument("--max-model-calls", type=positive_int, metavar="N", help="cap on model calls for this run (>= 1)")
    @_argument("--timeout", type=float, metavar="S", help="wall-clock budget in seconds")
    @_argument("--wait", action="store_true", help="the cell waits for the run (the default unless configured)")
    @_argument(
        "--background",
        action="store_true",
        help="the cell returns at once; the run streams on while other cells run "
        "(executed headless, it waits: see AgentMagics.headless_background)",
    )
    @_argument("--name", "-n", metavar="VAR", help="also bind the run handle to this variable")
    @_argument("--raw", action="store_true", help="send the cell as is, without {expr} interpolation")
    @_argument(
        "--rlm",
        nargs="?",
        const="kernel",
        choices=["kernel", "local"],
        help="run as a recursive language model in a Python REPL: a child kernel (default) or local (in-process)",
    )
    @_argument(
        "--access",
        choices=["read", "ask", "auto", "off"],
        help="what this run may do in the notebook (default: AgentMagics.notebook_access)",
    )
    @_argument("--context", metavar="NAMES", help="with --rlm: comma-separated notebook variables to put in the REPL")
    @_argument("--sub-model", metavar="NAME", help="with --rlm: the model behind llm()/llm_batch() (default: --model)")
    @_argument(
        "--map", metavar="NAME", help="run the body, a {{column}} template, over every row of the DataFrame NAME"
    )
    @_argument("--into", metavar="VAR", help="with --map: bind the result frame to VAR (default: NAME_result)")
    @_argument("--output", metavar="CLASS", help="with --map: a model whose fields are columns; --rlm: the answer's")
    @_argument("--executor", metavar="E", help="with --map: local (default), batch, ray or dask")
    @_argument("--concurrency", type=positive_int, metavar="N", help="with --map: rows in flight at once (16)")
    @_argument("--budget", type=float, metavar="USD", help="with --map: stop before the map spends more than this")
    @_cell_magic("agent")
    def agent_cell(self, line: str, cell: str) -> None:
        """Run the cell body as a prompt for an agent, with a live dashboard.

        The body may use {name} and {expression} from the notebook ({{ and }} are literal braces).
        Follow-up cells continue the same conversation thread unless --new-thread. The cell waits
        for the run (Stop, Pause, Resume and the steer box work meanwhile; ■ stops it), and the run
        leaves its transcript and summary in the cell. With --background the cell returns at once.
        The run handle is bound to _agent (and to --name): await it, or call .cancel(), .pause(),
        .resume(), .steer(text) on it.
        """
        if _map_cell.is_map(line):
            mapped = self._start_map(line, cell)
            _map_cell.wait_map_sync(mapped, delivery=sync_delivery(self.shell))
            _map_cell.finish_map(mapped, self.shell)
            return
        with interrupts_counted() as interrupts:  # a ■ while the run starts is kept for the wait (or the run)
            run, mode = self._launch(line, cell, delivery=sync_delivery(self.shell))
            if mode != "waiting":
                if interrupts.count:
                    run.cancel("interrupted")
                return
            future = run.future
            assert future is not None
            with self.reruns.watching(self.shell, self._cell[0], run):
                pumping = lambda: self.reruns.intercepting(self.shell)  # noqa: E731
                wait_sync(
                    run,
                    future,
                    delivery=sync_delivery(self.shell),
                    say=said_in(run),
                    work=self._main_thread_work,
                    pumping=pumping,
                    interrupts=interrupts,
                )

    def _main_thread_work(self) -> None:
        """Run the agent's code queued for the main thread (a waiting cell calls this as it waits)."""
        access = self.session.notebook
        if access is not None:
            access.runner.drain()

    async def agent_cell_async(self, line: str, cell: str) -> None:
        """``%%agent`` as an awaiting cell (ipykernel 7.x): the kernel handles clicks while it waits."""
        if _map_cell.is_map(line):
            mapped = self._start_map(line, cell)
            await _map_cell.wait_map_async(mapped)
            _map_cell.finish_map(mapped, self.shell)
            return
        run, mode = self._launch(line, cell, delivery="async")
        if mode == "waiting":
            future = run.future
            assert future is not None
            with self.reruns.watching(self.shell, self._cell[0], run):
                await wait_async(run, future, say=said_in(run))

    def _start_map(self, line: str, cell: str) -> _map_cell.MapCell:
        args = parse_line(self.agent_cell, line, commands=COMMANDS)
        return _map_cell.start_map(self.session, self.shell, args, cell, widgets=self.shell is not None)

    def waits(self, argv: list[str]) -> bool:
        """Whether a ``%%agent`` line (split) runs in waiting mode; ``False`` for a line that does not parse."""
        try:
            args = self.agent_cell.parser.parse_args(argv)  # type: ignore[attr-defined]
        except (UsageError, SystemExit):
            return False
        return self._mode(args) == "waiting"

    def _mode(self, args: argparse.Namespace) -> RunMode:
        """The mode the cell runs in: what it asked for, unless background would lose its record."""
        asked = self._asked_mode(args)
        if asked == "background" and self.headless_background == "wait" and executed_headless(self.shell):
            return "waiting"
        return asked

    def _asked_mode(self, args: argparse.Namespace) -> RunMode:
        if args.wait and args.background:
            raise UsageError("--wait and --background cannot be combined")
        if args.wait or args.background:
            return "waiting" if args.wait else "background"
        env = os.environ.get(BLOCKING_ENV, "").strip().lower()
        default = True if env in _TRUE else False if env in _FALSE else self.blocking
        return "waiting" if default else "background"

    def _launch(self, line: str, cell: str, *, delivery: Delivery) -> tuple[NotebookRun, RunMode]:
        """Parse, create, show and start the run; the caller waits for it or not."""
        args = parse_line(self.agent_cell, line, commands=COMMANDS)
        if args.thread and args.new_thread:
            raise UsageError("--thread and --new-thread cannot be combined")
        if args.name is not None and not args.name.isidentifier():
            raise UsageError(f"--name {args.name!r} is not a valid Python variable name")
        mode = self._mode(args)
        foreground = mode != self._asked_mode(args)
        try:
            prompt = cell if args.raw else interpolate(cell, self.shell.user_ns if self.shell else {})
        except InterpolationError as exc:
            raise UsageError(str(exc)) from None
        prompt = prompt.strip()
        if not prompt:
            raise UsageError("the prompt is empty: write it in the cell body below the %%agent line")
        tools = None if args.tools is None else [t.strip() for t in args.tools.split(",") if t.strip()]
        key = self._cell_key(line, cell)
        session = self.session
        notebook_tools, system, announcer = run_access(
            self, args.access, mode=mode, rlm=args.rlm is not None, system=args.system, propose=self.proposing
        )
        if tools is not None:  # --tools names exactly what the run gets: notebook tools only when listed
            offered = {t.name for t in notebook_tools}
            notebook_tools = [t for t in notebook_tools if t.name in tools]
            tools = [n for n in tools if n not in offered] or ["none"]
        extra = {"extra_tools": notebook_tools} if notebook_tools else {}
        try:
            start = _starter(self, session, args)
            run = start(
                prompt,
                model=args.model,
                system=system,
                **extra,
                tools=[] if tools == ["none"] else tools,
                thread_id=args.thread,
                new_thread=args.new_thread,
                max_model_calls=args.max_model_calls,
                timeout_s=args.timeout,
                name=args.name,
                cell_key=key,
            )
        except TinyAgentsError as exc:
            raise usage_error(exc) from None
        if announcer is not None:
            announcer.run = run
        for old in session.supersede(key):
            print(f"stopped the earlier run {old.label} of this cell before running it again")
        self._bind(run, args.name)
        present(self, session, run, mode=mode, delivery=delivery, title=args.name, foreground=foreground)
        return run, mode

    def run_prompt(self, line: str, prompt: str, *, propose: bool = False) -> None:
        """Run ``prompt`` as a ``%%agent`` cell with this magic line (``%agent fix`` and ``explain``)."""
        self.proposing = propose
        try:
            self.agent_cell(line, prompt)
        finally:
            self.proposing = False

    def _bind(self, run: NotebookRun, name: str | None) -> None:
        if self.shell is None:
            return
        self.shell.user_ns["_agent"] = run
        if name:
            self.shell.user_ns[name] = run

    # ------------------------------------------------------------------ %agent
    @_magic_arguments("agent")
    @_argument("command", nargs="?", default="status", choices=sorted(COMMANDS), metavar="COMMAND", help="see below")
    @_argument("args", nargs=argparse.REMAINDER, help="the command's arguments")
    @_line_magic("agent")
    def agent_line(self, line: str) -> Any:
        """Inspect and control the notebook's agent session.

        status              the session: thread, default model, runs, usage, tools
        runs                a table of this session's runs
        stop [RUN|all]      cancel the latest active run (or RUN, or every active run)
        wait [RUN|all] [--timeout S]  wait for every active run (or RUN) to end; ■ stops waiting
        pause [RUN]         hold a run before its next model call; resume [RUN] releases it
        resume [RUN]        else continue a run a dead kernel interrupted (%agent runs lists them)
        steer [-r RUN] TEXT add a user message the run's next model call sees
        redirect [-r RUN] TEXT  change a run's course with a system instruction
        cost                cost and tokens by run, agent and model
        context [THREAD]    the context-window gauge of a thread
        history [THREAD]    a thread's saved messages
        thread [new|ID|drop ID]  show, start, switch or drop (forget) a conversation thread
        rlm [close THREAD]  the RLM thread sessions; close one (its REPL stops)
        trajectory [RUN] [PATH]  an RLM run's trajectory: shown, or saved as JSON Lines
        model [NAME]        show or set the default model
        models              known providers (with whether their key is set) and registered models
        tools [add F…|remove NAME…]  list, add (notebook functions) or remove tools
        journal [RUN]       the event journal (one run's tree, or everything)
        mcp [list|add NAME -- CMD ARGS…|add NAME --url URL|remove NAME]  MCP servers whose tools runs get
        reset               cancel active runs and start a fresh session (models and tools stay)
        access              what the agent may see and do in this notebook (notebook_access)
        hide NAME…          never show these variables to the agent (hide --show NAME… undoes it)
        fix [HINT…]         propose a corrected cell for the last error, with a short explanation
        explain [N]         explain cell N's output (default: the previous cell)

        RUN is a --name, a run id (or its last characters) or an index such as -1.
        """
        args = parse_line(self.agent_line, line, commands=COMMANDS)
        try:
            return run_command(self, args.command, list(args.args))
        except (TinyAgentsError, LookupError) as exc:
            raise usage_error(exc) from None

    async def agent_wait_async(self, line: str) -> Any:
        """``%agent wait|fix|explain|resume …`` as an awaiting statement (ipykernel 7.x): buttons work while it waits."""
        args = parse_line(self.agent_line, line, commands=COMMANDS)
        try:
            if args.command in NOTEBOOK_PROMPTS:  # %agent fix / explain: their run waits as an awaiting cell does
                return await prompt_async(self, args.command, list(args.args))
            if args.command == "resume":  # an interrupted run's resumption waits as an awaiting cell does
                return await resume_command_async(self, list(args.args))
            if args.command != "wait":  # the transformer only sends these lines; anything else runs as usual
                return run_command(self, args.command, list(args.args))
            await wait_command_async(self, list(args.args))
        except (TinyAgentsError, LookupError) as exc:
            raise usage_error(exc) from None
        return None


def _starter(magics: AgentMagics, session: NotebookSession, args: argparse.Namespace) -> Callable[..., NotebookRun]:
    """``session.new_run``, or its ``--rlm`` stand-in (see ``_rlm``)."""
    if args.rlm is None:
        if args.context is not None or args.sub_model is not None:
            raise UsageError("--context and --sub-model need --rlm")
        return session.new_run
    ns = magics.shell.user_ns if magics.shell else {}
    typed = output_class(args.output, ns)
    return rlm_starter(session, args.rlm, context=args.context, sub_model=args.sub_model, user_ns=ns, output_type=typed)
