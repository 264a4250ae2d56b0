"""The ``batch`` executor against a 127.0.0.1 server implementing the OpenAI and Anthropic batch APIs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest

from tests.harness.batch.batch_server import (
    BatchServer,
    batch_server as batch_server,  # the fixture
)
from tests.harness.batch.rows_server import row_number
from tests.harness.replay_server import chat_completion, error_body, usage_body
from tinyagents_nb.harness import CancellationToken, ConfigurationError, tool
from tinyagents_nb.harness.batch import (
    MapCheckpoint,
    agent_map,
    agent_map_async,
    batch_job_status,
    batch_jobs,
    cancel_batch_job,
)
from tinyagents_nb.harness.providers import AnthropicModel, OpenAIChatModel

pytestmark = pytest.mark.anyio

SECRET = "sk-test-batch-0123456789SECRET"
FULL_ROW = 1000 * 0.15e-6 + 100 * 0.6e-6  # gpt-4o-mini at list price


class Label(pydantic.BaseModel):
    label: str
    score: int


def openai_answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    n = row_number(body)
    if n % 100 == 7:
        return 400, error_body(f"row {n} rejected", code="invalid_value")
    content = json.dumps({"label": "pos" if n % 2 else "neg", "score": n})
    return 200, chat_completion(content, usage=usage_body(1000, 100))


def anthropic_answer(params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    n = row_number(params)
    if n % 100 == 7:
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": f"row {n} rejected"}}
    return 200, {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": params["model"],
        "content": [{"type": "text", "text": f"answer {n}"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1000, "output_tokens": 100},
    }


def _rows(n: int) -> list[dict[str, str]]:
    return [{"text": f"row #{i}"} for i in range(n)]


def _openai(server: BatchServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=server.base_url, api_key=SECRET)


OPTIONS = {"poll_s": 0.01, "window_s": 0.05}


def test_openai_batch_structured_rows_at_half_price(batch_server: Callable[..., BatchServer], tmp_path: Path) -> None:
    server = batch_server(openai_answer)
    path = str(tmp_path / "map.sqlite")
    out = agent_map(
        _rows(200),
        "Classify {{text}}",
        model=_openai(server),
        output=Label,
        executor="batch",
        checkpoint=path,
        executor_options=OPTIONS,
    )
    assert (out["status"] == "failed").sum() == 2
    assert (out["status"] == "done").sum() == 198
    assert out.loc[9, "label"] == "pos"
    assert out.loc[9, "score"] == 9
    assert "row 7 rejected" in out.loc[7, "error"]
    assert out.loc[8, "cost_usd"] == pytest.approx(FULL_ROW / 2)  # the batch price is what the table shows
    assert len(server.uploads) == 1  # one JSONL file, one job
    lines = [json.loads(line) for line in server.uploads[0].decode().splitlines()]
    assert len(lines) == 200
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}
    assert lines[0]["body"]["response_format"]["type"] == "json_schema"
    assert all(h.get("authorization") == f"Bearer {SECRET}" for h in server.headers)
    with MapCheckpoint(path) as store:
        (job,) = batch_jobs(store)
        assert job.state == "collected"
        assert len(job.custom_ids) == 200
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir()) + b"".join(server.uploads)
    assert SECRET.encode() not in raw  # not in the checkpoint, the journal or the batch file


def test_anthropic_message_batches(batch_server: Callable[..., BatchServer]) -> None:
    server = batch_server(anthropic_answer)
    model = AnthropicModel("claude-3-5-haiku-20241022", base_url=server.base_url, api_key=SECRET)
    out = agent_map(_rows(120), "{{text}}", model=model, executor="batch", executor_options=OPTIONS)
    assert (out["status"] == "done").sum() == 118  # rows 7 and 107 fail
    assert out.loc[3, "answer"] == "answer 3"
    assert "row 7 rejected" in out.loc[7, "error"]
    assert all(h.get("x-api-key") == SECRET for h in server.headers)
    (upload,) = server.uploads
    assert len(json.loads(upload)["requests"]) == 120


async def test_a_restart_reattaches_to_the_journaled_job(
    batch_server: Callable[..., BatchServer], tmp_path: Path
) -> None:
    server = batch_server(openai_answer, polls_to_finish=4)
    path = str(tmp_path / "map.sqlite")
    token = CancellationToken()

    # The kernel "dies" as soon as the job is submitted (a death runs no Stop: detach is what it leaves).
    async def stop_when_submitted() -> None:
        await anyio.to_thread.run_sync(server.submitted.wait)
        token.cancel("Stop")

    async with anyio.create_task_group() as group:
        group.start_soon(stop_when_submitted)
        stopped = await agent_map_async(
            _rows(50),
            "{{text}}",
            model=_openai(server),
            output=Label,
            executor="batch",
            checkpoint=path,
            cancellation=token,
            executor_options={"poll_s": 0.05, "window_s": 0.05, "on_stop": "detach"},
            name="labels",
        )
    assert (stopped["status"] == "pending").all()
    with MapCheckpoint(path) as store:
        assert [job.state for job in batch_jobs(store, "labels")] == ["submitted"]
    again = await agent_map_async(
        _rows(50),
        "{{text}}",
        model=_openai(server),
        output=Label,
        executor="batch",
        checkpoint=path,
        executor_options=OPTIONS,
        name="labels",
    )
    assert len(server.uploads) == 1  # re-attached: nothing was sent twice
    assert server.answered == 50
    assert (again["status"] == "done").sum() == 49
    with MapCheckpoint(path) as store:
        assert [job.state for job in batch_jobs(store, "labels")] == ["collected"]


async def test_status_and_cancel_a_job(batch_server: Callable[..., BatchServer], tmp_path: Path) -> None:
    server = batch_server(openai_answer, polls_to_finish=1_000)
    path = str(tmp_path / "map.sqlite")
    token = CancellationToken()

    async def stop_when_submitted() -> None:
        await anyio.to_thread.run_sync(server.submitted.wait)
        token.cancel("Stop")

    async with anyio.create_task_group() as group:
        group.start_soon(stop_when_submitted)
        await agent_map_async(
            _rows(10),
            "{{text}}",
            model=_openai(server),
            executor="batch",
            checkpoint=path,
            cancellation=token,
            executor_options={"poll_s": 0.05, "window_s": 0.05, "on_stop": "detach"},
            name="m",
        )
    with MapCheckpoint(path) as store:
        (job,) = batch_jobs(store, "m")
        status = await batch_job_status(store, job.job_id, _openai(server))
        assert status.state == "running"
        assert status.total == 10
        cancelled = await cancel_batch_job(store, job.job_id, _openai(server))
        assert cancelled.detail == "cancelling"
        assert (await batch_job_status(store, job.job_id, _openai(server))).detail == "cancelled"
        assert batch_jobs(store, "m")[0].state == "cancelled"
        with pytest.raises(ConfigurationError, match="no batch job"):
            await batch_job_status(store, "batch_nope", _openai(server))


async def test_stop_cancels_the_job_and_the_next_run_sends_only_what_it_never_ran(
    batch_server: Callable[..., BatchServer], tmp_path: Path
) -> None:
    server = batch_server(openai_answer, polls_to_finish=1_000)
    path = str(tmp_path / "map.sqlite")
    token = CancellationToken()

    async def stop_when_submitted() -> None:
        await anyio.to_thread.run_sync(server.submitted.wait)
        token.cancel("Stop")

    with anyio.fail_after(30):  # promptly: Stop does not wait for the provider to finish cancelling
        async with anyio.create_task_group() as group:
            group.start_soon(stop_when_submitted)
            stopped = await agent_map_async(
                _rows(30),
                "{{text}}",
                model=_openai(server),
                executor="batch",
                checkpoint=path,
                cancellation=token,
                executor_options={"poll_s": 0.05, "window_s": 0.05},
                name="m",
            )
    assert stopped.attrs["agent_map"]["state"] == "stopped"
    assert (stopped["status"] == "pending").all()
    (first,) = server.batches.values()
    assert first["status"] == "cancelling"  # the provider was asked to cancel, so it bills no more
    assert server.answered == 0
    with MapCheckpoint(path) as store:
        assert [job.state for job in batch_jobs(store, "m")] == ["cancelling"]
    server.polls_to_finish = 1
    again = await agent_map_async(
        _rows(30),
        "{{text}}",
        model=_openai(server),
        executor="batch",
        checkpoint=path,
        executor_options=OPTIONS,
        name="m",
    )
    assert (again["status"] == "done").sum() == 29
    assert len(server.uploads) == 2  # the cancelled job ran nothing: every row went into a new job
    assert server.answered == 30
    with MapCheckpoint(path) as store:
        assert [job.state for job in batch_jobs(store, "m")] == ["cancelled", "collected"]


async def test_a_cancelled_anthropic_job_sends_its_canceled_requests_again(
    batch_server: Callable[..., BatchServer], tmp_path: Path
) -> None:
    server = batch_server(anthropic_answer, polls_to_finish=1_000)
    token = CancellationToken()
    path = str(tmp_path / "map.sqlite")

    def model() -> AnthropicModel:
        return AnthropicModel("claude-3-5-haiku-20241022", base_url=server.base_url, api_key=SECRET)

    async def stop_when_submitted() -> None:
        await anyio.to_thread.run_sync(server.submitted.wait)
        token.cancel("Stop")

    async with anyio.create_task_group() as group:
        group.start_soon(stop_when_submitted)
        await agent_map_async(
            _rows(5),
            "{{text}}",
            model=model(),
            executor="batch",
            checkpoint=path,
            cancellation=token,
            executor_options={"poll_s": 0.05, "window_s": 0.05},
            name="a",
        )
    (first,) = server.batches.values()
    assert first["processing_status"] == "canceling"
    server.polls_to_finish = 1
    again = await agent_map_async(
        _rows(5), "{{text}}", model=model(), executor="batch", checkpoint=path, executor_options=OPTIONS, name="a"
    )
    assert first["request_counts"]["canceled"] == 5  # the re-run read the first job's results: all canceled
    assert list(again["answer"]) == [f"answer {i}" for i in range(5)]  # sent again, not failed
    assert len(server.uploads) == 2


def test_batch_rows_cannot_have_tools(batch_server: Callable[..., BatchServer]) -> None:
    server = batch_server(openai_answer)

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return q

    with pytest.raises(ConfigurationError, match="drop the tools"):
        agent_map(_rows(2), "{{text}}", model=_openai(server), tools=[lookup], executor="batch")
