"""One client per event loop: a model shared by threads and loops never breaks another loop's requests."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import time
import warnings
from typing import Any

from tests.harness.replay_server import ReplayServer, chat_completion, sse_text_chunks, usage_body
from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    AgentRun,
    ModelDelta,
    ModelRequest,
    RetryPolicy,
    RunContext,
    RunPolicy,
    TextDelta,
    UserMessage,
)
from tinyagents_nb.harness.providers import OpenAIChatModel
from tinyagents_nb.harness.providers.wire import PerLoopClients

KEY = "sk-loops-SECRET-0123456789abcdef"
RETRYING = RetryPolicy(max_attempts=4, initial_backoff_s=0.001, max_backoff_s=0.002)


class _Client:
    """A stand-in client that records the loop it was closed on."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.closed_on: asyncio.AbstractEventLoop | None = None

    async def aclose(self) -> None:
        self.closed_on = asyncio.get_running_loop()


def test_each_loop_gets_its_own_client_and_asyncio_run_closes_it_on_that_loop() -> None:
    clients: PerLoopClients[_Client] = PerLoopClients(_Client)

    async def use() -> tuple[_Client, _Client]:
        return await clients.get(), await clients.get()

    first, again = asyncio.run(use())
    second, _ = asyncio.run(use())
    assert first is again  # one client per loop, reused within it
    assert second is not first
    assert first.closed_on is first.loop  # closed at that loop's shutdown, on that loop
    assert second.closed_on is second.loop
    assert len(clients) == 0


def test_aclose_closes_only_the_calling_loops_client() -> None:
    clients: PerLoopClients[_Client] = PerLoopClients(_Client)
    other_ready = threading.Event()
    release = threading.Event()
    seen: dict[str, _Client] = {}

    def other_thread() -> None:
        async def hold() -> None:
            seen["other"] = await clients.get()
            other_ready.set()
            await asyncio.to_thread(release.wait, 10)
            seen["other_after"] = await clients.get()

        asyncio.run(hold())

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert other_ready.wait(10)

    async def mine() -> _Client:
        client = await clients.get()
        await clients.aclose()
        return client

    own = asyncio.run(mine())
    assert own.closed_on is own.loop
    assert seen["other"].closed_on is None  # the other loop's client is untouched
    release.set()
    thread.join(10)
    assert seen["other_after"] is seen["other"]
    assert seen["other"].closed_on is seen["other"].loop


def test_clients_of_loops_closed_without_shutdown_are_forgotten() -> None:
    clients: PerLoopClients[_Client] = PerLoopClients(_Client)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(clients.get())
    loop.close()  # no shutdown_asyncgens: nothing could close the client on its loop
    assert len(clients) == 1
    asyncio.run(clients.get())  # the next get() forgets the dead loop's entry
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gc.collect()  # the abandoned guard must not try to schedule work on the closed loop
    assert len(clients) == 0


# ------------------------------------------------------------------------------------------ the model
def _model(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", base_url=server.base_url, api_key=KEY)


def _text(run: AgentRun) -> str:
    assert run.status == "completed", run.error
    return run.final_text


def test_sixteen_concurrent_run_sync_calls_share_one_model(replay_server: ReplayServer) -> None:
    total = 16
    for n in range(total):
        replay_server.enqueue(200, chat_completion(f"answer {n}", usage=usage_body(5, 2)), delay_s=0.3)
    model = _model(replay_server)
    harness: AgentHarness[None] = AgentHarness(model=model, policy=RunPolicy(retry=RETRYING))

    def one(n: int) -> str:
        return _text(harness.run_sync(f"question {n}"))

    with concurrent.futures.ThreadPoolExecutor(max_workers=total) as pool:
        answers = list(pool.map(one, range(total)))
    assert sorted(answers) == sorted(f"answer {n}" for n in range(total))
    assert len(replay_server.requests) == total  # no transport failure, so no paid retry


def test_a_stream_in_one_thread_survives_run_sync_in_another(replay_server: ReplayServer) -> None:
    pieces = [f"part{n} " for n in range(12)]
    replay_server.enqueue(200, sse_text_chunks(pieces, usage=usage_body(5, 12)), chunk_delay_s=0.04)
    model = _model(replay_server)
    harness: AgentHarness[None] = AgentHarness(model=model, policy=RunPolicy(retry=RetryPolicy(max_attempts=1)))
    streamed: list[str] = []
    runs: list[AgentRun] = []

    def on_event(offset: int, event: AgentEvent) -> None:
        if isinstance(event, ModelDelta) and isinstance(event.delta, TextDelta):
            streamed.append(event.delta.text)

    def stream_thread() -> None:  # a streaming harness run on this thread's own loop
        async def consume() -> AgentRun:
            ctx: RunContext[None] = RunContext()
            ctx.events.add_listener(on_event)
            return (await harness.invoke_with_status(ctx, "long answer please", streaming=True))[0]

        runs.append(asyncio.run(consume()))

    thread = threading.Thread(target=stream_thread)
    thread.start()
    deadline = time.monotonic() + 10
    while not streamed and time.monotonic() < deadline:
        time.sleep(0.005)
    assert streamed, "the stream never started"
    for n in range(3):  # each run_sync opens, uses and closes a client on its own loop
        replay_server.enqueue(200, chat_completion(f"quick {n}"))
        assert _text(harness.run_sync("quick question")) == f"quick {n}"
    thread.join(20)
    assert _text(runs[0]) == "".join(pieces)
    assert "".join(streamed) == "".join(pieces)
    assert len(replay_server.requests) == 4


def test_a_model_used_by_successive_asyncio_runs_leaves_no_open_client(replay_server: ReplayServer) -> None:
    model = _model(replay_server)
    seen: list[Any] = []

    async def call(n: int) -> None:
        replay_server.enqueue(200, chat_completion(f"a{n}"))
        response = await model.invoke(ModelRequest(messages=[UserMessage(text="hi")]))
        assert response.message.text == f"a{n}"
        seen.append(await model._http())

    for n in range(3):
        asyncio.run(call(n))
    assert len({id(client) for client in seen}) == 3
    assert all(client.is_closed for client in seen)  # each closed by its own loop's shutdown
