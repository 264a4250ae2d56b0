from __future__ import annotations

import subprocess
import sys


def test_readme_demo_runs_offline_and_prints_the_tree_events_and_usage() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tinyagents_nb"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "fact-checker  parent=researcher  root=orchestrator  depth=2" in out
    assert "usage.recorded" in out
    assert "whole tree          = 6640 tokens" in out
    assert "USD over 3 calls" in out
