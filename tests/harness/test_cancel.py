from __future__ import annotations

import asyncio
import logging
import threading
import time

import anyio
import anyio.lowlevel
import pytest

from tinyagents_nb.harness import CancellationToken, Cancelled


def test_fresh_token_is_not_cancelled() -> None:
    token = CancellationToken()
    assert not token.is_cancelled
    assert token.reason is None
    token.raise_if_cancelled()
    assert "active" in repr(token)


def test_cancel_latches_and_first_reason_wins() -> None:
    token = CancellationToken()
    assert token.cancel("stop button") is True
    assert token.cancel("second") is False
    assert token.is_cancelled
    assert token.reason == "stop button"
    with pytest.raises(Cancelled, match="stop button"):
        token.raise_if_cancelled()


@pytest.mark.anyio
async def test_cancelled_returns_at_once_when_already_cancelled() -> None:
    token = CancellationToken()
    token.cancel()
    with anyio.fail_after(1):
        await token.cancelled()


@pytest.mark.anyio
async def test_cancel_from_another_thread_wakes_the_loop_promptly() -> None:
    token = CancellationToken()
    fired_at: list[float] = []

    def click() -> None:
        time.sleep(0.1)
        fired_at.append(time.monotonic())
        token.cancel("clicked")

    thread = threading.Thread(target=click)
    start = time.monotonic()
    thread.start()
    # Nothing else is scheduled on this loop for 30 s: only a thread-safe wake can end this early.
    with anyio.move_on_after(30) as scope:
        await token.cancelled()
    woke_at = time.monotonic()
    thread.join()
    assert not scope.cancelled_caught
    assert woke_at - start < 5
    assert woke_at - fired_at[0] < 1.0


@pytest.mark.anyio
async def test_cancelled_can_be_raced_and_cleans_up_its_waiter() -> None:
    token = CancellationToken()
    with anyio.move_on_after(0.05):
        await token.cancelled()
    assert token._waiters == []
    assert not token.is_cancelled


def test_waiters_on_several_loops_all_wake() -> None:
    token = CancellationToken()
    woke = threading.Barrier(4)
    errors: list[BaseException] = []

    def waiter() -> None:
        async def main() -> None:
            with anyio.fail_after(10):
                await token.cancelled()

        try:
            asyncio.run(main())
            woke.wait(timeout=10)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    token.cancel()
    woke.wait(timeout=10)
    for t in threads:
        t.join()
    assert errors == []


def test_on_cancel_callbacks(caplog: pytest.LogCaptureFixture) -> None:
    token = CancellationToken()
    calls: list[str] = []

    def boom(_: CancellationToken) -> None:
        raise RuntimeError("listener bug")

    token.on_cancel(boom)
    token.on_cancel(lambda t: calls.append(f"a:{t.reason}"))
    unregister = token.on_cancel(lambda t: calls.append("removed"))
    unregister()
    with caplog.at_level(logging.ERROR, logger="tinyagents_nb"):
        token.cancel("why")
    token.cancel("again")
    assert calls == ["a:why"]
    assert "cancellation callback" in caplog.text
    token.on_cancel(lambda t: calls.append("late"))
    assert calls == ["a:why", "late"]


@pytest.mark.anyio
async def test_scope_interrupts_a_wait_from_another_thread() -> None:
    token = CancellationToken()
    timer = threading.Timer(0.05, token.cancel, args=("stop",))
    timer.start()
    start = time.monotonic()
    with pytest.raises(Cancelled, match="stop"):
        with token.scope():
            await anyio.sleep(30)
    assert time.monotonic() - start < 5
    timer.join()


@pytest.mark.anyio
async def test_scope_with_pre_cancelled_token_raises_before_the_body() -> None:
    token = CancellationToken()
    token.cancel()
    ran = False
    with pytest.raises(Cancelled):
        with token.scope():
            ran = True
    assert not ran


@pytest.mark.anyio
async def test_scope_without_cancel_is_transparent() -> None:
    token = CancellationToken()
    with token.scope():
        await anyio.lowlevel.checkpoint()
    assert token._callbacks == {}


@pytest.mark.anyio
async def test_external_cancellation_is_not_converted() -> None:
    token = CancellationToken()
    with anyio.move_on_after(0.05) as outer:
        with token.scope():
            await anyio.sleep(30)
    assert outer.cancelled_caught
    assert not token.is_cancelled
