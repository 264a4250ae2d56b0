from __future__ import annotations

import subprocess
import sys


def test_readme_demo_runs_a_real_loop_offline() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tinyagents_nb"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "bring a compact umbrella and a water-resistant jacket." in out  # streamed final answer
    assert "[tool] weather -> 8°C, light rain" in out
    assert "[tool] packing_advisor -> Bring a compact umbrella" in out
    assert "subagent.started   1" in out
    assert "Whole tree: 1424 tokens, 0.0002226 USD; status=completed" in out
