"""The benchmarks run end to end (``python -m benchmarks --quick``); no timing is asserted here.

Figures depend on the machine; the suite only proves every benchmark still runs, prints each
section and its target lines, and degrades to a "skipped" line when the peers (the ``bench`` extra)
are not installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = (
    "=== 1. Harness overhead vs peers ===",
    "=== 2. Cancellation latency ===",
    "=== 3. Streaming into the dashboard ===",
    "=== 4. Context estimation ===",
    "=== 5. Memory under a long stream ===",
    "=== 6. Provider adapters: CPU per streamed token (parse only) ===",
    "=== 7. MCP servers ===",
    "=== 8. RLM: long contexts and sub-query fan-out ===",
    "=== 10. OpenTelemetry tracing: model -> tool -> model, per run, on vs off ===",
    "=== 11. Budgets: reservation overhead and llm_batch under a cap ===",
    "=== 12. Agents over data: agent_map rows per second ===",
    "=== 13. Notebook access: variables, a 10-million-row frame, run_code round trips ===",
    "=== durable runs: journal overhead per turn, resume time ===",
    "=== browser: Stop click → cancelled record, first token → visible (JupyterLab, headless Chromium) ===",
)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.kernel
@pytest.mark.timeout(300)
def test_quick_run_of_every_benchmark_prints_each_section() -> None:
    proc = _run(["-m", "benchmarks", "--quick", "--jobs", "2"], timeout=280)  # two at a time: figures are not checked
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for section in SECTIONS:
        assert section in out, f"missing {section!r}"
    assert "(b) model -> tool -> model, µs per run" in out
    assert "tinyagents-nb" in out
    for label in ("(a) during a stream", "(b) during a 30 s retry backoff", "(c) from another thread", "(d) a tree of"):
        assert label in out
    assert "every child ended cancelled" in out
    assert "`1+1` round trip, while it streams" in out
    assert "messages tokenized per call" in out
    assert "RSS after   100,000 events" in out
    assert "error kinds in   1.0 MB of logs: 3 model calls" in out
    assert "answer WRONG" not in out
    assert "llm_batch of 100 prompts at concurrency 32" in out
    assert "reservation overhead:" in out
    assert "cap stops it part-way" in out
    assert "notebook_variables() over 10,000 variables" in out
    assert "run_code('1+1') round trip" in out
    assert "all benchmarks done" in out


@pytest.mark.timeout(120)
def test_overhead_reports_peers_as_skipped_when_the_bench_extra_is_missing() -> None:
    hide_peers = (
        "import sys\n"
        "for name in ('pydantic_ai', 'langchain', 'langchain_core', 'agents'):\n"
        "    sys.modules[name] = None  # makes `import name` raise ImportError\n"
        "from benchmarks.bench_overhead import main\n"
        "main(['--quick'])\n"
    )
    proc = _run(["-c", hide_peers], timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for peer in ("pydantic-ai", "langchain", "openai-agents"):
        assert f"{peer}: skipped, not installed" in proc.stdout
    assert "(b) model -> tool -> model, µs per run" in proc.stdout
    assert "fastest peer" not in proc.stdout  # no ratio without a peer
