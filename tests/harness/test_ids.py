from __future__ import annotations

import threading

import pytest

from tinyagents_nb.harness import ConfigurationError, InvalidIdError, RunId, ThreadId
from tinyagents_nb.harness.runtime import CallId


def test_new_ids_carry_their_prefix_and_type() -> None:
    run = RunId.new()
    assert isinstance(run, RunId)
    assert isinstance(run, str)
    assert run.startswith("run-")
    assert ThreadId.new().startswith("thr-")
    assert repr(CallId("c1")) == "CallId('c1')"


def test_ids_compare_and_hash_as_strings() -> None:
    assert RunId("abc") == "abc"
    assert {RunId("abc"): 1}["abc"] == 1
    assert RunId(RunId("abc")) == "abc"


@pytest.mark.parametrize("bad", ["", "has space", "tab\there", "new\nline", "x" * 201, "nul\x00"])
def test_invalid_ids_raise_a_typed_error(bad: str) -> None:
    with pytest.raises(InvalidIdError, match="invalid RunId"):
        RunId(bad)


def test_invalid_id_is_a_configuration_error_and_value_error() -> None:
    with pytest.raises(ConfigurationError):
        ThreadId("")
    with pytest.raises(ValueError, match="must be a string"):
        RunId(42)  # type: ignore[arg-type]


def test_generated_ids_are_unique_across_threads() -> None:
    seen: list[RunId] = []
    lock = threading.Lock()

    def make() -> None:
        local = [RunId.new() for _ in range(5_000)]
        with lock:
            seen.extend(local)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == len(set(seen)) == 40_000
