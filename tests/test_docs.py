"""Every example in the docs runs, and every relative link in them resolves.

Each Markdown page under ``docs/`` (and ``README.md``) is one test. Its fenced ``python`` blocks run
in order, in one module namespace, inside one event loop, so a page reads like a notebook: later
blocks use names defined earlier, and top-level ``await`` works (each block is compiled with
``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT``). A block fenced as ``python no-run`` is only compiled (it needs a
real provider or key). Code is compiled against the page's own line numbers, so a failure points at
the Markdown line. Pages run offline, in a temporary working directory, with warnings as errors.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([*DOCS.rglob("*.md"), ROOT / "README.md"])

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>.*)$")
_LINK = re.compile(r"(?<!\!)\[(?:[^\]\\]|\\.)*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_SKIP_SCHEMES = ("http://", "https://", "mailto:")
BLOCK_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Block:
    """One fenced code block: its info-string words, first code line (1-based) and source."""

    info: tuple[str, ...]
    line: int
    source: str

    @property
    def is_python(self) -> bool:
        return bool(self.info) and self.info[0] in ("python", "py")

    @property
    def runs(self) -> bool:
        return self.is_python and "no-run" not in self.info[1:]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def parse_blocks(text: str, where: str) -> list[Block]:
    """The fenced blocks of a Markdown text; an unclosed fence or an indented python fence is an error.

    Indented fences (inside list items) are rejected for python, because their examples would
    silently not run.
    """
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        info = tuple(match["info"].split())
        if match["indent"] and info and info[0] in ("python", "py"):
            raise AssertionError(f"{where}:{i + 1}: python fences must start at column 0, or the example never runs")
        fence = match["fence"]
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        if j == len(lines):
            raise AssertionError(f"{where}:{i + 1}: unclosed code fence")
        blocks.append(Block(info=info, line=start + 1, source="\n".join(lines[start:j])))
        i = j + 1
    return blocks


def _compile(block: Block, filename: str) -> types.CodeType:
    # Pad with blank lines so tracebacks and syntax errors carry the page's own line numbers.
    padded = "\n" * (block.line - 1) + block.source + "\n"
    code: types.CodeType = compile(padded, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    return code


async def _run_blocks(blocks: list[Block], filename: str, namespace: dict[str, object]) -> None:
    for block in blocks:
        try:
            code = _compile(block, filename)
            if not block.runs:
                continue
            with anyio.fail_after(BLOCK_TIMEOUT_S):  # a hung example fails with its line, not a pytest-timeout dump
                result = eval(code, namespace)  # running the docs' own examples is the point
                if inspect.iscoroutine(result):
                    await result
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            frames = traceback.format_exception(exc)
            raise DocExampleError(
                f"{filename}: the example starting at line {block.line} failed with "
                f"{type(exc).__name__}: {exc}\n\n{''.join(frames)}"
            ) from None


class DocExampleError(AssertionError):
    """An example in the docs failed; the message names the page and the block's first line."""


def _page_id(path: Path) -> str:
    return _rel(path)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    filename = _rel(page)
    blocks = [b for b in parse_blocks(page.read_text(encoding="utf-8"), filename) if b.is_python]
    if not blocks:
        pytest.skip(f"{filename} has no python examples")
    monkeypatch.chdir(tmp_path)  # examples may write files (SQLite stores, journals); keep them out of the repo
    name = "docs_example_" + re.sub(r"\W", "_", filename)
    module = types.ModuleType(name)  # a real module, so classes defined in examples pickle and resolve hints
    monkeypatch.setitem(sys.modules, name, module)
    asyncio.run(_run_blocks(blocks, filename, module.__dict__))


# ------------------------------------------------------------------------------------------ links
def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = _CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _prose(text: str, *, code_spans: bool = False) -> str:
    """The text outside fenced blocks (lines inside become empty), code spans removed unless kept."""
    out: list[str] = []
    inside: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if match is not None and (inside is None or line.strip().startswith(inside)):
            inside = match["fence"] if inside is None else None
            out.append("")
            continue
        out.append("" if inside is not None else line if code_spans else _CODE_SPAN.sub("", line))
    return "\n".join(out)


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a page (repeats get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for line in _prose(text, code_spans=True).splitlines():
        if line.startswith("#"):
            base = _slug(line.lstrip("#"))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def _links(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for number, line in enumerate(_prose(path.read_text(encoding="utf-8")).splitlines(), 1):
        found.extend((number, m["target"]) for m in _LINK.finditer(line))
    return found


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_relative_links_resolve(page: Path) -> None:
    broken: list[str] = []
    for line, target in _links(page):
        if target.startswith(_SKIP_SCHEMES):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.is_file():
            broken.append(f"{_rel(page)}:{line}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text(encoding="utf-8")):
            broken.append(f"{_rel(page)}:{line}: {target} (no heading with that anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_index_maps_every_page() -> None:
    index = DOCS / "index.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for _, target in _links(index)}
    missing = [_rel(p) for p in sorted(DOCS.rglob("*.md")) if p != index and p.resolve() not in linked]
    assert not missing, f"docs/index.md does not link: {', '.join(missing)}"


# ------------------------------------------------------------------------------------------ the runner itself
def test_runner_reports_the_page_and_line_of_a_failing_block() -> None:
    page = "# T\n\n```python\nx = 1\n```\n\ntext\n\n```python\nassert x == 2, 'nope'\n```\n"
    blocks = parse_blocks(page, "t.md")
    assert [b.line for b in blocks] == [4, 10]
    with pytest.raises(DocExampleError, match=r"t\.md: the example starting at line 10 failed with AssertionError"):
        asyncio.run(_run_blocks(blocks, "t.md", {}))


def test_runner_shares_a_namespace_awaits_and_skips_no_run_blocks() -> None:
    page = (
        "```python\nimport asyncio\nvalues = []\n```\n"
        "```python no-run\nvalues.append('never')\n```\n"
        "```python\nawait asyncio.sleep(0)\nvalues.append('awaited')\n```\n"
        "```bash\nexit 1\n```\n"
    )
    namespace: dict[str, object] = {}
    blocks = parse_blocks(page, "t.md")
    asyncio.run(_run_blocks([b for b in blocks if b.is_python], "t.md", namespace))
    assert namespace["values"] == ["awaited"]


def test_runner_rejects_no_run_blocks_that_do_not_compile_and_indented_fences() -> None:
    with pytest.raises(DocExampleError, match="SyntaxError"):
        asyncio.run(_run_blocks(parse_blocks("```python no-run\ndef (:\n```\n", "t.md"), "t.md", {}))
    with pytest.raises(AssertionError, match="column 0"):
        parse_blocks("- item\n\n  ```python\n  x = 1\n  ```\n", "t.md")
    with pytest.raises(AssertionError, match="unclosed"):
        parse_blocks("```python\nx = 1\n", "t.md")


def test_link_checker_finds_links_and_github_anchors() -> None:
    page = (
        "# The `ChatModel` protocol\n\n## Limits, retry & more\n\n## Limits, retry & more\n\n"
        "See [this](other.md#x) and `[not a link](nowhere.md)`.\n\n```python\n# [nor](this.md)\n```\n"
    )
    assert _anchors(page) == {"the-chatmodel-protocol", "limits-retry--more", "limits-retry--more-1"}
    assert [m["target"] for m in _LINK.finditer(_prose(page))] == ["other.md#x"]
