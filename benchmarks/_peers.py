"""The same workloads in pydantic-ai, LangChain v1 ``create_agent`` and openai-agents (python-peers.md §4).

Each peer gets an instant, stateless async fake model that decides from the last message (tool
result present or not) and an ``async def`` tool, so no framework pays a worker-thread hop that the
others do not. Agents are built once; a runner is an ``async () -> None`` that does one whole run
(or one whole conversation) and checks its output. A peer that is not installed yields a reason
instead of runners, and the benchmark prints it as skipped.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Peer", "load_peers"]

RunFn = Callable[[], Awaitable[None]]


@dataclass(kw_only=True)
class Peer:
    """One framework's runners for the overhead workloads (``None``: the framework cannot do it)."""

    name: str
    version: str
    text: RunFn
    tool: RunFn
    conversation: Callable[[int], RunFn]
    durable: Callable[[int], RunFn] | None = None
    durable_note: str = ""
    closers: list[Callable[[], None]] = field(default_factory=list)


def load_peers(workdir: Path) -> tuple[list[Peer], list[str]]:
    """Build every installed peer; returns the peers and one "skipped: why" line per missing one."""
    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")
    for var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        os.environ.pop(var, None)
    peers: list[Peer] = []
    skipped: list[str] = []
    for name, build in (("pydantic-ai", _pydantic_ai), ("langchain", _langchain), ("openai-agents", _openai_agents)):
        try:
            peers.append(build(workdir))
        except ImportError as exc:
            skipped.append(
                f"{name}: skipped, not installed ({exc.name or exc}); install with pip install -e '.[bench]'"
            )
    return peers, skipped


def _sqlite(path: Path) -> sqlite3.Connection:
    """A user-side message log with the same durability as our journal: WAL, one commit per write."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS messages (conversation TEXT, turn INTEGER, body BLOB)")
    return conn


# ------------------------------------------------------------------------------------------ pydantic-ai
def _pydantic_ai(workdir: Path) -> Peer:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def text_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("done")])

    async def tool_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("add_one", {"x": 1}, tool_call_id="c1")])

    text_agent = Agent(FunctionModel(text_fn))
    tool_agent = Agent(FunctionModel(tool_fn))

    @tool_agent.tool_plain
    async def add_one(x: int) -> int:
        return x + 1

    async def text() -> None:
        assert (await text_agent.run("go")).output == "done"

    async def tool() -> None:
        assert (await tool_agent.run("go")).output == "done"

    def conversation(turns: int) -> RunFn:
        async def run() -> None:
            history: list[ModelMessage] = []
            for i in range(turns):
                result = await text_agent.run(f"question {i}", message_history=history)
                history = result.all_messages()
            assert len(history) == 2 * turns

        return run

    conn = _sqlite(workdir / "pydantic_ai.db")
    counter = iter(range(10**9))

    def durable(turns: int) -> RunFn:
        # pydantic-ai has no built-in store: its docs persist new_messages_json() yourself, as here.
        async def run() -> None:
            conv = f"c{next(counter)}"
            history: list[ModelMessage] = []
            for i in range(turns):
                result = await text_agent.run(f"question {i}", message_history=history)
                conn.execute("INSERT INTO messages VALUES (?, ?, ?)", (conv, i, result.new_messages_json()))
                history = result.all_messages()

        return run

    return Peer(
        name="pydantic-ai",
        version=_version("pydantic-ai-slim"),
        text=text,
        tool=tool,
        conversation=conversation,
        durable=durable,
        durable_note="no built-in store: new_messages_json() into SQLite per turn (user code, as its docs show)",
        closers=[conn.close],
    )


# ------------------------------------------------------------------------------------------ LangChain
def _langchain(workdir: Path) -> Peer:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool as lc_tool

    class FakeChat(GenericFakeChatModel):
        """Text, or a tool call until a tool result is the last message (recipe §4.3)."""

        calls_tools: bool = False

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            if self.calls_tools and not isinstance(messages[-1], ToolMessage):
                message = AIMessage(content="", tool_calls=[{"id": "c1", "name": "add_one", "args": {"x": 1}}])
            else:
                message = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=message)])

        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            return self._generate(messages, stop)

    @lc_tool
    async def add_one(x: int) -> int:
        """Add one."""
        return x + 1

    text_agent = create_agent(FakeChat(messages=iter([])))
    tool_agent = create_agent(FakeChat(messages=iter([]), calls_tools=True), tools=[add_one])
    go: Any = {"messages": [{"role": "user", "content": "go"}]}

    async def text() -> None:
        assert (await text_agent.ainvoke(go))["messages"][-1].content == "done"

    async def tool() -> None:
        assert (await tool_agent.ainvoke(go))["messages"][-1].content == "done"

    def conversation(turns: int) -> RunFn:
        async def run() -> None:
            history: list[BaseMessage] = []
            for i in range(turns):
                state: Any = {"messages": [*history, HumanMessage(f"question {i}")]}
                state = await text_agent.ainvoke(state)
                history = state["messages"]
            assert len(history) == 2 * turns

        return run

    return Peer(
        name="langchain",
        version=f"{_version('langchain')} (langgraph {_version('langgraph')}, core {_version('langchain-core')})",
        text=text,
        tool=tool,
        conversation=conversation,
        durable=None,
        durable_note="skipped: its SQLite checkpointer is a separate package (langgraph-checkpoint-sqlite)",
    )


# ------------------------------------------------------------------------------------------ openai-agents
def _openai_agents(workdir: Path) -> Peer:
    from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.testing.model import assistant_message, function_call
    from agents.usage import Usage

    set_tracing_disabled(True)
    done = [assistant_message("done")]
    call = [function_call("add_one", {"x": 1}, call_id="c1")]

    class FakeModel(Model):
        """Text, or a tool call until a function_call_output is the last input item (recipe §4.4)."""

        def __init__(self, *, calls_tools: bool) -> None:
            self.calls_tools = calls_tools

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            output = done
            if self.calls_tools:
                last = input[-1] if isinstance(input, list) and input else None
                kind = last.get("type") if isinstance(last, dict) else getattr(last, "type", None)
                output = done if kind == "function_call_output" else call
            return ModelResponse(output=list(output), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def add_one(x: int) -> int:
        """Add one."""
        return x + 1

    text_agent: Agent[Any] = Agent(name="bench", instructions="", model=FakeModel(calls_tools=False))
    tool_agent: Agent[Any] = Agent(name="bench", instructions="", tools=[add_one], model=FakeModel(calls_tools=True))
    config = RunConfig(tracing_disabled=True)

    async def text() -> None:
        assert (await Runner.run(text_agent, "go", run_config=config)).final_output == "done"

    async def tool() -> None:
        assert (await Runner.run(tool_agent, "go", run_config=config)).final_output == "done"

    def conversation(turns: int) -> RunFn:
        async def run() -> None:
            items: list[Any] = []
            for i in range(turns):
                result = await Runner.run(
                    text_agent, [*items, {"role": "user", "content": f"question {i}"}], run_config=config
                )
                items = result.to_input_list()
            assert len(items) == 2 * turns

        return run

    db = workdir / "openai_agents.db"
    counter = iter(range(10**9))

    def durable(turns: int) -> RunFn:
        async def run() -> None:
            session = SQLiteSession(f"c{next(counter)}", db)
            try:
                for i in range(turns):
                    await Runner.run(text_agent, f"question {i}", session=session, run_config=config)
            finally:
                session.close()

        return run

    return Peer(
        name="openai-agents",
        version=_version("openai-agents"),
        text=text,
        tool=tool,
        conversation=conversation,
        durable=durable,
        durable_note="SQLiteSession on a file (loads the history from SQLite every turn)",
    )


def _version(name: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(name)
