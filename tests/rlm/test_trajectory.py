"""RLM trajectories: built from the run's events, saved as versioned JSON Lines, loaded back, shown inert."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from tinyagents_nb.harness import ModelRequest, ModelResponse, RunContext, Usage
from tinyagents_nb.harness.observability import InMemoryEventJournal, JournalSink
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.rlm import (
    RLM,
    TRAJECTORY_VERSION,
    RLMLimits,
    Trajectory,
    TrajectoryError,
    TrajectoryVersionError,
    build_trajectory,
)

from .test_rlm_recursion import fenced, recursive_model, task_of, turn_of

pytestmark = pytest.mark.anyio


async def test_a_nested_tree_round_trips_through_a_file_and_matches_the_run(tmp_path: Path) -> None:
    ctx = RunContext()
    journal = InMemoryEventJournal()
    ctx.events.add_listener(JournalSink(journal))
    rlm = RLM(model=recursive_model([]), environment="local", limits=RLMLimits(max_depth=2, max_concurrency=4))
    run = await rlm.invoke_in_context(ctx, "ROOT: how many multiples of 3?", context={"context": list(range(1000))})
    trajectory = rlm.trajectory(run)
    root = trajectory.root
    assert root.run_id == run.run_id
    assert root.kind == "rlm"
    assert root.status == "completed"
    assert root.answer == run.final_text == "334"
    assert len(trajectory.runs) == 25  # the root, 8 rlm_query children, 16 leaves
    assert trajectory.usage == run.usage  # exactly the run's rolled-up usage
    children = trajectory.children(root)
    assert len(children) == 8
    assert {c.agent for c in children} == {"rlm_query"}
    assert root.steps[0].sub_calls == tuple(c.run_id for c in children)  # started by the first block
    assert "rlm_query_batched" in root.steps[0].code
    leaves = trajectory.children(children[0])
    assert [leaf.depth for leaf in leaves] == [2, 2]
    assert "refused: RLMDepthError" in leaves[0].steps[0].output
    assert leaves[0].answer.isdigit()
    path = tmp_path / "run.jsonl"
    trajectory.save(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "tinyagents-nb/rlm-trajectory"
    assert header["version"] == TRAJECTORY_VERSION
    assert len(lines) == 1 + 25 + 1
    loaded = Trajectory.load(path)
    assert loaded.runs == trajectory.runs
    assert loaded.usage == run.usage
    # the notebook session's way: the same tree from a journal
    from_journal = build_trajectory(journal.read_from(0), run.run_id, answer=run.final_text)
    assert from_journal.runs == trajectory.runs


async def test_sub_queries_usage_cost_and_a_failed_block_are_recorded() -> None:
    def sub(request: ModelRequest) -> ModelResponse:
        return ScriptedModel.text(request.messages[-1].text.upper(), usage=Usage(input_tokens=3, output_tokens=2))

    model = ScriptedModel(
        [
            fenced("r = llm_batch(['a', 'b', 'c'])\nprint(r)"),
            fenced("1 / 0"),
            fenced("FINAL(r)"),
        ]
    )
    rlm = RLM(model=model, sub_model=FunctionModel(sub, model_name="sub"), environment="local")
    run = await rlm.invoke("Shout.")
    trajectory = rlm.trajectory(run.run_id)
    root = trajectory.root
    assert [s.error_type for s in root.steps] == [None, "ZeroDivisionError", None]
    assert "['A', 'B', 'C']" in root.steps[0].output
    subs = trajectory.children(root)
    assert [(s.kind, s.agent, s.input, s.answer) for s in subs] == [
        ("llm", "llm", p, p.upper()) for p in ("a", "b", "c")
    ]
    assert all(s.usage == Usage(input_tokens=3, output_tokens=2) for s in subs)
    assert len(root.model_calls) == 3  # the protocol's closing turn is not a model call
    assert trajectory.usage == run.usage
    assert trajectory.cost_usd is None or isinstance(trajectory.cost_usd, Decimal)
    assert root.steps[0].duration_s >= 0


async def test_a_limit_ended_run_keeps_its_error_and_partial_answer(tmp_path: Path) -> None:
    model = ScriptedModel([fenced("answer['content'] = 'about 40'"), fenced("print(1)")])
    rlm = RLM(model=model, environment="local", limits=RLMLimits(max_iterations=1))
    with pytest.raises(Exception, match="replies with code"):
        await rlm.invoke("Count.")
    (run_id,) = rlm._recorders
    trajectory = rlm.trajectory(run_id)
    assert trajectory.root.status == "failed"
    assert trajectory.root.error_type == "LimitExceeded"
    assert trajectory.root.limit == "rlm_iterations"
    assert trajectory.root.partial_answer == "about 40"
    assert trajectory.answer == "about 40"
    trajectory.save(tmp_path / "t.jsonl")
    assert Trajectory.load(tmp_path / "t.jsonl").root.partial_answer == "about 40"


async def test_secrets_never_reach_the_trajectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-" + "9" * 30
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789abcdef")

    def reply(request: ModelRequest) -> ModelResponse:
        if turn_of(request) == 0:
            return fenced(f"import os\nkey = {secret!r}\nprint(key, os.environ.get('MY_SERVICE_TOKEN'))")
        return fenced("FINAL('Authorization: Bearer ' + key)")

    rlm = RLM(model=FunctionModel(reply), environment="local")
    run = await rlm.invoke(f"Use api_key={secret}")
    path = tmp_path / "t.jsonl"
    rlm.trajectory(run).save(path)
    text = path.read_text(encoding="utf-8")
    assert secret not in text
    assert "tok-0123456789abcdef" not in text
    assert "[REDACTED]" in text
    assert task_of  # the shared helpers stay importable


def test_corrupted_truncated_and_newer_files_are_typed_errors(tmp_path: Path) -> None:
    from tinyagents_nb.rlm import TrajectoryRun

    good = tmp_path / "good.jsonl"
    Trajectory([TrajectoryRun(run_id="r1", kind="rlm", status="completed", answer="x")]).save(good)
    lines = good.read_text(encoding="utf-8").splitlines()
    assert Trajectory.load(good).root.answer == "x"

    def write(name: str, rows: list[str]) -> Path:
        path = tmp_path / name
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        return path

    newer = json.loads(lines[0]) | {"version": TRAJECTORY_VERSION + 1}
    with pytest.raises(TrajectoryVersionError) as info:
        Trajectory.load(write("newer.jsonl", [json.dumps(newer), *lines[1:]]))
    assert info.value.version == TRAJECTORY_VERSION + 1
    with pytest.raises(TrajectoryError, match="truncated"):
        Trajectory.load(write("cut.jsonl", lines[:-1]))
    with pytest.raises(TrajectoryError, match="line 2: not valid JSON"):
        Trajectory.load(write("broken.jsonl", [lines[0], lines[1][:-5], lines[2]]))
    bad_run = json.loads(lines[1]) | {"usage": {"input_tokens": -1}}
    with pytest.raises(TrajectoryError, match="line 2: not a trajectory run"):
        Trajectory.load(write("badrun.jsonl", [lines[0], json.dumps(bad_run), lines[2]]))
    with pytest.raises(TrajectoryError, match="not an RLM trajectory"):
        Trajectory.load(write("other.jsonl", ['{"type": "metadata"}']))
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TrajectoryError, match="not UTF-8"):
        Trajectory.load(tmp_path / "bin.jsonl")
    with pytest.raises(TrajectoryError, match="no trajectory kept"):
        RLM(model=ScriptedModel([]), environment="local").trajectory("nope")


async def test_the_recorder_stops_listening_when_the_run_ends() -> None:
    ctx = RunContext()
    listening = len(ctx.events._listeners)
    rlm = RLM(model=ScriptedModel([fenced("FINAL(1)")]), environment="local")
    await rlm.invoke_in_context(ctx, "Go.")
    assert len(ctx.events._listeners) == listening  # a completed run: detached at its run.completed
    failing = RLM(model=ScriptedModel([fenced("print(1)")]), environment="local", limits=RLMLimits(max_iterations=1))
    with pytest.raises(Exception, match="replies with code"):
        await failing.invoke_in_context(ctx, "Loop.")
    assert len(ctx.events._listeners) == listening  # a failed one: after its partial answer
    assert ctx.events.listener_errors == 0


async def test_the_models_prose_around_its_code_is_kept_and_a_version_1_file_still_loads(tmp_path: Path) -> None:
    reply = (
        "First I count the rows.\n```python\nrows = 3\n```\nThen I print them.\n"
        "```bash\nls  # not runnable: it stays in the prose\n```\n```python\nprint(rows)\n```\nDone for now."
    )
    model = ScriptedModel([ScriptedModel.text(reply), fenced("FINAL(rows)")])
    rlm = RLM(model=model, environment="local")
    run = await rlm.invoke("Count.")
    first, second, third = rlm.trajectory(run).root.steps
    assert (first.prose, first.prose_after) == ("First I count the rows.", "")
    assert second.prose == "Then I print them.\n```bash\nls  # not runnable: it stays in the prose\n```"
    assert second.prose_after == "Done for now."
    assert (third.prose, third.prose_after) == ("Working.", "")
    path = tmp_path / "t.jsonl"
    rlm.trajectory(run).save(path)
    assert Trajectory.load(path).root.steps[1].prose_after == "Done for now."
    # a version 1 file (no prose) is read, its steps without prose
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0]) | {"version": 1}
    root = json.loads(lines[1])
    for step in root["steps"]:
        del step["prose"], step["prose_after"]
    old = tmp_path / "v1.jsonl"
    old.write_text("\n".join([json.dumps(header), json.dumps(root), *lines[2:]]) + "\n", encoding="utf-8")
    steps = Trajectory.load(old).root.steps
    assert [s.code for s in steps] == ["rows = 3", "print(rows)", "FINAL(rows)"]
    assert {s.prose for s in steps} == {""}
