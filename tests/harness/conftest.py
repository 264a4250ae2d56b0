from __future__ import annotations

from tests.harness.replay_server import replay_server as replay_server  # the fixture, for every harness test
