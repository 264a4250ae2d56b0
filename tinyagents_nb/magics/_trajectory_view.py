"""A trajectory's static notebook view: ``text/markdown`` with a ``text/plain`` twin (IPython formatters).

Static on purpose: it is what the saved notebook keeps (no widget, no script), so it survives
save, nbconvert and GitHub. Everything shown came from a model or its code: code and outputs are
fenced (a fence longer than any backtick run inside, so nothing can close it), prose goes through
the package's ``safe_markdown``, and so does the whole document once more; the plain twin has its
terminal control sequences removed. ``%load_ext tinyagents_nb`` registers both as the display
formatters of ``Trajectory`` (the ``rlm`` family never imports the widgets' sanitiser itself), so
``Trajectory.load(path)`` as a cell's last line shows the view.

Sub-queries (``llm``) can number in the thousands: a step lists the first few and counts the rest.
``rlm_query`` children are shown in full under the step that started them (their heading names
their depth; the plain twin indents them).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from tinyagents_nb.rlm import Trajectory, TrajectoryRun, TrajectoryStep
from tinyagents_nb.widgets import safe_markdown, strip_controls

__all__ = ["register_trajectory_view", "trajectory_markdown", "trajectory_text", "unregister_trajectory_view"]


_TICKS = re.compile(r"`+")
_LISTED = 5  # sub-queries listed per step
_CLIP = 200
_OUTPUT = 1_500


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width] + f"\n… ({len(text) - width:,} more characters)"


def _fence(text: str, info: str = "") -> str:
    ticks = "`" * max(3, max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    return f"{ticks}{info}\n{text.rstrip(chr(10))}\n{ticks}"


def _usd(value: Decimal | None) -> str:
    return "cost unknown" if value is None else f"{value:.6f} USD"  # no "$": JupyterLab typesets $…$ as math


def _status(run: TrajectoryRun) -> str:
    return run.status + (f" ({run.limit})" if run.limit else "")


def _tree_tokens(trajectory: Trajectory, run: TrajectoryRun) -> int:
    total = run.usage.total_tokens
    for child in trajectory.children(run):
        total += _tree_tokens(trajectory, child)
    return total


class _Writer:
    """Builds the Markdown and the plain text side by side (``md`` pieces are already safe)."""

    def __init__(self, escape: object) -> None:
        self.md: list[str] = []
        self.plain: list[str] = []
        self.escape = escape

    def line(self, md: str, plain: str, depth: int) -> None:
        self.md.append(_quote(md, depth))
        self.plain.append(_indent(plain, depth))

    def code(self, text: str, info: str, depth: int, label: str = "") -> None:
        self.md.append(_quote(_fence(text, info), depth))
        self.plain.append(_indent(f"{label}{text.rstrip()}", depth))


def _quote(text: str, depth: int) -> str:
    """Markdown is not nested (a fence inside a block quote is read differently by each renderer)."""
    return text


def _indent(text: str, depth: int) -> str:
    pad = "    " * depth
    return "\n".join(pad + line for line in text.splitlines())


def trajectory_markdown(trajectory: Trajectory) -> str:
    """The sanitised Markdown view."""
    writer = _render(trajectory, _words)
    return safe_markdown("\n\n".join(writer.md))


def trajectory_text(trajectory: Trajectory) -> str:
    """The plain-text view, without terminal control sequences."""
    writer = _render(trajectory, lambda text: text)
    return strip_controls("\n".join(writer.plain))


def _task(run: TrajectoryRun) -> str:
    """An RLM run's task without the REPL's description that follows it in the opening message."""
    text = run.input
    if run.kind != "rlm":
        return text
    for lead in ("Task:\n", "Next task:\n"):
        if text.startswith(lead):
            end = text.rfind("\n\nThe REPL ")
            return text[len(lead) : end if end > 0 else len(text)]
    return text


def _words(text: str) -> str:
    """Untrusted prose as text that renders as itself (no HTML, emphasis, links or math)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]{}!|~$#])", r"\\\1", text)


def _render(trajectory: Trajectory, prose: object) -> _Writer:
    assert callable(prose)
    writer = _Writer(prose)
    root = trajectory.root
    runs = len(trajectory.runs)
    steps = sum(len(r.steps) for r in trajectory.runs)
    usage = trajectory.usage
    summary = (
        f"RLM trajectory · {_status(root)} · {runs:,} run{'s' * (runs != 1)} · {steps:,} code "
        f"step{'s' * (steps != 1)} · {usage.total_tokens:,} tokens · {_usd(trajectory.cost_usd)} · "
        f"{root.duration_s:.2f} s"
    )
    writer.line(f"**{prose(summary)}**", summary, 0)
    _run(trajectory, root, writer, prose, 0)
    return writer


def _run(trajectory: Trajectory, run: TrajectoryRun, writer: _Writer, prose: object, depth: int) -> None:
    assert callable(prose)
    by_id = {child.run_id: child for child in trajectory.children(run)}
    task = _clip(_task(run), 600)
    who = f"{run.agent or run.kind} at depth {run.depth}" if depth else run.agent or run.kind
    model = run.model or "?"
    writer.line(f"**{prose(who)}** ({prose(model)}): {prose(task)}", f"{who} ({model}): {task}", depth)
    shown: set[str] = set()
    for number, step in enumerate(run.steps, start=1):
        _step(trajectory, step, number, by_id, writer, prose, depth)
        shown.update(step.sub_calls)
    rest = [child for child in by_id.values() if child.run_id not in shown]
    if rest:
        _sub_calls(trajectory, rest, writer, prose, depth)
    if run.status == "completed":
        writer.line(f"**answer:** {prose(run.answer)}", f"answer: {run.answer}", depth)
    else:
        error = f"{run.error_type or 'error'}: {run.error or ''}".strip()
        writer.line(f"**{prose(_status(run))}:** {prose(error)}", f"{_status(run)}: {error}", depth)
        if run.partial_answer:
            partial = run.partial_answer
            writer.line(f"**partial answer:** {prose(partial)}", f"partial answer: {partial}", depth)
    tokens = f"{run.usage.input_tokens:,} in / {run.usage.output_tokens:,} out"
    own = f"{len(run.model_calls)} model call(s), {tokens}, {_usd(run.cost_usd)}, {run.duration_s:.2f} s"
    writer.line(f"*{prose(own)}*", own, depth)


def _step(
    trajectory: Trajectory,
    step: TrajectoryStep,
    number: int,
    by_id: dict[str, TrajectoryRun],
    writer: _Writer,
    prose: object,
    depth: int,
) -> None:
    assert callable(prose)
    state = "ok" if step.error_type is None else step.error_type
    head = f"step {number} ({state}, {step.duration_s:.2f} s)"
    writer.line(f"**{prose(head)}**", head, depth)
    if step.prose:  # the model's own words around its code: untrusted, shown as text
        said = _cut(step.prose, _OUTPUT)
        writer.line(prose(said), said, depth)
    writer.code(step.code, "python", depth)
    output = _cut(step.output, _OUTPUT) or "(no output)"
    writer.code(output, "text", depth, label="→ ")
    if step.prose_after:
        said = _cut(step.prose_after, _OUTPUT)
        writer.line(prose(said), said, depth)
    children = [by_id[run_id] for run_id in step.sub_calls if run_id in by_id]
    if children:
        _sub_calls(trajectory, children, writer, prose, depth)


def _sub_calls(
    trajectory: Trajectory, children: list[TrajectoryRun], writer: _Writer, prose: object, depth: int
) -> None:
    assert callable(prose)
    plain = [c for c in children if c.kind != "rlm"]
    if plain:
        failed = sum(c.status != "completed" for c in plain)
        tokens = sum(c.usage.total_tokens for c in plain)
        head = (
            f"{len(plain):,} sub-quer{'y' if len(plain) == 1 else 'ies'} ({failed:,} not completed, {tokens:,} tokens)"
        )
        writer.line(f"*{prose(head)}*", head, depth + 1)
        for child in plain[:_LISTED]:
            said = child.answer if child.status == "completed" else f"{child.status}: {child.error or ''}"
            text = f"{_clip(child.input, _CLIP)} → {_clip(said, _CLIP)}"
            writer.line(f"- {prose(text)}", f"- {text}", depth + 1)
        if len(plain) > _LISTED:
            more = f"… and {len(plain) - _LISTED:,} more"
            writer.line(prose(more), more, depth + 1)
    for child in children:
        if child.kind == "rlm":
            head = f"rlm_query child ({_tree_tokens(trajectory, child):,} tokens in its tree)"
            writer.line(f"*{prose(head)}*", head, depth + 1)
            _run(trajectory, child, writer, prose, depth + 1)


def _plain(trajectory: Trajectory, printer: Any, cycle: bool) -> None:
    printer.text(trajectory_text(trajectory))


def register_trajectory_view(ipython: Any) -> None:
    """Show ``Trajectory`` objects with these views in ``ipython``'s outputs."""
    formatters = ipython.display_formatter.formatters
    formatters["text/markdown"].for_type(Trajectory, trajectory_markdown)
    formatters["text/plain"].for_type(Trajectory, _plain)


def unregister_trajectory_view(ipython: Any) -> None:
    formatters = ipython.display_formatter.formatters
    for mime in ("text/markdown", "text/plain"):
        formatters[mime].pop(Trajectory, None)
