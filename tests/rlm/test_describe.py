"""The first message describes values without including them, whatever their size."""

from __future__ import annotations

import pandas as pd

from tinyagents_nb.harness import UserMessage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import RLM, describe_context, describe_value


def test_a_huge_string_is_described_in_a_bounded_line() -> None:
    text = "a" * 5_000_000 + "SECRET-IN-THE-MIDDLE" + "b" * 5_000_000
    line = describe_value("context", text)
    assert "10,000,020 characters" in line
    assert "SECRET-IN-THE-MIDDLE" not in line
    assert len(line) < 400


def test_a_dataframe_shows_its_shape_and_schema_not_its_rows() -> None:
    frame = pd.DataFrame({"level": ["ERROR", "INFO"] * 50_000, "latency_ms": range(100_000)})
    line = describe_value("logs", frame)
    assert "shape (100000, 2)" in line
    assert f"level: {frame.dtypes['level']}" in line
    assert "latency_ms: int64" in line
    assert "ERROR" not in line


def test_lists_dicts_and_a_broken_repr() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert "1,000 items" in describe_value("xs", list(range(1_000)))
    assert "3 keys" in describe_value("d", {"a": 1, "b": 2, "c": 3})
    assert "preview: <Broken instance at" in describe_value("b", Broken())  # reprlib survives a broken repr
    assert "no context values" in describe_context({})


def test_first_message_has_the_task_and_each_description() -> None:
    rlm = RLM(model=ScriptedModel([]), environment="local")
    try:
        _, messages = rlm.prepare("count the errors", {"logs": "x" * 1_000_000, "n": 3})
    finally:
        rlm.close()
    assert isinstance(messages[-1], UserMessage)
    message = messages[-1].text
    assert message.startswith("Task:\ncount the errors")
    assert "`logs`: str, 1,000,000 characters" in message
    assert "`n`: int" in message
    assert len(message) < 1_000


def test_a_string_preview_is_its_start_as_a_python_literal() -> None:
    line = describe_value("s", "first line\nsecond line")
    assert line.endswith("starts: 'first line\\nsecond line'")


def test_huge_column_names_keep_the_first_request_small() -> None:
    # A headerless read_csv of a file whose first line is long names its columns by that line.
    frame = pd.DataFrame({f"{i}" + "c" * 100_000: [1, 2] for i in range(5)})
    assert len(describe_value("frame", frame)) <= 2_000
    model = ScriptedModel(["FINAL('ok')"])
    RLM(model=model, environment="local").run_sync("Summarise.", context={"frame": frame})
    first = sum(len(m.text) for m in model.requests[0].messages)
    assert first < 20_000, f"first request {first:,} characters"


def test_every_description_is_bounded_whatever_the_value() -> None:
    class Long:
        pass

    Long.__qualname__ = "L" * 100_000
    values = {
        "mapping": {"k" * 100_000: 1},
        "frame": pd.DataFrame({"x" * 100_000: [1]}).astype({"x" * 100_000: "category"}),
        "odd": Long(),
    }
    for name, value in values.items():
        assert len(describe_value(name, value)) <= 2_000, name
