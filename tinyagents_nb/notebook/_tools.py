"""The notebook tools a run gets, by access mode: ordinary harness tools over the live kernel.

``read``: ``notebook_variables``, ``inspect_variable``, ``notebook_cells``, ``last_error``; ``ask`` and
``auto`` add ``run_code`` and ``propose_cell`` (``ask`` gates both behind the approval cards: a call
waits for Approve / Edit / Deny, and headless it is denied by the run's unattended policy). Every result
is masked (``Masker``), cut to the size bound and fenced as notebook data (``quoted``); PNG and JPEG
outputs ride along as image parts (bounded, see ``_images``), which only a model with vision receives.
Each call also
reports one progress line saying in words what it did ("looked at `df` (10,000 x 8)"), which the
dashboard shows as the call's row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from tinyagents_nb.harness import RunContext, Tool, ToolReporter, ToolResult, tool

from ._access import AccessMode, NotebookAccess, Proposal
from ._cells import CellEntry
from ._images import MAX_IMAGES, NotebookImage, image_blocks
from ._mask import quoted
from ._variables import clip, describe_variable, list_variables, shape_text, user_variables

__all__ = ["READ_TOOLS", "WRITE_TOOLS", "describe_call", "notebook_tools"]

READ_TOOLS: Final = ("notebook_variables", "inspect_variable", "notebook_cells", "last_error")
WRITE_TOOLS: Final = ("run_code", "propose_cell")
_SOURCE_CHARS: Final = 1_500


def _lines(code: str) -> str:
    count = len(code.strip().splitlines()) or 1
    return f"{count} line{'s' if count != 1 else ''}"


def describe_call(name: str, arguments: Any) -> str | None:
    """What a notebook tool call did, in words (``None`` for any other tool)."""
    args = arguments if isinstance(arguments, dict) else {}
    if name == "notebook_variables":
        return "listed the notebook's variables"
    if name == "inspect_variable":
        return f"looked at `{args.get('name', '?')}`"
    if name == "notebook_cells":
        return f"read the last {args.get('last', 5)} cells"
    if name == "last_error":
        return "read the last error"
    if name == "run_code":
        return f"ran {_lines(str(args.get('code', '')))}"
    if name == "propose_cell":
        return "proposed a cell"
    return None


def _summary(report: ToolReporter, text: str) -> None:
    report(text, data={"summary": True})


def _cell_text(entry: CellEntry, chars: int) -> str:
    label = f"[{entry.count}]" if entry.count is not None else "[earlier]"
    parts = [f"{label} In:", clip(entry.source.rstrip(), _SOURCE_CHARS, "source")]
    if entry.outputs:
        parts.append(f"{label} output:")
        parts.append("".join(entry.outputs).rstrip() + (f"\n… ({entry.cut:,} more characters)" if entry.cut else ""))
    if entry.error:
        parts.append(f"{label} error ({entry.error_name}):\n{entry.error}")
    return clip("\n".join(parts), chars, "cell")


class _Tools:
    """One run's notebook tools as bound methods (``tool`` reads their names, docstrings and parameters)."""

    def __init__(
        self,
        access: NotebookAccess,
        *,
        insert_cells: bool,
        cell_msg_id: str | None,
        announce: Callable[[], object] | None,
    ) -> None:
        self.access = access
        self.announce = announce or (lambda: None)
        self.shell = access.shell
        self.masker = access.masker
        self.insert_cells = insert_cells
        self.cell_msg_id = cell_msg_id

    def _namespace(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.shell is None:
            return {}, {}
        return self.shell.user_ns, getattr(self.shell, "user_ns_hidden", {})

    def _out(self, text: str, source: str) -> str:
        self.announce()
        return quoted(clip(self.masker.text(text), self.access.max_chars, "result"), source)

    @staticmethod
    def _with_images(text: str, images: list[NotebookImage]) -> str | ToolResult:
        """``text`` plus the newest ``MAX_IMAGES`` images as image parts (plain text when there are none)."""
        if not images:
            return text
        blocks = image_blocks(images)
        note = f"\n({len(blocks)} image{'s' if len(blocks) > 1 else ''} from the notebook follow as image parts"
        note += f"; {len(images) - len(blocks)} older left out)" if len(images) > len(blocks) else ")"
        return ToolResult(text=text + note, blocks=blocks)

    def notebook_variables(self, report: ToolReporter) -> str:
        """List the notebook's variables: type, shape, size; DataFrame columns.

        Args:
            report: Injected by the run (not a model argument).
        """
        ns, hidden = self._namespace()
        text = list_variables(ns, hidden, self.masker, self.access.max_chars)
        _summary(report, "listed the notebook's variables")
        return self._out(text, "kernel variables")

    def inspect_variable(self, name: str, report: ToolReporter) -> str:
        """Describe one variable (DataFrame: dtypes, nulls, head, describe()).

        Args:
            name: Variable name.
            report: Injected by the run (not a model argument).
        """
        ns, hidden = self._namespace()
        masker = self.masker
        mine = dict(user_variables({name: ns[name]}, hidden)) if name in ns else {}
        if name not in mine or masker.is_hidden(name):
            _summary(report, f"looked for `{name}` (not there)")
            why = "the person hid it" if masker.is_hidden(name) else "no such user variable"
            return f"cannot inspect {name!r}: {why}; call notebook_variables() for the list"
        value = mine[name]
        if masker.secret_name(name):
            if isinstance(value, str):
                masker.remember([value])
            _summary(report, f"looked at `{name}` (masked)")
            return f"`{name}`: {type(value).__name__} (value [MASKED]: its name looks secret)"
        shape = shape_text(value)
        _summary(report, f"looked at `{name}`" + (f" ({shape})" if shape else ""))
        return self._out(describe_variable(name, value, self.access.max_chars), f"variable {name}")

    def _recent(self, last: int) -> list[CellEntry]:
        log = self.access.log
        entries = [e for e in log.entries() if e.msg_id is None or e.msg_id != self.cell_msg_id]
        if len(entries) < last:
            early = [
                CellEntry(
                    count, source, outputs=[f"Out[{count}]: {clip(repr(value), 500, 'value')}\n"] if value else []
                )
                for count, source, value in log.history()
            ]
            entries = early[-(last - len(entries)) :] + entries if early else entries
        return entries[-last:]

    def notebook_cells(self, report: ToolReporter, last: int = 5) -> str | ToolResult:
        """Recent executed cells: source, outputs, errors.

        Args:
            report: Injected by the run (not a model argument).
            last: How many (1-50).
        """
        chosen = self._recent(max(1, min(int(last), 50)))
        _summary(report, f"read the last {len(chosen)} cell{'s' if len(chosen) != 1 else ''}")
        if not chosen:
            return "(no cells executed yet)"
        budget = self.access.max_chars
        pieces: list[str] = []
        images: list[NotebookImage] = []
        for entry in reversed(chosen):  # the newest cells matter most: they get the room first
            text = _cell_text(entry, max(400, budget // len(chosen)))
            if pieces and sum(map(len, pieces)) + len(text) > budget:
                pieces.append(f"… ({len(chosen) - len(pieces)} earlier cells left out)")
                break
            pieces.append(text)
            if len(images) < MAX_IMAGES:
                images[:0] = entry.images[-(MAX_IMAGES - len(images)) :]
        return self._with_images(self._out("\n\n".join(reversed(pieces)), "executed cells"), images)

    def last_error(self, report: ToolReporter) -> str | ToolResult:
        """The newest traceback and its cell's source.

        Args:
            report: Injected by the run (not a model argument).
        """
        entry = self.access.log.last_error()
        if entry is None:
            _summary(report, "looked for an error (none)")
            return "no cell has raised an error in this kernel"
        label = f"cell [{entry.count}]" if entry.count is not None else "an earlier cell"
        _summary(report, f"read the last error ({entry.error_name} in {label})")
        text = f"{entry.error_name} in {label}\nsource:\n{clip(entry.source, _SOURCE_CHARS, 'source')}\n"
        return self._with_images(self._out(text + f"traceback:\n{entry.error}", "last error"), entry.images)

    async def run_code(self, code: str, ctx: RunContext[Any], report: ToolReporter) -> str | ToolResult:
        """Run Python in the person's kernel namespace (variables persist); returns the output.

        Args:
            code: Cell code; the last expression's value is shown.
            ctx: Injected by the run (not a model argument).
            report: Injected by the run (not a model argument).
        """
        if self.shell is None:
            return "there is no kernel to run code in"
        token = ctx.cancellation
        images: list[NotebookImage] = []
        result = await self.access.runner.execute(
            code,
            timeout_s=self.access.code_timeout_s,
            should_stop=lambda: token.is_cancelled,
            on_interrupt=lambda: token.cancel("interrupted (■ while the agent's code ran)"),
            images=images,
        )
        status = "ok" if result.error_type is None else result.error_type
        ending = {"timeout": "stopped at the time limit", "stop": "stopped"}.get(result.stopped or "", status)
        _summary(report, f"ran {_lines(code)} ({ending}, {result.duration_s:.1f} s)")
        text = self._out(result.output.rstrip() or "(no output)", "run_code output") + f"\nstatus: {ending}"
        return self._with_images(text, images)

    def propose_cell(self, code: str, ctx: RunContext[Any], report: ToolReporter, note: str = "") -> str:
        """Add a code cell below for the person to review and run (not run).

        Args:
            code: The cell's code.
            ctx: Injected by the run (not a model argument).
            report: Injected by the run (not a model argument).
            note: One sentence for the person.
        """
        shell = self.shell
        run_id = str(ctx.config.root_run_id)
        # JupyterLab and Notebook 7 insert the first ``set_next_input`` payload of a reply and drop the
        # rest, so only a run's first proposal is sent: the record offers the others, and says which.
        first = not any(p.inserted for p in self.access.proposed(run_id))
        inserted = first and self.insert_cells and getattr(shell, "payload_manager", None) is not None
        if inserted:
            payload = {"source": "set_next_input", "text": code, "replace": False}
            shell.payload_manager.write_payload(payload, single=False)
        self.access.propose(run_id, Proposal(code=code, note=note, inserted=inserted))
        _summary(report, "proposed a cell" + (" (sent as a new cell below)" if inserted else " (in the record)"))
        where = (
            "sent to the notebook as a new cell below the agent's cell"
            if inserted
            else "listed in the run's record for the person to copy"
            + ("" if first else " (the notebook takes one new cell per run: the first proposed)")
        )
        return f"proposed a cell of {_lines(code)}: {where}; it has not run"


def notebook_tools(
    access: NotebookAccess,
    mode: AccessMode,
    *,
    insert_cells: bool,
    cell_msg_id: str | None = None,
    propose: bool = False,
    announce: Callable[[], object] | None = None,
) -> list[Tool]:
    """The tools for one run in ``mode`` (none for ``off``).

    Args:
        access: The kernel's notebook access.
        mode: The run's access mode.
        insert_cells: Whether ``propose_cell`` may send the cell to the frontend (the run's cell is still
            executing, so the payload rides on its reply); otherwise the record offers the code.
        cell_msg_id: The request of the cell that started the run (left out of ``notebook_cells``).
        propose: Offer ``propose_cell`` (ungated) in ``read`` mode too: ``%agent fix`` asked for a cell.
        announce: Called whenever a tool hands notebook content to the model (the session's first
            time says so in the cell).
    """
    if mode == "off":
        return []
    made = _Tools(access, insert_cells=insert_cells, cell_msg_id=cell_msg_id, announce=announce)
    tools: list[Tool] = [
        tool(made.notebook_variables),
        tool(made.inspect_variable),
        tool(made.notebook_cells),
        tool(made.last_error),
    ]
    gated = mode == "ask"
    if mode != "read":
        tools.append(tool(made.run_code, requires_approval=gated))
    if mode != "read" or propose:
        tools.append(tool(made.propose_cell, requires_approval=gated and not propose, in_thread=False))
    return tools
