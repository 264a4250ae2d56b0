"""The run's configuration: identities, tags, metadata and limits, frozen and serializable.

``RunConfig`` is what survives a process boundary (a journal, a child kernel, a resumed thread);
the live handles a run needs beside it are in ``RunContext``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ._errors import ConfigurationError, SubAgentDepthError
from ._ids import RunId, ThreadId
from ._json import FrozenJson, freeze_json_object, thaw_json

__all__ = ["DEFAULT_MAX_DEPTH", "RunConfig"]

DEFAULT_MAX_DEPTH = 8


def _check_count(name: str, value: object, *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ConfigurationError(f"{name} must be >= 0, got {value}")


def _normalize_tags(tags: Sequence[object], what: str = "tags") -> tuple[str, ...]:
    if isinstance(tags, str):
        raise ConfigurationError(
            f"{what} must be a sequence of strings, not a single string (did you mean ({tags!r},)?)"
        )
    seen: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"{what} must be non-empty strings, got {tag!r}")
        seen.setdefault(tag, None)
    return tuple(seen)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunConfig:
    """Identity, classification and limits of one run; frozen and JSON round-trippable.

    Attributes:
        run_id: This run; generated when omitted.
        thread_id: The conversation this run belongs to, if any.
        parent_run_id: The run that spawned this one (``None`` for a root run).
        root_run_id: The root of the recursion tree; defaults to ``run_id``.
        tags: Classification labels, inherited by children.
        metadata: JSON app metadata, inherited and merged by children.
        configurable: JSON runtime settings for models/tools, inherited and merged by children.
        timeout_s: Wall-clock budget for the run, in seconds.
        max_model_calls: Cap on model calls (``None``: the harness policy decides).
        max_tool_calls: Cap on tool calls (``None``: the harness policy decides).
        max_turn_output_tokens: Upper bound on each request's output tokens.
        depth: Position in the recursion tree (0 for a root run).
        max_depth: The deepest a descendant may run.
    """

    run_id: str = field(default_factory=RunId.new)
    thread_id: str | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None
    tags: Sequence[str] = ()
    metadata: Mapping[str, FrozenJson] = field(default_factory=dict)
    configurable: Mapping[str, FrozenJson] = field(default_factory=dict)
    timeout_s: float | None = None
    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    max_turn_output_tokens: int | None = None
    depth: int = 0
    max_depth: int = DEFAULT_MAX_DEPTH

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "run_id", RunId(self.run_id))
        if self.thread_id is not None:
            setattr_(self, "thread_id", ThreadId(self.thread_id))
        if self.parent_run_id is not None:
            setattr_(self, "parent_run_id", RunId(self.parent_run_id))
        setattr_(self, "root_run_id", RunId(self.root_run_id) if self.root_run_id is not None else self.run_id)
        setattr_(self, "tags", _normalize_tags(self.tags))
        setattr_(self, "metadata", freeze_json_object(self.metadata, what="metadata"))
        setattr_(self, "configurable", freeze_json_object(self.configurable, what="configurable"))
        if self.timeout_s is not None:
            if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, int | float):
                raise ConfigurationError(f"timeout_s must be a number of seconds, got {type(self.timeout_s).__name__}")
            if not self.timeout_s > 0:
                raise ConfigurationError(f"timeout_s must be > 0, got {self.timeout_s}")
        for name in ("max_model_calls", "max_tool_calls", "max_turn_output_tokens"):
            _check_count(name, getattr(self, name))
        if self.max_turn_output_tokens == 0:
            raise ConfigurationError("max_turn_output_tokens must be >= 1")
        _check_count("depth", self.depth, allow_none=False)
        _check_count("max_depth", self.max_depth, allow_none=False)
        if self.depth > self.max_depth:
            raise ConfigurationError(f"depth {self.depth} is beyond max_depth {self.max_depth}")
        if self.parent_run_id is None and self.root_run_id != self.run_id:
            raise ConfigurationError("a run with a root_run_id other than its own must name its parent_run_id")

    @property
    def root(self) -> RunId:
        """The root run id (never ``None`` once constructed)."""
        return cast(RunId, self.root_run_id or self.run_id)

    def child(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
        configurable: Mapping[str, object] | None = None,
    ) -> RunConfig:
        """The config of a nested run, by the inheritance rules; raises ``SubAgentDepthError`` past ``max_depth``."""
        depth = self.depth + 1
        if depth > self.max_depth:
            raise SubAgentDepthError(self.max_depth)
        return RunConfig(
            run_id=RunId(run_id) if run_id is not None else RunId.new(),
            thread_id=ThreadId(thread_id) if thread_id is not None else self.thread_id,
            parent_run_id=self.run_id,
            root_run_id=self.root,
            tags=(*self.tags, *_normalize_tags(tags)),
            metadata={**self.metadata, **(metadata or {})},
            configurable={**self.configurable, **(configurable or {})},
            timeout_s=self.timeout_s,
            max_model_calls=self.max_model_calls,
            max_tool_calls=self.max_tool_calls,
            max_turn_output_tokens=self.max_turn_output_tokens,
            depth=depth,
            max_depth=self.max_depth,
        )

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON-able dict (the inverse of ``from_dict``)."""
        return {
            "run_id": str(self.run_id),
            "thread_id": None if self.thread_id is None else str(self.thread_id),
            "parent_run_id": None if self.parent_run_id is None else str(self.parent_run_id),
            "root_run_id": str(self.root),
            "tags": list(self.tags),
            "metadata": thaw_json(self.metadata),
            "configurable": thaw_json(self.configurable),
            "timeout_s": self.timeout_s,
            "max_model_calls": self.max_model_calls,
            "max_tool_calls": self.max_tool_calls,
            "max_turn_output_tokens": self.max_turn_output_tokens,
            "depth": self.depth,
            "max_depth": self.max_depth,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Rebuild a config from ``to_dict`` output; unknown keys are an error, not silently dropped."""
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigurationError(f"unknown RunConfig field(s): {', '.join(sorted(unknown))}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> RunConfig:
        return cls.from_dict(json.loads(text))
