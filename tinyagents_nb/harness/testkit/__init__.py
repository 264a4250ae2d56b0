"""Fakes and assertions for testing agents deterministically, offline.

``ScriptedModel`` replays responses (and errors), ``StreamingMock``/``SlowModel`` stream with real
delays for cancellation tests, ``FakeTool`` records calls, ``EventRecorder`` captures a sink and
``Trajectory`` asserts the shape of a (recursive) run.
"""

from __future__ import annotations

from ._testkit import (
    DeterministicClock as DeterministicClock,
    DeterministicIds as DeterministicIds,
    EchoModel as EchoModel,
    EventRecorder as EventRecorder,
    FakeTool as FakeTool,
    FunctionModel as FunctionModel,
    ScriptedModel as ScriptedModel,
    SlowModel as SlowModel,
    StreamingMock as StreamingMock,
)
from ._trajectory import Trajectory as Trajectory

__all__ = [
    "DeterministicClock",
    "DeterministicIds",
    "EchoModel",
    "EventRecorder",
    "FakeTool",
    "FunctionModel",
    "ScriptedModel",
    "SlowModel",
    "StreamingMock",
    "Trajectory",
]
