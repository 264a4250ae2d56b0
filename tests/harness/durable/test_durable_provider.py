"""A journaled run over the real OpenAI adapter and a 127.0.0.1 replay server: resumed, priced once, no secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, error_body, usage_body
from tinyagents_nb.harness import AgentHarness, ProviderError, RetryPolicy, RunPolicy, ToolMessage, tool
from tinyagents_nb.harness.durable import DurableJournal, RunStore
from tinyagents_nb.harness.providers import OpenAIChatModel

pytestmark = pytest.mark.anyio

KEY = "sk-durable-SECRET-0123456789abcdef"
NO_RETRY = RunPolicy(retry=RetryPolicy(max_attempts=1))


@tool(idempotent=True)
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 21C"


async def test_a_failed_provider_run_resumes_with_its_spend_and_no_key_in_the_store(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    replay_server.enqueue(
        200, chat_completion(tool_calls=[("call_a", "weather", '{"city": "Oslo"}')], usage=usage_body(50, 20))
    )
    replay_server.enqueue(400, error_body("bad request"))
    model = OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key=KEY)
    harness = AgentHarness(model=model, tools=[weather], middleware=[DurableJournal(store)], policy=NO_RETRY)
    try:
        with pytest.raises(ProviderError):
            await harness.invoke("weather in Oslo?")
        (failed,) = store.runs()
        assert failed.status == "failed"
        assert failed.usage.input_tokens == 50
        assert failed.cost_usd is not None
        assert failed.cost_usd > 0

        replay_server.enqueue(200, chat_completion("Oslo is 21C.", usage=usage_body(80, 8)))
        run = await harness.resume(failed.run_id, store=store)
    finally:
        await model.aclose()
    assert run.final_text == "Oslo is 21C."
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["Oslo: 21C"]
    assert run.usage.input_tokens == 130  # the failed run's call counted once, plus the new one
    assert run.cost is not None
    assert run.cost.total_usd == failed.cost_usd + store.get(run.run_id).cost_usd  # type: ignore[operator,union-attr]
    sent = replay_server.requests[-1].body
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    store.close()
    _assert_no_key(tmp_path)


def _assert_no_key(folder: Path) -> None:
    for file in folder.iterdir():  # the database and any WAL left beside it
        assert KEY.encode() not in file.read_bytes()
