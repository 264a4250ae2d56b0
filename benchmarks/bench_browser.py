"""Click → cancelled and first token → visible text, measured in a real JupyterLab in headless Chromium.

The same Jupyter server and Chromium as the browser tests (``tests/browser/conftest.py``). Each trial
runs a streaming ``%%agent`` cell (waiting, the default, or ``--background``), waits until its first
word is on screen, clicks the dashboard's Stop, and times in the page (``performance.now()``, polled
every animation frame) until the cell shows the cancelled record. First token → visible: from the
model's first token (``FIRST_TOKEN_S`` after the cell is sent) to the word drawn in the page, timed
from Python, so it also holds one Playwright round trip (an upper bound).

``python -m benchmarks.bench_browser [--quick]`` (needs Debian's chromium).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import header, line, spread

FIRST_TOKEN_S = 0.05
SETUP = (
    "from tinyagents_nb.harness.testkit import StreamingMock\n"
    "from tinyagents_nb.magics import get_session\n"
    "get_session().register_model('slow', StreamingMock([f'word{i} ' for i in range(2000)], "
    f"chunk_delay_s={FIRST_TOKEN_S}))"
)
_WAIT_TEXT_JS = """([index, text]) => new Promise((resolve) => {
    const start = performance.now();
    const cell = () => window.jupyterapp.shell.currentWidget.content.widgets[index].node;
    const tick = () => (cell().innerText.includes(text) ? resolve(performance.now() - start)
        : performance.now() - start > 30000 ? resolve(-1) : requestAnimationFrame(tick));
    tick();
})"""


def _ms(samples: list[float]) -> str:
    s = spread(samples)
    return f"p50 {s.median:.0f} ms · p99 {s.p99:.0f} ms · max {s.maximum:.0f} ms (n={s.n})"


def _trial(page: Any, index: int, source: str) -> tuple[float, float]:
    page.evaluate(
        """([i, src]) => { const nb = window.jupyterapp.shell.currentWidget;
            nb.content.widgets[i].model.sharedModel.setSource(src);
            nb.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        [index, source],
    )
    started = time.monotonic()
    shown = page.evaluate(_WAIT_TEXT_JS, [index, "word0"])
    first = (time.monotonic() - started) * 1000 - FIRST_TOKEN_S * 1000
    if shown < 0:
        raise RuntimeError("the run never streamed")
    page.evaluate(_WAIT_TEXT_JS, [index, "word5"])
    waited = page.evaluate(
        """([index]) => { const node = window.jupyterapp.shell.currentWidget.content.widgets[index].node;
            const button = [...node.querySelectorAll('button')].find((b) => b.innerText.includes('Stop'));
            const start = performance.now(); button.click();
            return new Promise((resolve) => { const tick = () => (node.innerText.includes('[cancelled')
                ? resolve(performance.now() - start) : performance.now() - start > 30000 ? resolve(-1)
                : requestAnimationFrame(tick)); tick(); }); }""",
        [index],
    )
    if waited < 0:
        raise RuntimeError("the click did not cancel the run")
    page.wait_for_function(
        "(i) => !window.jupyterapp.shell.currentWidget.content.widgets[i].node"
        ".querySelector('.jp-InputPrompt').innerText.includes('*')",
        arg=index,
        timeout=30_000,
    )
    return float(waited), first


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, start_lab

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    trials = 3 if args.quick else 20
    header("browser: Stop click → cancelled record, first token → visible (JupyterLab, headless Chromium)")
    if not Path(CHROMIUM).exists():
        line("skipped: chromium is not installed")
        return 0
    cells = ["%load_ext tinyagents_nb", SETUP, "", ""]
    with tempfile.TemporaryDirectory() as tmp, start_lab(Path(tmp), cells) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        try:
            page.goto(url)
            page.wait_for_function(
                "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
                timeout=60_000,
            )
            for index in range(2):
                page.evaluate(
                    """(i) => { const nb = window.jupyterapp.shell.currentWidget; nb.content.activeCellIndex = i;
                        window.jupyterapp.commands.execute('notebook:run-cell'); }""",
                    index,
                )
                page.wait_for_function(
                    "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].node"
                    ".querySelector('.jp-InputPrompt').innerText.includes(String(i + 1))",
                    arg=index,
                    timeout=60_000,
                )
            for mode, flags in (("waiting", ""), ("background", " --background")):
                source = f"%%agent --model slow --new-thread{flags}\nTell me a long story."
                _trial(page, 2, source)  # warm-up
                clicks, firsts = [], []
                for _ in range(trials):
                    click, first = _trial(page, 2, source)
                    clicks.append(click)
                    firsts.append(first)
                line(f"{mode:<10} · Stop click → cancelled record drawn: {_ms(clicks)}")
                line(f"{mode:<10} · first token → drawn in the page:  {_ms(firsts)}")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
