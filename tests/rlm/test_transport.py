"""Large values go to the child kernel as Arrow IPC files (private, removed after the run); the rest is pickled."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tinyagents_nb.harness import AgentEvent, RunContext
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import RLM, KernelEnvironment, RLMCode, describe_value

from ._scripts import py

pytestmark = [pytest.mark.anyio, pytest.mark.kernel]
ARROW_DEFAULT = KernelEnvironment().arrow_min_bytes
pa = pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def arrow_env() -> Iterator[KernelEnvironment]:
    env = KernelEnvironment(python=sys.executable)
    try:
        yield env
    finally:
        env.close()


# What the child prints about a frame: a hash of every non-string value and the index, the strings'
# total length and a sample of them, the dtypes, index type, columns and shape (hashing a million
# strings takes seconds on a loaded machine).
FINGERPRINT = (
    "import pandas as pd\n"
    "numbers = df.drop(columns=[c for c in df.columns if str(df[c].dtype) == 'str'])\n"
    "strings = [(int(df[c].str.len().sum()), df[c].iloc[::9973].tolist()) for c in df.columns if str(df[c].dtype) == 'str']\n"
    "print(int(pd.util.hash_pandas_object(numbers, index=True).sum()), strings, list(map(str, df.dtypes)),"
    " type(df.index).__name__, list(df.columns), df.shape)"
)


def fingerprint(df: pd.DataFrame) -> str:
    numbers = df.drop(columns=[c for c in df.columns if str(df[c].dtype) == "str"])
    strings = [
        (int(df[c].str.len().sum()), df[c].iloc[::9973].tolist()) for c in df.columns if str(df[c].dtype) == "str"
    ]
    h = int(pd.util.hash_pandas_object(numbers, index=True).sum())
    return f"{h} {strings} {list(map(str, df.dtypes))} {type(df.index).__name__} {list(df.columns)} {df.shape}"


NAMES = np.array([f"name-{i}" for i in range(1000)], dtype=object)


def big_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    score = pd.array(np.arange(rows), dtype="Int64")
    score[::7] = pd.NA
    return pd.DataFrame(
        {
            "id": np.arange(rows, dtype=np.int64),
            "x": rng.random(rows),
            "y": rng.integers(0, 1000, rows).astype(np.int32),
            "z": rng.random(rows),
            "when": pd.DatetimeIndex(np.arange(rows).astype("datetime64[s]")).tz_localize("UTC"),
            "kind": pd.Categorical.from_codes(rng.integers(0, 3, rows), ["a", "b", "c"]),
            "name": pd.Series(NAMES[rng.integers(0, len(NAMES), rows)], dtype="str"),
            "score": score,
        },
        index=pd.RangeIndex(10, 10 + 2 * rows, 2),
    )


async def test_a_large_frame_goes_as_arrow_comes_back_equal_and_its_file_is_private_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arrow_env: KernelEnvironment
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the private directories are made here
    df = big_frame(1_200_000)
    assert df.memory_usage(index=True).sum() > 60_000_000
    seen: list[tuple[int, int]] = []

    def on_event(offset: int, event: AgentEvent) -> None:
        if isinstance(event, RLMCode) and not seen:
            (folder,) = tmp_path.glob("tinyagents-rlm-values-*")
            (file,) = folder.iterdir()
            seen.append((stat.S_IMODE(folder.stat().st_mode), stat.S_IMODE(file.stat().st_mode)))

    ctx = RunContext()
    ctx.events.add_listener(on_event)
    env = arrow_env
    env.arrow_min_bytes = ARROW_DEFAULT
    model = ScriptedModel(
        [
            py(FINGERPRINT),
            py("import os\nos._exit(1)"),  # a restarted kernel loads the frame again, from the same file
            py(FINGERPRINT + "\ndf.loc[10, 'x'] = -1.0\nprint(df.loc[10, 'x'])"),
            py("FINAL('done')"),
        ]
    )
    run = await RLM(model=model, environment=env).invoke_in_context(ctx, "Look.", context={"df": df})
    assert run.final_text == "done"
    assert env.transport == {"df": "arrow"}
    expected = fingerprint(df)
    assert expected in model.requests[1].messages[-1].text
    after_restart = model.requests[3].messages[-1].text
    assert "restarted" in after_restart
    assert expected in after_restart
    assert "-1.0" in after_restart  # the child's frame is its own, writable
    assert df.loc[10, "x"] != -1.0  # and the notebook's is untouched
    # the model is told about the frame exactly as before: its description, not its values
    assert describe_value("df", df) in model.requests[0].messages[-1].text
    assert seen == [(0o700, 0o600)]
    assert not any(name.startswith("tinyagents-rlm-values-") for name in os.listdir(tmp_path))


def test_small_values_object_columns_and_attrs_are_pickled() -> None:
    env = KernelEnvironment(arrow_min_bytes=1)
    objects = pd.DataFrame({"o": pd.Series(["a", None], dtype=object)})
    flags = np.array([True, False])  # a bool tensor would come back as uint8
    tagged = pd.DataFrame({"x": [1.0]})
    tagged.attrs["unit"] = "m"
    values = {"objects": objects, "tagged": tagged, "flags": flags, "numbers": [1, 2], "grid": np.ones((3, 2))}
    prepared = env.prepare_values(values)
    try:
        assert prepared.transport == {**dict.fromkeys(values, "pickle"), "grid": "arrow"}
        assert KernelEnvironment().prepare_values({"grid": np.ones((3, 2))}).transport == {"grid": "pickle"}
    finally:
        prepared.cleanup()
    assert prepared.directory is not None
    assert not os.path.exists(prepared.directory)


async def test_every_arrow_kind_comes_back_equal_in_the_child(arrow_env: KernelEnvironment) -> None:
    values: dict[str, Any] = {
        "cube": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "indexed": big_frame(1000).set_index(["name", "id"]),
        "empty": big_frame(0),
        "table": pa.table({"a": [1, 2, 3], "b": ["x", "y", None]}),
    }
    check = (
        "import numpy as np, pandas as pd, pyarrow as pa\n"
        "cube2 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)\n"
        "print(type(cube).__name__, cube.dtype, np.array_equal(cube, cube2), cube.flags.writeable)\n"
        "print(type(indexed.index).__name__, indexed.index.names, indexed.shape, list(map(str, indexed.dtypes)))\n"
        "print(int(pd.util.hash_pandas_object(indexed, index=True).sum()))\n"
        "print(empty.shape, list(map(str, empty.dtypes)), type(empty.index).__name__)\n"
        "print(type(table).__name__, table.equals(pa.table({'a': [1, 2, 3], 'b': ['x', 'y', None]})))"
    )
    arrow_env.arrow_min_bytes = 1
    model = ScriptedModel([py(check), py("FINAL('done')")])
    await RLM(model=model, environment=arrow_env).invoke("Look.", context=values)
    assert arrow_env.transport == dict.fromkeys(values, "arrow")
    seen = model.requests[1].messages[-1].text
    indexed, empty = values["indexed"], values["empty"]
    assert "ndarray float32 True True" in seen
    assert f"MultiIndex ['name', 'id'] {indexed.shape} {list(map(str, indexed.dtypes))}" in seen
    assert str(int(pd.util.hash_pandas_object(indexed, index=True).sum())) in seen
    assert f"{empty.shape} {list(map(str, empty.dtypes))} RangeIndex" in seen
    assert "Table True" in seen
