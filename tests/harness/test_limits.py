from __future__ import annotations

import dataclasses
import math

import pytest

from tinyagents_nb.harness import ConfigurationError, LimitExceeded, RunConfig, RunLimits, RunTimeout
from tinyagents_nb.harness.runtime import LimitTracker


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------------------------------ RunLimits


def test_run_limits_defaults_and_frozen() -> None:
    limits = RunLimits()
    assert (limits.max_model_calls, limits.max_tool_calls, limits.max_depth) == (25, 50, 8)
    assert limits.max_wall_clock_s is None
    assert limits.max_retries_per_call is None
    assert limits.max_concurrency is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_model_calls = 3  # type: ignore[misc]
    assert dataclasses.replace(limits, max_tool_calls=5).max_tool_calls == 5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_model_calls": -1},
        {"max_model_calls": 2.5},
        {"max_model_calls": None},
        {"max_tool_calls": True},
        {"max_wall_clock_s": 0},
        {"max_wall_clock_s": -5.0},
        {"max_wall_clock_s": math.inf},
        {"max_wall_clock_s": "10"},
        {"max_retries_per_call": -1},
        {"max_concurrency": 0},
        {"max_depth": -1},
    ],
)
def test_run_limits_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        RunLimits(**kwargs)  # type: ignore[arg-type]


def test_run_limits_allow_zero_caps_and_retries() -> None:
    limits = RunLimits(max_model_calls=0, max_tool_calls=0, max_retries_per_call=0, max_depth=0)
    assert limits.max_retries_per_call == 0


# ------------------------------------------------------------------------------------------ reconciliation


def test_unset_config_caps_use_the_policy() -> None:
    tracker = LimitTracker.for_run(RunLimits(max_model_calls=7, max_tool_calls=9), RunConfig())
    assert (tracker.max_model_calls, tracker.max_tool_calls) == (7, 9)


@pytest.mark.parametrize(
    ("config_cap", "policy_cap", "effective"),
    [(3, 25, 3), (100, 25, 25), (25, 25, 25), (0, 25, 0)],
)
def test_stricter_cap_wins(config_cap: int, policy_cap: int, effective: int) -> None:
    limits = RunLimits(max_model_calls=policy_cap, max_tool_calls=policy_cap)
    config = RunConfig(max_model_calls=config_cap, max_tool_calls=config_cap)
    tracker = LimitTracker.for_run(limits, config)
    assert (tracker.max_model_calls, tracker.max_tool_calls) == (effective, effective)


def test_depth_cap_is_the_stricter_of_both() -> None:
    assert LimitTracker.for_run(RunLimits(max_depth=2), RunConfig()).max_depth == 2
    assert LimitTracker.for_run(RunLimits(max_depth=8), RunConfig(max_depth=3)).max_depth == 3


# ------------------------------------------------------------------------------------------ counters


def test_model_cap_is_inclusive() -> None:
    tracker = LimitTracker.for_run(RunLimits(), RunConfig(max_model_calls=2))
    tracker.record_model_call()
    tracker.record_model_call()
    assert tracker.remaining_model_calls == 0
    with pytest.raises(LimitExceeded) as info:
        tracker.record_model_call()
    assert info.value.limit == "model_calls"
    assert info.value.maximum == 2
    assert str(info.value) == "limit exceeded: max model calls (2) exceeded"
    assert tracker.model_calls == 3  # incremented before the check
    assert tracker.remaining_model_calls == 0
    assert not isinstance(info.value, RunTimeout)


def test_tool_cap_is_inclusive_and_independent() -> None:
    tracker = LimitTracker.for_run(RunLimits(max_tool_calls=1), RunConfig())
    tracker.record_tool_call()
    tracker.record_model_call()  # model calls count separately
    with pytest.raises(LimitExceeded, match=r"max tool calls \(1\) exceeded") as info:
        tracker.record_tool_call()
    assert (info.value.limit, info.value.maximum) == ("tool_calls", 1)
    assert (tracker.model_calls, tracker.tool_calls, tracker.remaining_tool_calls) == (1, 2, 0)


def test_zero_cap_trips_on_the_first_call() -> None:
    tracker = LimitTracker.for_run(RunLimits(max_model_calls=0), RunConfig())
    with pytest.raises(LimitExceeded, match=r"\(0\)"):
        tracker.record_model_call()


# ------------------------------------------------------------------------------------------ wall clock


def test_no_deadline_without_a_budget() -> None:
    clock = FakeClock()
    tracker = LimitTracker.for_run(RunLimits(), RunConfig(), clock=clock)
    clock.now += 1e6
    tracker.check_deadline()
    assert tracker.deadline is None
    assert tracker.wall_clock_s is None
    assert tracker.remaining_s() is None
    assert tracker.elapsed_s == pytest.approx(1e6)


def test_deadline_from_config_timeout() -> None:
    clock = FakeClock()
    tracker = LimitTracker.for_run(RunLimits(), RunConfig(timeout_s=10), clock=clock)
    assert tracker.deadline == 1010.0
    assert tracker.wall_clock_s == 10.0
    clock.now = 1009.5
    tracker.check_deadline()
    assert tracker.remaining_s() == pytest.approx(0.5)
    assert tracker.elapsed_s == pytest.approx(9.5)
    clock.now = 1010.0
    with pytest.raises(RunTimeout) as info:
        tracker.check_deadline()
    err = info.value
    assert isinstance(err, LimitExceeded)
    assert isinstance(err, TimeoutError)
    assert err.limit == "wall_clock"
    assert err.maximum == pytest.approx(10.0)
    assert "wall-clock limit (10.000 s) exceeded after 10.000 s" in str(err)
    clock.now = 1050.0
    assert tracker.remaining_s() == 0.0  # saturates


@pytest.mark.parametrize(
    ("config_timeout", "policy_wall", "budget"),
    [(10.0, None, 10.0), (None, 5.0, 5.0), (10.0, 5.0, 5.0), (2.0, 5.0, 2.0)],
)
def test_wall_clock_is_the_stricter_budget(
    config_timeout: float | None, policy_wall: float | None, budget: float
) -> None:
    clock = FakeClock()
    tracker = LimitTracker.for_run(
        RunLimits(max_wall_clock_s=policy_wall), RunConfig(timeout_s=config_timeout), clock=clock
    )
    assert tracker.deadline == pytest.approx(1000.0 + budget)


def test_inherited_deadline_tightens_but_never_loosens() -> None:
    clock = FakeClock()
    parent = LimitTracker.for_run(RunLimits(), RunConfig(timeout_s=3), clock=clock)
    clock.now += 1.0  # the child starts a second later with its own 10 s budget
    child = LimitTracker.for_run(RunLimits(), RunConfig(timeout_s=10), clock=clock, deadline=parent.deadline)
    assert child.deadline == parent.deadline == 1003.0
    assert child.wall_clock_s == pytest.approx(2.0)  # what is left of the parent's budget
    assert child.remaining_s() == pytest.approx(2.0)
    clock.now = 1003.0
    with pytest.raises(RunTimeout, match=r"\(2\.000 s\) exceeded after 2\.000 s"):
        child.check_deadline()

    clock.now = 2000.0
    loose = LimitTracker.for_run(RunLimits(), RunConfig(timeout_s=10), clock=clock, deadline=9999.0)
    assert loose.deadline == 2010.0


def test_inherited_deadline_alone_applies() -> None:
    clock = FakeClock()
    child = LimitTracker.for_run(RunLimits(), RunConfig(), clock=clock, deadline=1004.0)
    assert child.deadline == 1004.0
    clock.now = 1004.5
    with pytest.raises(RunTimeout):
        child.check_deadline()


def test_direct_construction_and_validation() -> None:
    clock = FakeClock()
    tracker = LimitTracker(max_model_calls=1, max_tool_calls=1, timeout_s=2.0, clock=clock)
    assert tracker.deadline == 1002.0
    assert "model_calls=0/1" in repr(tracker)
    for kwargs in (
        {"max_model_calls": -1, "max_tool_calls": 1},
        {"max_model_calls": 1, "max_tool_calls": "2"},
        {"max_model_calls": 1, "max_tool_calls": 1, "deadline": math.nan},
        {"max_model_calls": 1, "max_tool_calls": 1, "deadline": True},
        {"max_model_calls": 1, "max_tool_calls": 1, "timeout_s": 0},
        {"max_model_calls": 1, "max_tool_calls": 1, "max_depth": -2},
        {"max_model_calls": 1, "max_tool_calls": 1, "clock": 5},
    ):
        with pytest.raises(ConfigurationError):
            LimitTracker(**kwargs)


def test_clock_is_read_once_at_construction() -> None:
    reads: list[int] = []

    def clock() -> float:
        reads.append(1)
        return 50.0

    tracker = LimitTracker.for_run(RunLimits(), RunConfig(timeout_s=1), clock=clock)
    assert len(reads) == 1
    assert tracker.deadline == 51.0
