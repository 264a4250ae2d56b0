"""The names a piece of Python code binds at top level: what a restart takes away when it ran in a kernel."""

from __future__ import annotations

import ast

__all__ = ["bound_names"]


def bound_names(code: str) -> list[str]:
    """The names ``code``'s top level binds (assignments, imports, defs, loop and with targets).

    Code that does not parse binds nothing as far as a resumed run is told.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
            targets = [node.target]
        elif isinstance(node, ast.With | ast.AsyncWith):
            targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names += [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
        for target in targets:
            names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))
