"""A process that starts a journaled run and lives until killed (``python owner_child.py STORE HOST LEASE_S``).

``HOST`` (when not ``-``) is the host name its lease records, so one machine can play a second host
that shares the store's folder. It prints ``ready`` once the run is recorded.
"""

from __future__ import annotations

import socket
import sys
import time

path, host, lease_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
if host != "-":  # before the package reads it
    socket.gethostname = lambda: host

from tinyagents_nb.harness.durable import RunStore  # noqa: E402 - after the host name is set

store = RunStore(path, lease_s=lease_s)
store.start_run("run-child", agent=None, model="m", prompt="p")
print("ready", flush=True)
while True:
    time.sleep(1)
