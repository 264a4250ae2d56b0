"""Notebook access in the magics: each run's notebook tools, and ``%agent access|hide|fix|explain``.

The mode comes from ``%%agent --access MODE``, else ``AgentMagics.notebook_access`` (default
``read``). A run with access gets the notebook tools for its mode and the guidance that notebook
content is data (see ``tinyagents_nb.notebook``). The session's first run says in one line what the
agent can see and how to turn it off; every ``auto`` run says that code runs without asking, in the
cell's output, so the saved notebook records it. ``%agent fix`` and ``%agent explain [N]`` are
prompts the extension writes, run as a waiting ``%%agent`` cell would be: on ipykernel 7.x their line
becomes an awaiting statement (``agent_wait_transformer``), so Stop and the approval cards stay live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from tinyagents_nb.harness import Tool
from tinyagents_nb.notebook import (
    ACCESS_MODES,
    AccessMode,
    NotebookAccess,
    Proposal,
    access_line,
    notebook_tools,
    quoted,
)

from ._command_host import CommandHost
from ._session import NotebookSession

if TYPE_CHECKING:
    from ._handle import RunMode

__all__ = [
    "NOTEBOOK_COMMANDS",
    "NOTEBOOK_PROMPTS",
    "Announcer",
    "NotebookHost",
    "prompt_async",
    "proposals_of",
    "run_access",
]


class NotebookHost(Protocol):
    """What ``run_access`` and the commands need from ``AgentMagics``."""

    notebook_access: str
    proposing: bool
    """Set while ``%agent fix`` runs: the run gets ``propose_cell`` whatever its mode."""

    @property
    def shell(self) -> Any: ...

    @property
    def session(self) -> NotebookSession: ...

    def run_prompt(self, line: str, prompt: str, *, propose: bool = False) -> None:
        """Run ``prompt`` as the body of a ``%%agent`` cell with this magic line."""

    async def agent_cell_async(self, line: str, cell: str) -> None:
        """The same as an awaiting ``%%agent`` cell (ipykernel 7.x)."""


def _current_msg_id(shell: Any) -> str | None:
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not hasattr(kernel, "get_parent"):
        return None
    return str(kernel.get_parent().get("header", {}).get("msg_id", "")) or None


class Announcer:
    """Says once per session, in the cell of the run whose agent first reads the notebook, what it can see.

    Called by every notebook tool; ``run`` is set once the run exists (the tools are built before it).
    A run whose model never calls a notebook tool prints nothing, so an agent that does not look says nothing.
    """

    def __init__(self, access: NotebookAccess, mode: str) -> None:
        self._access = access
        self._mode = mode
        self.run: Any = None

    def __call__(self) -> None:
        if self._access.announced:
            return
        self._access.announced = True
        line = access_line(self._mode, first=True)
        view = getattr(self.run, "view", None)
        if view is not None:
            view.note(line)
        else:
            print(line)


def run_access(
    host: NotebookHost, asked: str | None, *, mode: RunMode, rlm: bool, system: str | None, propose: bool = False
) -> tuple[list[Tool], str | None, Announcer | None]:
    """A run's notebook tools, its system prompt and its announcer (set its ``run``); prints the auto-mode line."""
    session = host.session
    access = session.notebook
    chosen = asked or host.notebook_access
    if chosen not in ACCESS_MODES:
        raise UsageError(f"--access must be one of {', '.join(ACCESS_MODES)}, got {chosen!r}")
    base = system or session.system_prompt
    if access is None or rlm or chosen == "off":
        return [], base, None
    access_mode: AccessMode = chosen
    announcer = Announcer(access, access_mode)
    if access_mode == "auto":  # every auto run says so in its cell, so the saved notebook records it
        access.announced = True
        print(access_line(access_mode, first=True))
    tools = notebook_tools(
        access,
        access_mode,
        insert_cells=mode == "waiting",
        cell_msg_id=_current_msg_id(host.shell),
        propose=propose,
        announce=announcer,
    )
    # The guidance rides in each result's fence (see ``quoted``), not the system prompt: a run that never
    # looks at the notebook sends exactly what it sent before notebook access existed.
    return tools, base, announcer


def proposals_of(run_id: str) -> list[Proposal]:
    """The cells a run proposed (for its record)."""
    from ._session import get_session

    access = get_session().notebook
    return access.proposed(run_id) if access is not None else []


# ------------------------------------------------------------------------------------------ commands
def _access(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    """``%agent access``: the mode in force and what it means."""
    if args:
        raise UsageError(
            '%agent access only shows the mode; set it with %config AgentMagics.notebook_access = "ask" '
            "or per run with %%agent --access ask"
        )
    mode = str(getattr(host, "notebook_access", "read"))
    print(access_line(mode, first=True))
    access = session.notebook
    if access is not None and access.hidden:
        print(f"hidden from the agent: {', '.join(sorted(access.hidden))}")


def _hide(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    """``%agent hide NAME…`` (``--show NAME…`` undoes it): variables the agent never sees."""
    access = session.notebook
    if access is None:
        raise UsageError("notebook access needs the extension loaded in a kernel (%load_ext tinyagents_nb)")
    show = bool(args) and args[0] == "--show"
    names = args[1:] if show else args
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise UsageError(f"not variable names: {', '.join(bad)}")
    if show:
        access.hidden.difference_update(names)
    else:
        access.hidden.update(names)
    shown = ", ".join(sorted(access.hidden)) or "nothing"
    print(f"hidden from the agent: {shown}")


def _fix_prompt(host: CommandHost, session: NotebookSession, args: list[str]) -> tuple[str, str, bool]:
    """``%agent fix [HINT…]``'s run: ``(magic line, prompt, propose)``."""
    access = session.notebook
    entry = access.log.last_error() if access is not None else None
    if access is None or entry is None:
        raise UsageError("there is no error to fix: %agent fix reads the last traceback of this kernel")
    label = f"cell [{entry.count}]" if entry.count is not None else "an earlier cell"
    source = entry.source or "(its source is not known)"
    data = quoted(
        access.masker.text(f"{entry.error_name} in {label}\nsource:\n{source}\ntraceback:\n{entry.error}"), "last error"
    )
    hint = " ".join(args).strip()
    prompt = (
        f"The notebook's last error, in {label}:\n{data}\n\n"
        "Propose a corrected version of that cell with propose_cell(code, note) (it is not run), then explain "
        "in one short paragraph what was wrong and what you changed. Use the notebook tools if you need to "
        "check a variable." + (f"\nThe person adds: {hint}" if hint else "")
    )
    return "--raw", prompt, True


def _explain_prompt(host: CommandHost, session: NotebookSession, args: list[str]) -> tuple[str, str, bool]:
    """``%agent explain [N]``'s run: explain cell N's output (the last cell before this one by default)."""
    access = session.notebook
    if access is None:
        raise UsageError("notebook access needs the extension loaded in a kernel (%load_ext tinyagents_nb)")
    if len(args) > 1 or (args and not args[0].lstrip("-").isdigit()):
        raise UsageError("%agent explain takes one execution count, e.g. %agent explain 12")
    current = _current_msg_id(_host(host).shell)
    cells = [e for e in access.log.entries() if e.msg_id != current]
    if args:
        number = int(args[0])
        cells = [e for e in cells if e.count == number]
        if not cells:
            raise UsageError(f"cell [{number}] is not among the cells run since the extension loaded")
    if not cells:
        raise UsageError("no cell to explain yet: run one first, or give its number (%agent explain 12)")
    cell = cells[-1]
    body = "".join(cell.outputs) + (f"\nerror ({cell.error_name}):\n{cell.error}" if cell.error else "")
    text = f"In [{cell.count}]:\n{cell.source}\n\noutput:\n{body or '(no output)'}"
    data = quoted(access.masker.text(text), f"cell {cell.count}")
    prompt = (
        f"Explain the output of notebook cell [{cell.count}] to the person: what it shows and what stands out. "
        f"Be brief.\n{data}"
    )
    return "--raw --access read", prompt, False


NOTEBOOK_PROMPTS = {"fix": _fix_prompt, "explain": _explain_prompt}
"""The commands that run a prompt the extension writes (``%agent fix``, ``%agent explain``)."""


def _prompt_command(host: CommandHost, session: NotebookSession, args: list[str], *, command: str) -> None:
    """``%agent fix|explain`` as a synchronous line (ipykernel 6.x pumps the kernel while it waits)."""
    line, prompt, propose = NOTEBOOK_PROMPTS[command](host, session, args)
    _host(host).run_prompt(line, prompt, propose=propose)


async def prompt_async(host: NotebookHost, command: str, args: list[str]) -> None:
    """``%agent fix|explain`` awaiting on the kernel's loop (ipykernel 7.x): Stop and approvals stay live."""
    line, prompt, propose = NOTEBOOK_PROMPTS[command](host, host.session, args)  # type: ignore[arg-type]  # AgentMagics is both
    host.proposing = propose
    try:
        await host.agent_cell_async(line, prompt)
    finally:
        host.proposing = False


def _host(host: CommandHost) -> NotebookHost:
    return host  # type: ignore[return-value]  # AgentMagics is both; the command table is typed on the narrower one


def _fix(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    _prompt_command(host, session, args, command="fix")


def _explain(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    _prompt_command(host, session, args, command="explain")


NOTEBOOK_COMMANDS = {"access": _access, "hide": _hide, "fix": _fix, "explain": _explain}
"""Merged into ``COMMANDS`` (``%agent access``, ``hide``, ``fix``, ``explain``)."""


def new_access(shell: Any, *, max_chars: int, code_timeout_s: float) -> NotebookAccess | None:
    """The kernel's notebook access (``None`` outside IPython)."""
    return NotebookAccess(shell, max_chars=max_chars, code_timeout_s=code_timeout_s) if shell is not None else None
