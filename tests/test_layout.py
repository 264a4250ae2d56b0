"""The package's shape: no import circles, modules stay small, and the rest imports it publicly (issue 12)."""

from __future__ import annotations

import ast
import json
import re
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


# ------------------------------------------------------------------------------------------ public imports
REPO = PACKAGE.parent
DOTTED = re.compile(r"\btinyagents_nb(?:\.\w+)+")
FROM_IMPORT = re.compile(r"\bfrom\s+(tinyagents_nb(?:\.\w+)*)\s+import\s+\(?([\w\s,]+)")


def _allow(reason: str, file: str, *modules: str) -> dict[str, str]:
    return {f"{file}::{module}": reason for module in modules}


# Docs, notebooks, tests and benchmarks import from public namespaces. What is left is white-box
# testing of true internals, pinned here per file and private module: the list may only shrink.
PRIVATE_IMPORTS_ALLOWED: dict[str, str] = {
    **_allow(
        "bounded_repr's equality with repr over random values (the environment test shows only its bound)",
        "tests/rlm/test_bounded_repr.py",
        "tinyagents_nb.rlm._repr",
    ),
    **_allow(
        "the `python -m tinyagents_nb` demo's pieces, beside its subprocess tests",
        "tests/test_demo.py",
        "tinyagents_nb._demo",
    ),
    **_allow(
        "edge cases of the schema validator and the lenient JSON finder, property-tested on their own: "
        "through OutputSpec a non-object schema is wrapped, so a `false` schema or a root `$ref` loop is out of reach",
        "tests/harness/test_structured.py",
        "tinyagents_nb.harness._structured",
        "tinyagents_nb.harness._structured_extract",
    ),
    **_allow(
        "the offline tiktoken loader (cache, checksum) and the per-message overhead constants",
        "tests/harness/test_tokens.py",
        "tinyagents_nb.harness._tokens",
    ),
    **_allow(
        "span merging under the streaming redactor, on cases a stream seldom produces",
        "tests/harness/observability/test_redact_stream.py",
        "tinyagents_nb.harness.observability._redact_stream",
    ),
    **_allow(
        "the connection hint for a remote host, which a test may not try to reach",
        "tests/harness/providers/test_openai.py",
        "tinyagents_nb.harness.providers._openai",
    ),
    **_allow(
        "the unattended-approval decision table, without a frontend",
        "tests/magics/test_approvals.py",
        "tinyagents_nb.magics._budget",
    ),
    **_allow(
        "headless detection and the record relay, driven without a kernel (tests/kernel/test_headless.py runs them for real)",
        "tests/magics/test_headless.py",
        "tinyagents_nb.magics._headless",
    ),
    **_allow(
        "the code the ipykernel-7 transformers generate (waiting %%agent cells, %agent wait lines) "
        "and which lines they leave alone, and the disabled stop button's text",
        "tests/magics/test_modes.py",
        "tinyagents_nb.magics._waiting",
    ),
    **_allow(
        "the shut-down hook's ordering race (interrupt, then shutdown_request), which a real kernel hits only "
        "now and then (tests/kernel/test_kernel_shutdown.py and the browser test run it for real)",
        "tests/magics/test_shutdown_hook.py",
        "tinyagents_nb.magics._shutdown",
    ),
    **_allow(
        "where the default store goes for each launcher's hint (JPY_SESSION_NAME, __session__, VS Code, the "
        "connection file), without starting JupyterLab, VS Code and a kernel for each",
        "tests/magics/test_default_store.py",
        "tinyagents_nb.magics._store_place",
    ),
    **_allow(
        "the session's RLM kernel: closed after the test, and never started when refused",
        "tests/magics/test_rlm_magic.py",
        "tinyagents_nb.magics._rlm",
    ),
    **_allow(
        "the formatters' rules case by case (rounding of sub-cent USD, durations, truncation marks); "
        "through a pane each case would need a run crafted to produce that number",
        "tests/widgets/test_panes.py",
        "tinyagents_nb.widgets._format",
    ),
    **_allow(
        "the theme palettes' contrast, colour by colour",
        "tests/widgets/test_style.py",
        "tinyagents_nb.widgets._style",
    ),
    **_allow(
        "the contrast of the colours a real browser computed",
        "tests/browser/test_dashboard_view.py",
        "tinyagents_nb.widgets._style",
    ),
}


def private_module(dotted: str) -> str | None:
    """``tinyagents_nb.x._y.name`` -> ``tinyagents_nb.x._y``; ``None`` when every part is public."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and part != "_" and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[: i + 1])
    return None


def private_references(text: str, *, python: bool) -> set[str]:
    """The private modules ``text`` imports: import statements, and dotted names in strings
    (``importorskip("tinyagents_nb.x._y")``, ``python -c`` code, ``monkeypatch.setattr`` targets)."""
    found: list[str] = []
    if python:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("tinyagents_nb"):
                found += [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [alias.name for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += DOTTED.findall(node.value)
    else:  # Markdown and notebook cells (which may hold magics): by pattern
        found += DOTTED.findall(text)
        for module, names in FROM_IMPORT.findall(text):
            found += [f"{module}.{name.strip()}" for name in names.split(",") if name.strip()]
    return {module for dotted in found if dotted.startswith("tinyagents_nb") and (module := private_module(dotted))}


def scanned_files() -> list[Path]:
    files = [
        *REPO.glob("tests/**/*.py"),
        *REPO.glob("benchmarks/**/*.py"),
        *REPO.glob("notebooks/*.py"),
        *REPO.glob("notebooks/*.ipynb"),
        *REPO.glob("docs/**/*.md"),
        REPO / "README.md",
    ]
    return sorted(path for path in files if path.resolve() != Path(__file__).resolve())


def file_text(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text(encoding="utf-8"))["cells"])
    return path.read_text(encoding="utf-8")


def _jupytext(path: Path) -> bool:
    return path.parent.name == "notebooks" and "format_name: percent" in path.read_text(encoding="utf-8")[:400]


def test_docs_notebooks_tests_and_benchmarks_import_only_public_modules() -> None:
    used = {
        f"{path.relative_to(REPO).as_posix()}::{module}"
        for path in scanned_files()
        # a jupytext percent notebook's prompt cells are not Python: it is read as text, like its .ipynb
        for module in private_references(file_text(path), python=path.suffix == ".py" and not _jupytext(path))
    }
    assert sorted(used - PRIVATE_IMPORTS_ALLOWED.keys()) == []  # import it from its public namespace instead
    assert sorted(PRIVATE_IMPORTS_ALLOWED.keys() - used) == []  # no longer used: drop it from the allowlist
    assert not [key for key in PRIVATE_IMPORTS_ALLOWED if key.startswith(("docs/", "notebooks/", "README"))]


def test_the_private_import_scanner_sees_each_form() -> None:
    code = (
        "import tinyagents_nb.harness._retry\n"
        "from tinyagents_nb.widgets._style import contrast_ratio\n"
        "from tinyagents_nb.harness import _tokens, events\n"
        "from tinyagents_nb.harness.runtime import arguments_sha256\n"
        "pytest.importorskip('tinyagents_nb.magics._waiting')\n"
        "subprocess.run(['python', '-c', 'import tinyagents_nb.rlm._prompt'])\n"
        "PREFIX = 'tinyagents_nb.harness._'\n"
        "from tinyagents_nb import __version__\n"
    )
    expected = {
        "tinyagents_nb.harness._retry",
        "tinyagents_nb.widgets._style",
        "tinyagents_nb.harness._tokens",
        "tinyagents_nb.magics._waiting",
        "tinyagents_nb.rlm._prompt",
    }
    assert private_references(code, python=True) == expected
    markdown = "```python\nfrom tinyagents_nb.harness import (\n    RunContext,\n    _events,\n)\n```\n"
    markdown += "see `tinyagents_nb.harness.providers._sse.SSEDecoder`"
    assert private_references(markdown, python=False) == {
        "tinyagents_nb.harness._events",
        "tinyagents_nb.harness.providers._sse",
    }
