"""``%agent rlm`` and ``%agent trajectory``: the RLM's thread sessions, and a run's trajectory.

``%agent rlm`` lists the RLM sessions of ``%%agent --rlm --thread NAME`` cells (their REPL, runs,
state); ``%agent rlm close NAME`` ends one: its child kernel stops (at the end of a run going on)
and the next ``--rlm --thread NAME`` cell starts from a fresh REPL. ``%agent thread drop NAME``
does the same and forgets the thread's messages.

``%agent trajectory [RUN] [PATH]`` builds an RLM run's trajectory from the session's event journal:
with ``PATH`` it is saved there (JSON Lines, see ``docs/rlm.md``), without it it is shown (a static,
sanitised view that the saved notebook keeps).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from tinyagents_nb.rlm import Trajectory, TrajectoryError, build_trajectory

from ._command_host import CommandHost
from ._rlm import close_thread, rlm_threads
from ._session import NotebookSession

__all__ = ["RLM_COMMANDS"]


def _rlm(host: CommandHost, session: NotebookSession, args: list[str]) -> Any:
    if not args:
        rows = [
            {
                "thread": name,
                "repl": kept.environment.name,
                "runs": kept.runs,
                "state": "running" if kept.busy else "idle",
            }
            for name, kept in rlm_threads(session).items()
        ]
        if not rows:
            print("no RLM thread sessions (%%agent --rlm --thread NAME starts one)")
            return None
        import pandas as pd

        return pd.DataFrame(rows, columns=["thread", "repl", "runs", "state"])
    if args[0] != "close" or len(args) != 2:
        raise UsageError("usage: %agent rlm [close THREAD]")
    kept = close_thread(session, args[1])
    if kept is None:
        known = ", ".join(rlm_threads(session)) or "none"
        raise UsageError(f"no RLM session for thread {args[1]!r} (RLM threads: {known})")
    when = "when its run ends" if kept.busy else "now"
    print(f"closed the RLM session of thread {args[1]}: its REPL stops {when}")
    return None


def _trajectory(host: CommandHost, session: NotebookSession, args: list[str]) -> Trajectory | None:
    if len(args) > 2:
        raise UsageError("usage: %agent trajectory [RUN] [PATH]")
    run = session.find_run(args[0] if args else None)
    outcome = run.outcome
    try:
        trajectory = build_trajectory(
            session.journal.read_from(root_run_id=run.run_id),
            run.run_id,
            answer=outcome.final_text if outcome is not None else None,
        )
    except TrajectoryError as exc:
        raise UsageError(f"run {run.label}: {exc}") from None
    if trajectory.root.kind != "rlm":
        raise UsageError(f"run {run.label} is not an RLM run (%%agent --rlm): it has no trajectory")
    if len(args) < 2:
        return trajectory
    trajectory.save(args[1])
    print(f"saved the trajectory of run {run.label} to {args[1]} ({len(trajectory.runs):,} runs)")
    return None


RLM_COMMANDS = {"rlm": _rlm, "trajectory": _trajectory}
