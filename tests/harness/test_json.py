from __future__ import annotations

import math
from types import MappingProxyType

import pytest

from tinyagents_nb.harness import ConfigurationError
from tinyagents_nb.harness.runtime import freeze_json, freeze_json_object, thaw_json


def test_freeze_makes_containers_read_only_and_copies() -> None:
    source = {"a": [1, {"b": 2}]}
    frozen = freeze_json(source, what="metadata")
    assert isinstance(frozen, MappingProxyType)
    assert frozen["a"] == (1, MappingProxyType({"b": 2}))
    source["a"].append(3)  # type: ignore[attr-defined]
    assert len(frozen["a"]) == 2
    with pytest.raises(TypeError):
        frozen["x"] = 1  # type: ignore[index]


def test_thaw_inverts_freeze() -> None:
    source = {"a": [1, {"b": [True, None, 1.5, "s"]}]}
    assert thaw_json(freeze_json(source, what="m")) == source


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": object()}, "not JSON-serializable"),
        ({1: "x"}, "non-string key"),
        ({"a": math.nan}, "not valid JSON"),
        ({"a": math.inf}, "not valid JSON"),
        ({"a": {1, 2}}, "not JSON-serializable"),
    ],
)
def test_non_json_is_rejected_with_the_path(value: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        freeze_json(value, what="metadata")


def test_object_required_at_top_level() -> None:
    with pytest.raises(ConfigurationError, match="must be a mapping"):
        freeze_json_object([1, 2], what="metadata")  # type: ignore[arg-type]
    assert freeze_json_object(None, what="metadata") == {}


def test_depth_is_bounded() -> None:
    deep: object = 1
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ConfigurationError, match="nested more than"):
        freeze_json(deep, what="metadata")
