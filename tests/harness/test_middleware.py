from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AgentRun,
    AssistantMessage,
    ConfigurationError,
    Message,
    Middleware,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RunContext,
    SystemMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.memory import KeepLast
from tinyagents_nb.harness.middleware import (
    LoggingMiddleware,
    MessageTrimMiddleware,
    MiddlewareStack,
    PromptCacheGuardMiddleware,
    UsageAccountingMiddleware,
)
from tinyagents_nb.harness.models import MessageDelta
from tinyagents_nb.harness.testkit import ScriptedModel

pytestmark = pytest.mark.anyio


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


class Recorder(Middleware):
    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag = tag
        self.log = log

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        self.log.append(f"{self.tag}.before_agent")

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        self.log.append(f"{self.tag}.after_agent")

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        self.log.append(f"{self.tag}.before_model")
        return request

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        self.log.append(f"{self.tag}.after_model")
        return response

    def on_model_delta(self, ctx: RunContext[Any], delta: MessageDelta) -> None:
        self.log.append(f"{self.tag}.delta")

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall:
        self.log.append(f"{self.tag}.before_tool")
        return call

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        self.log.append(f"{self.tag}.after_tool")
        return result

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self.log.append(f"{self.tag}.on_error")


async def test_before_in_order_after_in_reverse() -> None:
    log: list[str] = []
    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"}), "done"])
    harness = AgentHarness(model=model, tools=[echo], middleware=[Recorder("a", log), Recorder("b", log)])
    await harness.invoke("go")
    assert log == [
        "a.before_agent", "b.before_agent",
        "a.before_model", "b.before_model", "b.after_model", "a.after_model",
        "a.before_tool", "b.before_tool", "b.after_tool", "a.after_tool",
        "a.before_model", "b.before_model", "b.after_model", "a.after_model",
        "b.after_agent", "a.after_agent",
    ]  # fmt: skip


async def test_on_model_delta_runs_per_fragment_when_streaming() -> None:
    log: list[str] = []
    harness = AgentHarness(model=ScriptedModel(["abcdefgh"], chunk_size=2), middleware=[Recorder("a", log)])
    await harness.invoke_streaming("go").result()
    assert log.count("a.delta") == 4


async def test_hooks_can_rewrite_requests_responses_calls_and_results() -> None:
    class Rewriter(Middleware):
        async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
            return request.with_messages((*request.messages, UserMessage(text="(be brief)")))

        async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
            return replace(response, message=replace(response.message, text=response.message.text.upper()))

        async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall:
            return replace(call, arguments={"text": "rewritten"})

        async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
            return ToolResult.ok(result.text + "!")

    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"}), "done"])
    run = await AgentHarness(model=model, tools=[echo], middleware=[Rewriter()]).invoke("go")
    assert model.requests[0].messages[-1] == UserMessage(text="(be brief)")
    assert run.messages[2].text == "rewritten!"
    assert run.final_text == "DONE"


async def test_on_error_reaches_every_middleware_once_even_if_one_fails() -> None:
    log: list[str] = []

    class Broken(Middleware):
        async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
            raise RuntimeError("reporting failed")

    harness = AgentHarness(
        model=ScriptedModel([ProviderError("nope")]), middleware=[Recorder("a", log), Broken(), Recorder("b", log)]
    )
    with pytest.raises(ProviderError) as info:
        await harness.invoke("go")
    assert log.count("a.on_error") == 1
    assert log.count("b.on_error") == 1
    assert any("reporting failed" in note for note in info.value.__notes__)


async def test_failing_hook_fails_the_run() -> None:
    class Refuse(Middleware):
        async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall:
            raise PermissionError("not allowed")

    run, _ = await AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"})]), tools=[echo], middleware=[Refuse()]
    ).invoke_with_status(RunContext(), "go")
    assert run.status == "failed"
    assert isinstance(run.error, PermissionError)


def test_stack_skips_hooks_nobody_overrides() -> None:
    class OnlyModel(Middleware):
        async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
            return request

    stack = MiddlewareStack([OnlyModel()])
    assert stack.has("before_model")
    assert not stack.has("after_tool")
    with pytest.raises(ConfigurationError):
        MiddlewareStack([object()])  # type: ignore[list-item]


async def test_message_trim_middleware_trims_requests_not_the_transcript() -> None:
    model = ScriptedModel(["ok"])
    history: list[Message] = [SystemMessage(text="sys")]
    for i in range(10):
        history += [UserMessage(text=f"q{i}"), AssistantMessage(text=f"a{i}")]
    history.append(UserMessage(text="last"))
    run = await AgentHarness(model=model, middleware=[MessageTrimMiddleware(KeepLast(n=3))]).invoke(history)
    sent = model.requests[0].messages
    assert [m.text for m in sent] == ["sys", "q9", "a9", "last"]
    assert len(run.messages) == len(history) + 1


async def test_usage_accounting_middleware() -> None:
    acct = UsageAccountingMiddleware()
    u = Usage(input_tokens=3, output_tokens=2)
    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"}, usage=u), ScriptedModel.text("d", usage=u)])
    await AgentHarness(model=model, tools=[echo], middleware=[acct]).invoke("go")
    assert acct.calls == {"scripted": 2}
    assert acct.total == u + u


async def test_prompt_cache_guard_detects_prefix_changes() -> None:
    class Drift(Middleware):
        n = 0

        async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
            self.n += 1
            return request.with_messages((SystemMessage(text=f"now {self.n}"), *request.messages[1:]))

    guard = PromptCacheGuardMiddleware()
    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"}), "done"])
    await AgentHarness(model=model, tools=[echo], system_prompt="s", middleware=[Drift(), guard]).invoke("go")
    assert len(guard.violations) == 1
    assert "prefix" in guard.violations[0]

    stable = PromptCacheGuardMiddleware(strict=True)
    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"}), "done"])
    await AgentHarness(model=model, tools=[echo], system_prompt="s", middleware=[stable]).invoke("go")
    assert stable.violations == []


async def test_logging_middleware_logs_ids_not_content(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "secret words"}), "done"])
    with caplog.at_level(logging.INFO, logger="tinyagents_nb.run"):
        await AgentHarness(model=model, tools=[echo], middleware=[LoggingMiddleware()]).invoke("private prompt")
    assert "tool echo" in caplog.text
    assert "private prompt" not in caplog.text
    assert "secret words" not in caplog.text


async def test_cache_guard_sees_the_request_after_context_pressure() -> None:
    """Trimming under pressure rewrites the cached prefix; the guard must see (and report) it."""

    @tool
    def fetch() -> str:
        """Return a big document."""
        return "word " * 400

    class Seen(Middleware):
        def __init__(self) -> None:
            self.sent: list[ModelRequest] = []

        async def before_send(self, ctx: RunContext[Any], request: ModelRequest) -> None:
            self.sent.append(request)

    history: list[Message] = [
        UserMessage(text="old question " * 170),
        AssistantMessage(text="old answer " * 170),
        UserMessage(text="new question"),
    ]
    guard, seen = PromptCacheGuardMiddleware(), Seen()
    model = ScriptedModel([ScriptedModel.tool_call("fetch", {}), "done"])
    harness = AgentHarness(
        model=model, tools=[fetch], system_prompt="s", middleware=[guard, seen], context_window=1_000
    )
    await harness.invoke(history)
    # the second request was relieved: the guard saw that, not the pre-pressure request
    assert [len(r.messages) for r in seen.sent] == [len(r.messages) for r in model.requests]
    assert all(a is b for a, b in zip(seen.sent, model.requests, strict=True))
    assert model.requests[1].messages[1] != history[0]  # pressure folded the old turn away in the sent request
    assert len(guard.violations) == 1
    assert "rewritten" in guard.violations[0]

    strict = PromptCacheGuardMiddleware(strict=True)
    model = ScriptedModel([ScriptedModel.tool_call("fetch", {}), "done"])
    harness = AgentHarness(model=model, tools=[fetch], system_prompt="s", middleware=[strict], context_window=1_000)
    with pytest.raises(ConfigurationError, match="rewritten"):
        await harness.invoke(history)
    assert model.calls == 1  # the rewritten request never reached the provider
