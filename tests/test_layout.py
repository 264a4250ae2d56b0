"""The package's shape: no import circles, and modules stay small (issue 12)."""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

import tinyagents_nb

PACKAGE = Path(tinyagents_nb.__file__).parent
MAX_LINES = 500
# Modules over the limit, each pinned at its size so it can only shrink (none left since issue 12).
OVERSIZED: dict[str, int] = {}


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm over the module graph: the groups of modules that import each other."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


def test_no_import_circle_even_through_type_checking_imports() -> None:
    """A circle hidden under ``if TYPE_CHECKING:`` is still a circle: the whole package has none."""
    graph = grimp.build_graph("tinyagents_nb", exclude_type_checking_imports=False, cache_dir=None)
    assert strongly_connected(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert strongly_connected(graph) == [["a.x", "a.y"]]


def test_modules_stay_under_the_size_limit() -> None:
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    grown = {name: n for name, n in over.items() if n > OVERSIZED.get(name, MAX_LINES)}
    assert grown == {}
    assert [name for name in OVERSIZED if sizes.get(name, 0) <= MAX_LINES] == []  # shrunk: drop it from OVERSIZED
