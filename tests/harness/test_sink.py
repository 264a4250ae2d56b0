from __future__ import annotations

import logging
import threading

import anyio
import pytest

from tinyagents_nb.harness import AgentEvent, EventSink, ModelDelta, RunCompleted, RunStarted, TextDelta


def ev(n: int = 0) -> AgentEvent:
    return ModelDelta(run_id="r", root_run_id="r", call_id=f"c{n}", delta=TextDelta(text=str(n)))


def test_offsets_are_ordered_from_zero() -> None:
    sink = EventSink()
    seen: list[int] = []
    sink.add_listener(lambda off, e: seen.append(off))
    assert [sink.emit(ev(i)) for i in range(5)] == [0, 1, 2, 3, 4]
    assert seen == [0, 1, 2, 3, 4]
    assert sink.next_offset == 5


def test_failing_listener_never_breaks_emission(caplog: pytest.LogCaptureFixture) -> None:
    sink = EventSink()
    good: list[int] = []

    def bad(off: int, e: AgentEvent) -> None:
        raise ValueError("listener bug")

    sink.add_listener(bad)
    sink.add_listener(lambda off, e: good.append(off))
    with caplog.at_level(logging.ERROR, logger="tinyagents_nb"):
        sink.emit(ev())
        sink.emit(ev())
    assert good == [0, 1]
    assert sink.listener_errors == 2
    assert "listener" in caplog.text


def test_reentrant_emit_keeps_offset_order() -> None:
    sink = EventSink()
    order: list[int] = []

    def relay(off: int, e: AgentEvent) -> None:
        order.append(off)
        if off == 0:
            sink.emit(ev(99))

    sink.add_listener(relay)
    sink.emit(ev())
    sink.emit(ev())
    assert order == [0, 1, 2]


def test_concurrent_emits_from_threads_are_delivered_in_order() -> None:
    sink = EventSink(history=0)
    seen: list[int] = []
    sink.add_listener(lambda off, e: seen.append(off))

    def spam() -> None:
        for i in range(2_000):
            sink.emit(ev(i))

    threads = [threading.Thread(target=spam) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == list(range(8_000))


def test_remove_listener_and_bounded_history() -> None:
    sink = EventSink(history=3)
    seen: list[int] = []
    remove = sink.add_listener(lambda off, e: seen.append(off))
    for i in range(5):
        sink.emit(ev(i))
    remove()
    sink.emit(ev())
    assert seen == [0, 1, 2, 3, 4]
    assert [off for off, _ in sink.recent()] == [3, 4, 5]
    with pytest.raises(ValueError, match="history"):
        EventSink(history=-1)


@pytest.mark.anyio
async def test_subscribe_filters_and_stops_at_until() -> None:
    sink = EventSink()
    sub = sink.subscribe(kinds={"model.delta", "run.completed"}, until=lambda e: e.kind == "run.completed")

    async def produce() -> None:
        sink.emit(RunStarted(run_id="r", root_run_id="r"))
        for i in range(3):
            await anyio.sleep(0.001)
            sink.emit(ev(i))
        sink.emit(RunCompleted(run_id="r", root_run_id="r"))
        sink.emit(ev(100))

    got: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        with anyio.fail_after(5):
            async for e in sub:
                got.append(e.kind)
    assert got == ["model.delta"] * 3 + ["run.completed"]


@pytest.mark.anyio
async def test_subscription_woken_from_another_thread() -> None:
    sink = EventSink()
    sub = sink.subscribe(until=lambda e: e.kind == "run.completed")

    def produce() -> None:
        for i in range(100):
            sink.emit(ev(i))
        sink.emit(RunCompleted(run_id="r", root_run_id="r"))

    thread = threading.Thread(target=produce)
    thread.start()
    with anyio.fail_after(5):
        kinds = [e.kind async for e in sub]
    thread.join()
    assert len(kinds) == 101
    assert kinds[-1] == "run.completed"


@pytest.mark.anyio
async def test_replay_maxsize_and_close() -> None:
    sink = EventSink()
    for i in range(3):
        sink.emit(ev(i))
    sub = sink.subscribe(replay=True, maxsize=2)
    sink.emit(ev(3))
    assert sub.dropped == 2
    sink.close()
    with anyio.fail_after(5):
        got = [e async for e in sub]
    assert [e.call_id for e in got] == ["c2", "c3"]  # type: ignore[attr-defined]
    late = sink.subscribe()
    with anyio.fail_after(5):
        assert [e async for e in late] == []


@pytest.mark.anyio
async def test_subscribe_since_catches_up_without_duplicates() -> None:
    sink = EventSink()
    for i in range(5):
        sink.emit(ev(i))
    sub = sink.subscribe(since=3)
    sink.emit(ev(5))
    sink.close()
    with anyio.fail_after(5):
        got = [e.call_id async for e in sub]  # type: ignore[attr-defined]
    assert got == ["c3", "c4", "c5"]


@pytest.mark.anyio
async def test_subscribe_where_filters_in_offset_order_with_state() -> None:
    sink = EventSink()
    seen: list[str] = []

    def first_two_runs(event: AgentEvent) -> bool:
        seen.append(event.run_id)
        return len(set(seen)) <= 2

    sub = sink.subscribe(where=first_two_runs, until=lambda e: e.run_id == "c")
    for run in ("a", "b", "a", "c"):
        sink.emit(RunStarted(run_id=run, root_run_id=run))
    sink.close()
    assert [e.run_id async for e in sub] == ["a", "b", "a"]
    assert seen == ["a", "b", "a", "c"]
