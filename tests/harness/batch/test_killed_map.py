"""A map whose process is killed (SIGKILL, as a dying kernel) resumes from its checkpoint."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.harness.batch.rows_server import RowResponder
from tests.harness.replay_server import ReplayServer
from tinyagents_nb.harness.batch import MapCheckpoint, agent_map
from tinyagents_nb.harness.providers import OpenAIChatModel

SCRIPT = textwrap.dedent(
    """
    import sys
    from tinyagents_nb.harness.batch import agent_map
    from tinyagents_nb.harness.providers import OpenAIChatModel
    base_url, path = sys.argv[1], sys.argv[2]
    rows = [{"text": f"row #{i}"} for i in range(400)]
    model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=base_url, api_key="sk-test-killed")
    agent_map(rows, "{{text}}", model=model, checkpoint=path, name="killed", concurrency=4)
    """
)


def test_a_killed_process_resumes_with_only_the_rest(replay_server: ReplayServer, tmp_path: Path) -> None:
    responder = RowResponder(failing=lambda n: False)
    replay_server.respond_with(responder)
    path = str(tmp_path / "map.sqlite")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, replay_server.base_url, path])
    try:
        deadline = time.monotonic() + 60
        while responder.count < 120 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    with MapCheckpoint(path) as store:
        before = store.maps().get("killed", {}).get("done", 0)
    assert 100 <= before < 400  # killed mid-map, with the rows finished so far committed
    first = dict(responder.seen)
    responder.seen.clear()
    model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=replay_server.base_url, api_key="sk-test-killed")
    rows = [{"text": f"row #{i}"} for i in range(400)]
    out = agent_map(rows, "{{text}}", model=model, checkpoint=path, name="killed", concurrency=4)
    assert (out["status"] == "done").all()
    assert out.attrs["agent_map"]["skipped"] == before
    assert sum(responder.seen.values()) == 400 - before  # only the rest was asked for
    assert set(first) | set(responder.seen) == set(range(400))
