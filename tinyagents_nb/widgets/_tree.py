"""The sub-agent tree: which runs belong to this dashboard, and the pane that shows them.

``AgentTree`` is plain state fed by the event listener. It doubles as the listener's filter: a
session shares one event sink across many runs, so the dashboard accepts an event only when its
``run_id`` is the root run or a child announced by a ``subagent.started`` event of a member.
``AgentTreePane`` renders the tree with each node's status and its subtree's tokens and cost,
read from the shared usage and cost trackers at flush time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from tinyagents_nb.harness import CostTracker, UsageTracker

from ._format import esc, format_int, format_usd
from ._style import status_class

__all__ = ["AgentNode", "AgentTree", "AgentTreePane"]

_REFRESH_S: Final = 0.25


@dataclass(slots=True, kw_only=True)
class AgentNode:
    """One run in the tree; ``status`` is running, completed, failed or cancelled."""

    run_id: str
    name: str
    parent: str | None
    depth: int
    status: str = "running"


class AgentTree:
    """The runs of one dashboard, keyed by run id; membership is never forgotten, display is bounded.

    Args:
        root_run_id: The dashboard's run.
        root_name: Its display name.
        max_nodes: How many nodes to keep for display; older finished ones are dropped first.
    """

    def __init__(self, root_run_id: str, root_name: str, *, max_nodes: int) -> None:
        self.root = root_run_id
        self.members: set[str] = {root_run_id}
        self.nodes: dict[str, AgentNode] = {
            root_run_id: AgentNode(run_id=root_run_id, name=root_name, parent=None, depth=0)
        }
        self.dropped = 0
        self.version = 0
        """Bumped on every change, so the pane re-renders only when something moved."""
        self._max = max_nodes

    def __contains__(self, run_id: object) -> bool:
        return run_id in self.members

    def __len__(self) -> int:
        return len(self.nodes) + self.dropped

    def add_child(self, parent: str, child: str, name: str, depth: int) -> None:
        self.members.add(child)
        self.nodes[child] = AgentNode(run_id=child, name=name, parent=parent, depth=depth)
        self.version += 1
        if len(self.nodes) > self._max:
            self._drop_one()

    def finish(self, run_id: str, status: str) -> None:
        node = self.nodes.get(run_id)
        if node is not None and node.status != status:
            node.status = status
            self.version += 1

    def name_of(self, run_id: str) -> str:
        node = self.nodes.get(run_id)
        return node.name if node is not None else "sub-agent"

    def caption(self, run_id: str) -> str:
        """A label for rows produced by a sub-agent (empty for the root run)."""
        return "" if run_id == self.root else self.name_of(run_id)

    def _drop_one(self) -> None:
        victims = [key for key, node in self.nodes.items() if key != self.root and node.status != "running"]
        victim = victims[0] if victims else next(key for key in self.nodes if key != self.root)
        del self.nodes[victim]
        self.dropped += 1

    def ordered(self) -> list[AgentNode]:
        """Depth-first from the root, siblings in start order; orphans (parent dropped) at the end."""
        children: dict[str | None, list[AgentNode]] = {}
        for node in self.nodes.values():
            children.setdefault(node.parent, []).append(node)
        out: list[AgentNode] = []
        stack = [self.nodes[self.root]]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(children.get(node.run_id, [])))
        seen = {node.run_id for node in out}
        out.extend(node for node in self.nodes.values() if node.run_id not in seen)
        return out


class AgentTreePane:
    """An ``HTML`` table of the tree: name (indented by depth), status, tokens and USD per subtree."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.widget: Any = widgets.HTML(value="")
        self._version = -1
        self._records = -1
        self._last = float("-inf")

    def render(self, tree: AgentTree, usage: UsageTracker, costs: CostTracker, *, now: float, force: bool) -> None:
        """Re-render when the tree changed, or when usage changed and 250 ms have passed (or ``force``)."""
        records = len(usage)
        stale_usage = records != self._records and now - self._last >= _REFRESH_S
        if not (force or tree.version != self._version or stale_usage):
            return
        self._version, self._records, self._last = tree.version, records, now
        rows = []
        for node in tree.ordered():
            tokens = usage.for_subtree(node.run_id).total_tokens
            usd = costs.for_subtree(node.run_id).total_usd
            indent = 16 * node.depth
            rows.append(
                f'<tr><td style="padding-left:{indent}px">{"└ " if node.depth else ""}'
                f"<b>{esc(node.name)}</b></td>"
                f'<td class="{status_class(node.status)}">{esc(node.status)}</td>'
                f'<td class="num">{format_int(tokens)}</td>'
                f'<td class="num">{esc(format_usd(usd))}</td></tr>'
            )
        note = ""
        if tree.dropped:
            note = f'<div style="opacity:.7;font-style:italic">… {tree.dropped:,} earlier agents not shown</div>'
        self.widget.value = (
            '<table class="ta-table"><thead><tr><th>agent</th>'
            '<th>status</th><th class="num">tokens</th><th class="num">USD</th>'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>{note}"
        )
