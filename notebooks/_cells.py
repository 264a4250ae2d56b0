"""The cells of the example notebooks: the source ``_build.py`` writes the ``.ipynb`` files from.

Edit a notebook here, then run ``.venv/bin/python notebooks/_build.py`` to rewrite and re-execute it.

Conventions, so ``pytest --nbval-lax`` can test every notebook against its stored outputs:

- ``check=True`` tags a cell ``nbval-check-output``: its output is deterministic (after
  ``nbval_sanitize.cfg`` masks ids, costs and times) and nbval compares it. These are plain-text
  summaries: statuses, answers, token counts, tables.
- ``ignore=True`` tags a cell ``nbval-ignore-output``: dashboards (widgets) and anything timing-dependent.
- Every notebook starts offline: ``USE_REAL_PROVIDER`` is true only when ``OPENAI_API_KEY`` is set,
  and the build and the tests remove every ``*_API_KEY`` variable from the kernel's environment.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NOTEBOOKS", "Cell", "code", "md"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Cell:
    """One notebook cell: markdown or code, and for code whether nbval compares or ignores its output."""

    kind: str
    source: str
    check: bool = False
    ignore: bool = False
    raises: bool = False
    """The cell raises on purpose (tagged ``raises-exception``: nbclient and nbval expect the error)."""


def md(source: str) -> Cell:
    return Cell(kind="markdown", source=source.strip("\n"))


def code(source: str, *, check: bool = False, ignore: bool = False, raises: bool = False) -> Cell:
    return Cell(kind="code", source=source.strip("\n"), check=check, ignore=ignore, raises=raises)


LOAD = code("%load_ext tinyagents_nb")
OFFLINE_NOTE = """
**Offline by default.** Without an API key this notebook uses scripted stand-in models from the
testkit: they stream canned answers with fixed token counts, call tools and spawn sub-agents, so the
notebook runs anywhere and prints the same thing every time (that is how CI tests it). With
`OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`; the configuration cell switches.
"""

# ---------------------------------------------------------------------------------------------- 01
QUICKSTART = [
    md(
        """
# Quickstart

Ask an agent a question in a notebook cell, continue the conversation in the next one, then see
what it cost and how full its context window is.

**Offline by default.** Nothing here needs a key or a network: the first answer comes from the
built-in offline model, and the rest from a stand-in model that streams canned answers (that is how
CI tests this notebook). With `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`.
"""
    ),
    md(
        """
## Load the extension

`%load_ext` adds the `%%agent` cell magic and the `%agent` line magics, and creates this kernel's
*session*: one conversation thread, history, event journal and usage and cost ledger for the
whole notebook.
"""
    ),
    LOAD,
    md(
        """
## Ask, with no model configured

A `%%agent` cell sends its body as the prompt. With no model configured, the built-in offline model
answers: it sends nothing anywhere and tells you how to configure a real model.
"""
    ),
    code(
        """
%%agent --new-thread
Hello! What can you do?
""",
        ignore=True,
    ),
    md(
        """
## Choose the model

`%agent model NAME` sets the model for every following `%%agent` cell, e.g. `%agent model
openai:gpt-4o-mini` (its key is read from `OPENAI_API_KEY`; `%env OPENAI_API_KEY=...` sets it from a
cell; `%agent models` lists every provider). Offline, `demo_model` registers a stand-in that
streams the answers you give it, priced like gpt-4o-mini, so the cost table has numbers in it.
"""
    ),
    code(
        """
import os

from tinyagents_nb.magics import demo_model, get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))  # set to False to stay offline anyway

MODEL = "openai:gpt-4o-mini"
if not USE_REAL_PROVIDER:  # canned answers, streamed (re-run this cell to start the script over)
    MODEL = demo_model(
        [
            "A context window is the most text a model can read at once, counted in tokens: the "
            "instructions, the conversation so far, tool results and the answer itself must all fit. "
            "For an agent it matters because every step adds to the transcript, so a long task runs "
            "out of room unless old context is trimmed, summarized or dropped.",
            "Keep tool outputs small: return the few rows or lines the model needs instead of a whole "
            "file, because tool results are usually the largest thing in an agent's context.",
        ]
    )
%agent model {MODEL}
%agent thread new
session = get_session()
"""
    ),
    md(
        """
## Ask the model

The dashboard streams the answer as it arrives, with tokens and cost in its header, Stop, Pause and
a steer box, a context gauge, and (once there are any) tool calls and sub-agents. `--name first`
binds the run's handle to the variable `first` (every run is also bound to `_agent`).
"""
    ),
    code(
        """
%%agent --name first
In two sentences: what is a context window, and why does it matter for an agent?
""",
        ignore=True,
    ),
    md(
        """
The cell waits for its run while the dashboard streams (Stop, Pause and the steer box work
meanwhile); when the run ends, the dashboard gives way to a static record of the answer and its
one-line summary, which the saved notebook keeps. The handle gives the result to Python code
(`--background` returns at once instead: see [execution modes](../docs/jupyter/execution-modes.md)).
"""
    ),
    code(
        """
run = await first  # the finished AgentRun; raises the run's error if it failed
print(run.status, "·", run.usage.total_tokens, "tokens")
print(run.final_text)
""",
        check=True,
    ),
    md(
        """
## Follow up

The next cell continues the same conversation: the session saved the first exchange in the
thread's history and sends it along, which is why this call reads more input tokens.
"""
    ),
    code(
        """
%%agent --name followup
Give me one practical tip for staying inside it.
""",
        ignore=True,
    ),
    code(
        """
run = await followup
print(run.status, "·", run.usage.input_tokens, "input tokens")
print(run.final_text)
print("thread history:", [message.role for message in session.messages()])
""",
        check=True,
    ),
    md(
        """
## What did it cost?

Every run records its usage and cost in the session's ledger. `%agent cost` prints the notebook's
total and returns a table by run, agent (sub-agents get their own rows) and model.
"""
    ),
    code("%agent cost", check=True),
    md(
        """
## How full is the context window?

`%agent context` shows the thread's gauge: the prompt estimate made before the last model call,
against the model's usable window (its total minus the room kept for the answer).
"""
    ),
    code("%agent context", check=True),
    md(
        """
## Next

- [Tools and structured output](02_tools_and_structured_output.ipynb): notebook functions as tools, injected values, typed answers.
- [Steering and cancellation](03_steering_and_cancellation.ipynb): pause, steer, resume and stop a running agent.
- [Sub-agents and recursion](04_subagents_and_recursion.ipynb): agents as tools, the run tree, a depth limit.
- [Context pressure](05_context_pressure.ipynb): what happens when the conversation outgrows the window.
- [Observability](06_observability.ipynb): the event journal, replay, metrics and redaction.

Every magic and flag: [docs/jupyter/magics.md](../docs/jupyter/magics.md).
"""
    ),
]

# ---------------------------------------------------------------------------------------------- 02
TOOLS = [
    md(
        """
# Tools and structured output

Give the agent functions from this notebook as tools (one reads a pandas DataFrame defined right
here), hand it runtime values the model never sees, and get an answer back as a validated pydantic
object.
"""
        + OFFLINE_NOTE
    ),
    LOAD,
    code(
        """
import os

from tinyagents_nb.harness import ModelProfile, Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))

session = get_session()
if USE_REAL_PROVIDER:
    MODEL = "openai:gpt-4o-mini"
else:
    MODEL = "scripted"  # answers in order: re-run this cell to start the script over
    session.register_model(
        MODEL,
        ScriptedModel(
            [
                # the %%agent run: two tool calls, then the answer
                ScriptedModel.tool_call("revenue_by_region", {"quarter": "Q2"}, usage=Usage(input_tokens=182, output_tokens=17)),
                ScriptedModel.tool_call("in_user_currency", {"amount_usd": 131000}, usage=Usage(input_tokens=231, output_tokens=19)),
                ScriptedModel.text(
                    "North had the highest Q2 revenue: $131,000, which is 120,520 EUR.",
                    usage=Usage(input_tokens=270, output_tokens=21),
                ),
                # the structured-output run: one tool call, then the typed answer
                ScriptedModel.tool_call("revenue_by_region", {"quarter": "Q2"}, usage=Usage(input_tokens=240, output_tokens=17)),
                ScriptedModel.tool_call(
                    "QuarterReport",
                    {"quarter": "Q2", "best_region": "north", "revenue_usd": 131000, "regions_below_100k": ["south"]},
                    usage=Usage(input_tokens=305, output_tokens=38),
                ),
            ],
            model_name=MODEL,
            chunk_size=6,
            profile=ModelProfile(name=MODEL, provider="test", context_window=128_000),
        ),
    )
%agent model {MODEL}
"""
    ),
    md(
        """
## The data

A DataFrame that lives only in this kernel. The agent will answer questions about it through a tool.
"""
    ),
    code(
        """
import pandas as pd

sales = pd.DataFrame(
    {
        "region": ["north", "south", "east", "west"] * 2,
        "quarter": ["Q1"] * 4 + ["Q2"] * 4,
        "revenue_usd": [120_000, 95_000, 143_000, 88_000, 131_000, 99_000, 128_000, 104_000],
    }
)
sales
""",
        check=True,
    ),
    md(
        """
## Tools from notebook functions

`@agent_tool` registers a function with the session, and every `%%agent` run is offered it. Its
name, docstring and annotated parameters become the schema the model sees; the function runs in
the kernel, so it reads `sales` directly.

A parameter typed as a runtime handle (`RunContext`, a store, the cancellation token, ...) is
*injected*: the harness fills it in and leaves it out of the schema, so the model can neither see
nor forge it. `in_user_currency` uses the run's context to read the user's currency from the
session's per-thread state.
"""
    ),
    code(
        """
from tinyagents_nb.harness import RunContext
from tinyagents_nb.harness.memory import get_state
from tinyagents_nb.magics import agent_tool


@agent_tool
def revenue_by_region(quarter: str) -> dict[str, int]:
    \"\"\"Total revenue in USD per region for one quarter, e.g. "Q2".\"\"\"
    rows = sales[sales["quarter"] == quarter]
    return {region: int(total) for region, total in rows.groupby("region")["revenue_usd"].sum().items()}


@agent_tool
def in_user_currency(amount_usd: float, ctx: RunContext) -> str:
    \"\"\"Convert an amount in USD into the user's currency.\"\"\"
    user = get_state(ctx, "user")  # this thread's state, reached through the injected context
    return f"{amount_usd * user['usd_rate']:,.0f} {user['currency']}"


session.state.set_state(session.thread_id, "user", {"name": "Ada", "currency": "EUR", "usd_rate": 0.92})
"""
    ),
    md(
        """
`%agent tools` lists what the model is offered. `ctx` is not among the parameters:
"""
    ),
    code("%agent tools", check=True),
    md(
        """
## Ask

The model calls `revenue_by_region`, then `in_user_currency`, then answers. The dashboard's
*Tool calls* pane shows each call with its arguments and result as it happens.
"""
    ),
    code(
        """
%%agent --name q2
Which region had the highest revenue in Q2, and how much is that in my currency?
""",
        ignore=True,
    ),
    code(
        """
run = await q2
for message in run.messages:
    if message.role == "tool":
        print(f"{message.name} -> {message.text}")
print(run.final_text)
""",
        check=True,
    ),
    md(
        """
## Structured output

For an answer your code can use, ask for a type. `%%agent` answers in text, so this step calls the
harness API directly, on a new root of the session's context (its events, usage and cost land in
the same journal and ledger). `output_type=QuarterReport` offers the model the schema (offline as an
extra tool it must call) and validates its answer with pydantic; an answer that does not fit fails
the run with `StructuredOutputError` rather than returning something half-typed.
"""
    ),
    code(
        """
from pydantic import BaseModel, Field

from tinyagents_nb.harness import AgentHarness


class QuarterReport(BaseModel):
    quarter: str
    best_region: str
    revenue_usd: int = Field(ge=0)
    regions_below_100k: list[str]


reporter = AgentHarness(model=session.resolve_model(MODEL), tools=list(session.tools), output_type=QuarterReport)
result = await reporter.invoke_in_context(session.context.new_root(), "Summarize Q2 as a QuarterReport.")
report = result.structured.value
report
""",
        check=True,
    ),
    code(
        """
print(f"{report.best_region} led {report.quarter} with ${report.revenue_usd:,}; below $100k: {report.regions_below_100k}")
""",
        check=True,
    ),
]

# ---------------------------------------------------------------------------------------------- 03
STEERING = [
    md(
        """
# Steering and cancellation

A long run that you control while it works: pause it, steer it with a message, resume it, and stop
runs from the dashboard's Stop button and with `%agent stop`. A stopped run keeps its partial
transcript and the usage it had so far.

**This notebook uses background runs** (`%%agent --background`): the cell starts the run and
returns at once, and the following cells control it while it streams on the session's own thread.
(A default, waiting `%%agent` cell is controlled from its dashboard instead: Stop, Pause, Resume
and the steer box work while it waits.)

Executed headless (nbconvert, papermill, nbval), a `--background` cell waits for its run, because no
frontend would update the cell afterwards. This notebook controls its runs from later cells, so it
keeps them in the background with `headless_background = "keep"` and awaits each one: a run's
record lands in its own cell while a later cell waits for it.
"""
        + OFFLINE_NOTE
    ),
    code(
        """
%load_ext tinyagents_nb
%config AgentMagics.headless_background = "keep"
"""
    ),
    md(
        """
## A slow agent

The agent reads an annual report one chapter per tool call, and each chapter takes a moment, so
there is time to intervene. Offline, a `FunctionModel` plays the model: it asks for the next chapter
until it has read all six, then summarizes, and follows a steer message if it got one.
"""
    ),
    code(
        """
import asyncio
import os

from tinyagents_nb.harness import ModelRequest, ModelResponse, Usage
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel, SlowModel
from tinyagents_nb.magics import agent_tool, get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))

REPORT = {
    1: "Revenue grew 12% to $60M.",
    2: "Costs rose 8% to $42M, mostly cloud spend.",
    3: "Headcount went from 210 to 236.",
    4: "Two product launches slipped to next year.",
    5: "Cash on hand is $18M.",
    6: "Outlook: flat revenue, lower costs.",
}


@agent_tool
async def read_chapter(number: int) -> str:
    \"\"\"Read one chapter (1-6) of the annual report.\"\"\"
    await asyncio.sleep(0.15)  # a slow source
    return REPORT.get(number, "There is no such chapter.")


def reviewer(request: ModelRequest) -> ModelResponse:
    \"\"\"Offline stand-in: one chapter per turn, then a summary that follows any steer message.\"\"\"
    read = sum(message.role == "tool" for message in request.messages)
    usage = Usage(input_tokens=120 + 35 * read, output_tokens=14)
    if read < len(REPORT):
        return ScriptedModel.tool_call("read_chapter", {"number": read + 1}, text=f"Reading chapter {read + 1}. ", usage=usage)
    steered = any(message.role == "user" for message in request.messages[1:])
    if steered:
        return ScriptedModel.text("Totals: revenue $60M, costs $42M, so an $18M margin (30%).", usage=usage)
    return ScriptedModel.text("Growth with rising costs, two launches slipped, a flat outlook.", usage=usage)


session = get_session()
if USE_REAL_PROVIDER:
    MODEL = "openai:gpt-4o-mini"
else:
    MODEL = "scripted"
    session.register_model(MODEL, SlowModel(FunctionModel(reviewer, model_name=MODEL, chunk_size=4), chunk_delay_s=0.02))
%agent model {MODEL}
"""
    ),
    md(
        """
## Start a long run

No `--wait`: the cell returns at once and the run streams in the dashboard. `--new-thread` gives
each run of this notebook its own conversation.
"""
    ),
    code(
        """
%%agent --background --name long --new-thread
Read the annual report chapter by chapter with read_chapter (chapters 1 to 6), then summarize it in one sentence.
""",
        ignore=True,
    ),
    md(
        """
## Pause, steer, resume

`%agent pause` holds the run before its next model call (the dashboard's Pause button does the
same). While it is paused, `%agent steer` queues a user message that the next model call will see,
and `%agent resume` lets it continue.
"""
    ),
    code(
        """
await asyncio.sleep(0.5)  # let it read a chapter or two
%agent pause
""",
        check=True,
    ),
    code(
        """
while long.status != "paused":  # the pause takes effect at the run's next checkpoint
    await asyncio.sleep(0.05)
print(long.status)
""",
        check=True,
    ),
    code("%agent steer Focus on the totals: revenue, costs and margin.", check=True),
    code("%agent resume", check=True),
    md(
        """
Awaiting the handle waits for the end. The summary follows the steer message:
"""
    ),
    code(
        """
run = await long
print(run.status, "·", run.tool_calls, "chapters read")
print(run.final_text)
""",
        check=True,
    ),
    md(
        """
## Stop from the dashboard

The Stop button cancels the run cooperatively: the run stops at its next checkpoint (between
tokens, before a model or tool call) and ends as `cancelled`. The notebook clicks it here with
`Button.click()`, which runs the same callback as a real click; `second.cancel()` does the same
from code.
"""
    ),
    code(
        """
%%agent --background --name second --new-thread
Read the annual report chapter by chapter with read_chapter (chapters 1 to 6), then summarize it in one sentence.
""",
        ignore=True,
    ),
    code(
        """
await asyncio.sleep(0.5)
second.dashboard.controls.stop.click()
run = await second.wait()  # wait() returns a cancelled run; `await second` would raise RunCancelled
print(run.status, "·", run.error.reason)
""",
        check=True,
    ),
    md(
        """
The partial transcript and the usage so far survive the cancel (how far it got depends on timing,
so this output varies):
"""
    ),
    code(
        """
for message in run.messages:
    calls = "".join(f" -> {call.name}({call.arguments})" for call in getattr(message, "tool_calls", ()))
    partial = " (partial: streamed when the stop came)" if "partial" in message.tags else ""
    print(f"{message.role:>9}: {message.text.strip()}{calls}{partial}")
print(f"before the stop: model calls {run.model_calls}, tool calls {run.tool_calls}, tokens {run.usage.total_tokens}")
""",
        ignore=True,
    ),
    md(
        """
## Stop with `%agent stop`

`%agent stop` cancels the latest active run (or a named one, or `all`), from any cell.
"""
    ),
    code(
        """
%%agent --background --name third --new-thread
Read the annual report chapter by chapter with read_chapter (chapters 1 to 6), then summarize it in one sentence.
""",
        ignore=True,
    ),
    code(
        """
await asyncio.sleep(0.5)
%agent stop third
""",
        check=True,
    ),
    code(
        """
run = await third.wait()
print(run.status, "·", run.error.reason)
""",
        check=True,
    ),
    md(
        """
The session keeps every run; `%agent runs` has the full table (ids, tokens, cost).
"""
    ),
    code('session.runs_frame()[["run", "status", "mode"]]', check=True),
]

# ---------------------------------------------------------------------------------------------- 04
SUBAGENTS = [
    md(
        """
# Sub-agents and recursion

An orchestrator that delegates to sub-agents registered as tools: a `researcher` that may hand a
sub-question to another researcher (recursion), and a `writer`. Every sub-agent runs as a child of
its caller, so one event stream shows the whole tree, the dashboard's *Agents* pane draws it live,
and usage and cost roll up per subtree. A depth limit stops the recursion, and the refused call is
reported to the parent as a tool result, so the parent carries on.
"""
        + OFFLINE_NOTE
    ),
    LOAD,
    code(
        """
import os

from tinyagents_nb.harness import ModelPricing, Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))
REAL_MODEL = "openai:gpt-4o-mini"


def scripted(*responses):
    \"\"\"Offline stand-in: a model that streams these responses in order.\"\"\"
    return ScriptedModel(list(responses), model_name="scripted", chunk_size=6)


session = get_session()
session.context.costs.register_price("scripted", ModelPricing(input_per_mtok="0.15", output_per_mtok="0.60"))
"""
    ),
    md(
        """
## The sub-agents

A `SubAgent` wraps a whole agent (`AgentHarness`) and `as_tool()` turns it into a tool whose only
input is a task. The researcher's own tools include the researcher, so it can recurse; its
`RunLimits(max_depth=2)` caps how deep researchers may nest.
"""
    ),
    code(
        """
from tinyagents_nb.harness import AgentHarness, RunLimits, RunPolicy, SubAgent

researcher_model = REAL_MODEL if USE_REAL_PROVIDER else scripted(
    # depth 1: delegate the sourcing question
    ScriptedModel.tool_call("researcher", {"input": "Find the most recent figure for installed tidal capacity."}, usage=Usage(input_tokens=210, output_tokens=24)),
    # depth 2: try to delegate a check of the source (refused: too deep)
    ScriptedModel.tool_call("researcher", {"input": "Double-check the source of that figure."}, usage=Usage(input_tokens=190, output_tokens=19)),
    # depth 2, after the refusal: answer without the check
    ScriptedModel.text("About 0.5 GW was installed worldwide in 2023; I could not double-check the source (depth limit).", usage=Usage(input_tokens=260, output_tokens=27)),
    # depth 1: report up
    ScriptedModel.text("Installed tidal capacity is about 0.5 GW (2023 figure, source not double-checked).", usage=Usage(input_tokens=290, output_tokens=22)),
)
researcher_harness = AgentHarness(
    model=researcher_model,
    system_prompt="You research one question. You may delegate a narrower sub-question to a researcher.",
    policy=RunPolicy(limits=RunLimits(max_depth=2)),
)
researcher = SubAgent(
    "researcher", researcher_harness, description="Researches one question; may delegate a sub-question to another researcher."
)
researcher_harness.tools.register(researcher.as_tool())  # recursion: a researcher can call a researcher

writer = SubAgent(
    "writer",
    AgentHarness(
        model=REAL_MODEL if USE_REAL_PROVIDER else scripted(
            ScriptedModel.text("Tidal power is still tiny: about half a gigawatt worldwide.", usage=Usage(input_tokens=95, output_tokens=14)),
        ),
        system_prompt="You turn notes into one clear sentence.",
    ),
    description="Turns notes into one clear sentence for a general reader.",
)

session.register_tool(researcher.as_tool())
session.register_tool(writer.as_tool())
%agent tools
""",
        check=True,
    ),
    md(
        """
## The orchestrator

The notebook's default model plays the orchestrator: it is offered every registered tool, so both
sub-agents.
"""
    ),
    code(
        """
if USE_REAL_PROVIDER:
    MODEL = REAL_MODEL
else:
    MODEL = "orchestrator"
    session.register_model(
        MODEL,
        scripted(
            ScriptedModel.tool_call("researcher", {"input": "How much tidal power capacity is installed worldwide?"}, usage=Usage(input_tokens=230, output_tokens=21)),
            ScriptedModel.tool_call("writer", {"input": "Tidal capacity: about 0.5 GW worldwide (2023)."}, usage=Usage(input_tokens=340, output_tokens=20)),
            ScriptedModel.text(
                "Tidal power is still tiny: about half a gigawatt worldwide (a 2023 figure whose source could not be double-checked).",
                usage=Usage(input_tokens=410, output_tokens=29),
            ),
        ),
    )
%agent model {MODEL}
"""
    ),
    md(
        """
## Run the tree

While the run works, the dashboard's *Agents* pane draws the tree: each sub-agent appears as it
starts, indented under its caller, with its status and its subtree's tokens and cost. This scripted
run ends in under a second, so under Run All you will mostly see what stays: the record's collapsed
**details** (click it) keep the tree, every tool call with its arguments and result, and the cost
by agent and model. `display(tides.dashboard)` shows the live panes again while the kernel runs.
"""
    ),
    code(
        """
%%agent --name tides
How much tidal power is installed worldwide? Answer in one sentence for a general reader.
""",
        ignore=True,
    ),
    md(
        """
The same tree as text, from the dashboard's state and the session's ledgers. Each line's tokens
and cost are its whole subtree, so the root's figures are the run's total:
"""
    ),
    code(
        """
run = await tides
usage, costs = session.context.usage, session.context.costs
for node in tides.dashboard.tree.ordered():
    subtree = usage.for_subtree(node.run_id)
    usd = costs.for_subtree(node.run_id).total_usd
    print(f"{'    ' * node.depth}{node.name:<12} {node.status:<10} {subtree.total_tokens:>6,} tokens  ${usd:.6f}")
assert usage.for_subtree(tides.run_id) == run.usage  # the run's usage includes every sub-agent's
""",
        check=True,
    ),
    md(
        """
## The depth limit, reported to the parent

The second researcher tried to go one level deeper than `max_depth` allows. The harness refused
before starting it and handed the caller an error tool result that says so; the caller then
answered without it. The journal has every tool result of the tree:
"""
    ),
    code(
        """
for observation in session.journal.read_from(0, root_run_id=tides.run_id, kinds=["tool.completed"]):
    event = observation.event
    flag = "error" if event.is_error else "ok"
    print(f"depth {observation.depth} · {event.tool_name} ({flag}): {event.output[:110]}")
""",
        check=True,
    ),
    md(
        """
`%agent cost` breaks the cost down by agent and depth:
"""
    ),
    code("%agent cost", check=True),
]

# ---------------------------------------------------------------------------------------------- 05
PRESSURE = [
    md(
        """
# Context pressure

A long conversation on a deliberately tiny context window (380 tokens, 100 of them kept for the
answer), so you can watch the harness make room. Before every model call it estimates the request;
the gauge rises turn by turn, and when a request no longer fits the harness applies its pressure
chain in order — **drop retrieved context, trim old turns, summarize, compact tool outputs** —
stopping as soon as it fits, and failing with `ContextLimitError` when nothing more can go. Each
action is a `context.pressure` event with the estimate before and after, and the dashboard lists
it under its gauge. The transcript itself is never changed: relief applies to what is sent.

This notebook drives the harness API (`AgentHarness` and the same `RunDashboard` the magics use),
because it needs two things `%%agent` does not set: a custom window and a retrieval provider.
"""
        + OFFLINE_NOTE
    ),
    LOAD,
    code(
        """
import os

from tinyagents_nb.harness import Usage
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel
from tinyagents_nb.magics import get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))

session = get_session()
if USE_REAL_PROVIDER:
    model = "openai:gpt-4o-mini"
else:
    model = SlowModel(
        ScriptedModel(
            [
                ScriptedModel.text(
                    "A sev-1 is a customer-facing outage. Page the on-call engineer at once, open an incident "
                    "channel, and post a status update every 30 minutes until it is resolved. Afterwards, write "
                    "a blameless postmortem within five working days and review it with the team.",
                    usage=Usage(input_tokens=112, output_tokens=58),
                ),
                ScriptedModel.text(
                    "After paging, the on-call acknowledges within 5 minutes, names an incident commander, and "
                    "starts a timeline in the channel. Customer support gets a holding statement so they can "
                    "answer tickets, and the status page is updated within 15 minutes of the page.",
                    usage=Usage(input_tokens=181, output_tokens=57),
                ),
                ScriptedModel.text(
                    "Roll back the deploy that went out at 11:50: it doubled the worker count without raising the "
                    "database connection limit, which matches the timeouts you describe. Keep the incident "
                    "channel updated while the rollback runs, and watch the error rate for ten minutes afterwards.",
                    usage=Usage(input_tokens=250, output_tokens=62),
                ),
                ScriptedModel.tool_call("fetch_logs", {"service": "api"}, usage=Usage(input_tokens=266, output_tokens=16)),
                ScriptedModel.text(
                    "The logs show every worker timing out on db-primary with the connection pool full (20 of 20 "
                    "busy): the pool is exhausted. Rolling back the 11:50 deploy brings the worker count back "
                    "under the limit.",
                    usage=Usage(input_tokens=252, output_tokens=48),
                ),
            ],
            model_name="scripted",
            chunk_size=12,
        ),
        chunk_delay_s=0.01,
    )
"""
    ),
    md(
        """
## The agent

An incident assistant with two sources of context: a handbook retriever, whose snippet is added to
every request and tagged *retrieved* (nonessential, so pressure drops it first), and a log tool
whose output is large.
"""
    ),
    code(
        """
from tinyagents_nb.harness import AgentHarness, ContextWindow, UserMessage, tool
from tinyagents_nb.harness.memory import ContextProvidersMiddleware


class Handbook:
    \"\"\"A stand-in retriever: the same handbook snippet for every question.\"\"\"

    async def provide(self, ctx, request):
        return [
            UserMessage(
                text="[handbook §4] Incidents are triaged by severity. A sev-1 is a customer-facing outage: page "
                "the on-call, open #incident, post updates every 30 minutes, write a postmortem within 5 days."
            )
        ]


@tool
def fetch_logs(service: str) -> str:
    \"\"\"The last 40 log lines of a service.\"\"\"
    return "\\n".join(
        f"12:{minute:02d}:07 {service} worker-{minute % 4} ERROR timeout after 5000 ms talking to db-primary "
        "(pool 20/20 busy)"
        for minute in range(40)
    )


harness = AgentHarness(
    model=model,
    tools=[fetch_logs],
    middleware=[ContextProvidersMiddleware([Handbook()])],
    system_prompt="You are an incident assistant. Be brief.",
    context_window=ContextWindow(model="incident-assistant", max_tokens=380, reserved_output_tokens=100),
)
"""
    ),
    md(
        """
## One turn at a time

Each turn runs on a new root of the session's context (so it lands in the session's journal and
ledger) in one conversation thread, shows a live dashboard, keeps the transcript for the next
turn, and prints the gauge and the pressure actions it took.
"""
    ),
    code(
        """
from IPython.display import display

from tinyagents_nb.widgets import RunDashboard

history, turns = [], []


async def turn(question):
    \"\"\"Ask one question with the conversation so far; show the dashboard, then the gauge as text.\"\"\"
    global history
    context = session.context.new_root(thread_id="incident-42")
    stream = harness.invoke_streaming([*history, UserMessage(text=question)], context=context)
    dashboard = RunDashboard(stream, title=f"turn {len(turns) + 1}")
    display(dashboard)
    await dashboard.wait_flushed()
    run = await stream.wait()
    if run.ok:
        history = run.messages
        window = context.context_window  # the estimate made before the turn's last model call
        gauge = f"{window.estimated_prompt_tokens} of {window.usable_tokens} tokens ({window.utilization:.0%})"
    else:
        gauge = f"{run.error.estimated_tokens} of {run.error.limit_tokens} tokens: does not fit"
    actions = [mark.split(":")[0] for mark in dashboard.gauge.marks]
    turns.append({"turn": len(turns) + 1, "status": run.status, "context": gauge, "pressure actions": ", ".join(actions)})
    print(f"{run.status} · context {gauge}")
    for mark in dashboard.gauge.marks:
        print("  pressure:", mark)
    if run.error is not None:
        print(f"  {type(run.error).__name__}: {run.error}")
"""
    ),
    md(
        """
## Turns 1 to 3: the gauge rises

Each answer is added to the history, so each request is bigger than the last. The third request
takes 94% of the usable window; nothing had to go yet.
"""
    ),
    code('await turn("What is a sev-1?")', ignore=True),
    code('await turn("What happens after paging?")', ignore=True),
    code('await turn("Our API has been down since 11:52. What should we do first?")', ignore=True),
    md(
        """
## Turn 4: drop, trim, compact

The first call of this turn no longer fits with the handbook snippet, so the snippet is dropped.
Then the log tool returns over a thousand tokens, about four times what fits: the chain drops the
snippet again, trims the oldest turns, and finally compacts the tool output (its full text stays
in the session's store, retrievable with `load_tool_output`).
"""
    ),
    code('await turn("Check the api logs: what is wrong?")', ignore=True),
    md(
        """
Compaction lost nothing: the full log is in the session's store under the key the placeholder names.
"""
    ),
    code(
        """
from tinyagents_nb.harness.memory import TOOL_OUTPUT_NAMESPACE, load_tool_output

key = session.store.keys(TOOL_OUTPUT_NAMESPACE)[0]
log = load_tool_output(session.store, key)
print(f"{key}: {log.name} output, {len(log.text):,} characters kept")
""",
        check=True,
    ),
    md(
        """
## Turn 5: nothing more can go

A pasted document that is larger than the whole window on its own. The chain drops, trims and
summarizes everything it may, but the current question must stay, so the run fails with
`ContextLimitError` before any model call — reported in the dashboard, not as a crash.
"""
    ),
    code(
        'await turn("Here is the full postmortem draft, please check it: " + "lorem ipsum dolor sit amet " * 300)',
        ignore=True,
    ),
    md(
        """
## All turns

What the dashboards showed, as one table:
"""
    ),
    code(
        """
import pandas as pd

pd.set_option("display.max_colwidth", None)
pd.DataFrame(turns).set_index("turn")
""",
        check=True,
    ),
]

# ---------------------------------------------------------------------------------------------- 06
OBSERVABILITY = [
    md(
        """
# Observability

Every event of every run in this notebook goes to the session's event journal, a SQLite file that
other processes can read while the kernel runs and that survives a kernel crash. This notebook runs
one agent, then reads its events back: replay from an offset, the events as a pandas DataFrame,
latency metrics, and a redacting sink that keeps a secret out of what is stored.
"""
        + OFFLINE_NOTE
    ),
    LOAD,
    md(
        """
## A journal on disk

`AgentMagics.store_path` puts the session's history, state and journal in a SQLite file;
`%agent reset` reopens the session on it. (A temporary directory here, so running the notebook
leaves nothing behind.)
"""
    ),
    code(
        """
import tempfile
from pathlib import Path

JOURNAL = Path(tempfile.mkdtemp()) / "agent-session.db"
%config AgentMagics.store_path = str(JOURNAL)
%agent reset
""",
        ignore=True,
    ),
    md(
        """
## Redact before storing

The session's journal stores events as they are. To keep a secret out of a stored copy, put a
`RedactingSink` in front of the journal: it masks the secrets you name, key-shaped strings
(`sk-...`, bearer tokens) and values under sensitive keys (`api_key`, `password`, ...).
`secrets_from_env()` collects the values of credential-like environment variables.
"""
    ),
    code(
        """
from tinyagents_nb.harness.observability import InMemoryEventJournal, JournalSink, RedactingSink, secrets_from_env
from tinyagents_nb.magics import get_session

SECRET = "swordfish-1234"  # a password the user is about to paste into a prompt
session = get_session()
redacted = InMemoryEventJournal()
detach = session.context.events.add_listener(RedactingSink(JournalSink(redacted), secrets=[SECRET, *secrets_from_env()]))
"""
    ),
    md(
        """
## Run an agent
"""
    ),
    code(
        """
import asyncio
import os

from tinyagents_nb.harness import Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import agent_tool

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))


@agent_tool
async def order_status(order_id: str) -> str:
    \"\"\"Where an order is.\"\"\"
    await asyncio.sleep(0.05)  # a slow back end, so the tool's latency shows in the metrics
    return {"42": "held at the warehouse: a part is back-ordered until Friday"}.get(order_id, "unknown order")


if USE_REAL_PROVIDER:
    MODEL = "openai:gpt-4o-mini"
else:
    MODEL = "scripted"
    session.register_model(
        MODEL,
        ScriptedModel(
            [
                ScriptedModel.tool_call("order_status", {"order_id": "42"}, usage=Usage(input_tokens=96, output_tokens=15)),
                ScriptedModel.text(
                    "Order 42 is held at the warehouse until a back-ordered part arrives on Friday. "
                    "Also: never share your password in a chat, and change it now.",
                    usage=Usage(input_tokens=142, output_tokens=33),
                ),
            ],
            model_name=MODEL,
            chunk_size=6,
        ),
    )
%agent model {MODEL}
"""
    ),
    code(
        """
%%agent --name order
My password is swordfish-1234 if you need it. Why is order 42 late?
""",
        ignore=True,
    ),
    md(
        """
## The journal

`%agent journal order` returns the run's events as a DataFrame (`events_to_dataframe`): offset,
ids, depth, timestamp and a one-line detail per event. Token deltas are not journaled; every model
call is, with its usage.
"""
    ),
    code(
        """
await order
frame = session.journal_frame(order)
frame[["offset", "depth", "kind"]]
""",
        check=True,
    ),
    code("%agent journal order", ignore=True),
    md(
        """
## Replay from an offset

Every event has an offset in the session's stream, so a reader can resume where it stopped. A
second connection to the same file (another process would do the same) replays from the tool call
on, and a `RunStatusStore` rebuilds the run's status from the replayed events, as after a restart:
"""
    ),
    code(
        """
from tinyagents_nb.harness.observability import RunStatusStore, SQLiteEventJournal

start = int(frame.loc[frame["kind"] == "tool.started", "offset"].iloc[0])
reader = SQLiteEventJournal(JOURNAL)
for observation in reader.replay_from(start, root_run_id=order.run_id):
    print(observation.offset - start, observation.kind)

status = RunStatusStore().replay(reader.read_from(0, root_run_id=order.run_id)).get(order.run_id)
print(status.status, "·", status.model_calls, "model calls ·", status.tool_calls, "tool call")
reader.close()
""",
        check=True,
    ),
    md(
        """
## Latency metrics

`AgentLatencyMetrics` pairs each started event with its end, across the run and any sub-agents:
where did the time go?
"""
    ),
    code(
        """
from tinyagents_nb.harness.observability import AgentLatencyMetrics

metrics = AgentLatencyMetrics.from_record(session.journal.read_from(0, root_run_id=order.run_id))
metrics.to_dataframe()
""",
        ignore=True,
    ),
    code(
        """
print(len(metrics.model_calls), "model calls ·", len(metrics.tool_calls), "tool call")
print("the tool took at least 50 ms:", metrics.max_tool_s >= 0.05)
""",
        check=True,
    ),
    md(
        """
## The secret

The session's own journal stored the prompt as typed; the redacted copy did not:
"""
    ),
    code(
        """
def mentions_secret(journal):
    return any(SECRET in str(observation.event) for observation in journal.read_from(0, root_run_id=order.run_id))


print("session journal holds the secret:", mentions_secret(session.journal))
print("redacted journal holds the secret:", mentions_secret(redacted))
started = redacted.read_from(0, root_run_id=order.run_id, kinds=["run.started"])[0].event
print("stored prompt:", started.input)
""",
        check=True,
    ),
]

# ---------------------------------------------------------------------------------------------- 07
MCP = [
    md(
        """
# MCP servers as tools

Attach a [Model Context Protocol](https://modelcontextprotocol.io) server to the notebook's agent:
its tools are offered to every `%%agent` run, named `{server}_{tool}`. The server here is a small
local one shipped next to this notebook (`mcp_geo_server.py`, written with the official `mcp` SDK)
that answers from a fixed table, so nothing leaves the machine; any MCP server from npm or PyPI
plugs in the same way. Needs the extra: `pip install 'tinyagents-nb[mcp]'`.
"""
        + OFFLINE_NOTE
    ),
    LOAD,
    code(
        """
import os
import sys

from tinyagents_nb.harness import ModelProfile, Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))

session = get_session()
if USE_REAL_PROVIDER:
    MODEL = "openai:gpt-4o-mini"
else:
    MODEL = "scripted"  # answers in order: re-run this cell to start the script over
    session.register_model(
        MODEL,
        ScriptedModel(
            [
                ScriptedModel.tool_calls(
                    [("geo_distance_km", {"a": "Oslo", "b": "Bergen"}), ("geo_population", {"city": "Bergen"})],
                    usage=Usage(input_tokens=164, output_tokens=41),
                ),
                ScriptedModel.text(
                    "Bergen is 305.1 km from Oslo as the crow flies, and 291,940 people live there.",
                    usage=Usage(input_tokens=231, output_tokens=24),
                ),
            ],
            model_name=MODEL,
            chunk_size=6,
            profile=ModelProfile(name=MODEL, provider="test", context_window=128_000),
        ),
    )
%agent model {MODEL}
"""
    ),
    md(
        """
## Add a server

`%agent mcp add NAME -- COMMAND ARGS…` starts a stdio server, lists its tools and registers it with
the session (`%agent mcp add NAME --url URL` reaches a streamable-HTTP server instead). The server's
stderr goes to a log file, never into the notebook: a kernel has no terminal to give it.
"""
    ),
    code("%agent mcp add geo -- {sys.executable} mcp_geo_server.py", ignore=True),
    code('session.mcp.frame()[["server", "transport", "status", "tools"]]', check=True),
    md(
        """
## Ask

Every later `%%agent` run is offered the server's tools next to the notebook's own. The model calls
`geo_distance_km` and `geo_population`; the calls run in the server process.
"""
    ),
    code(
        """
%%agent --name trip
How far is Bergen from Oslo, and how many people live there?
""",
        ignore=True,
    ),
    code(
        """
print(trip.status)
for message in trip.outcome.messages[-4:]:
    if message.role == "tool":
        print(f"{message.name} -> {message.text}")
print(trip.final_text)
""",
        check=True,
    ),
    md(
        """
## The same server from Python

`MCPServer.stdio(...)` (or `MCPServer.http(url, headers=...)`) goes straight into an `AgentHarness`.
The server starts when a run first needs it and is reused by later runs, whichever event loop they
run on; `aclose()` stops it and its process. The model sees the schema the server published, and the
server's own log lines stay in its stderr file, readable with `stderr_tail()`.
"""
    ),
    code(
        """
from tinyagents_nb.harness import AgentHarness, MCPServer

geo = MCPServer.stdio("geo", sys.executable, ["mcp_geo_server.py"])
if USE_REAL_PROVIDER:
    model = session.resolve_model(MODEL)
else:
    model = ScriptedModel(
        [ScriptedModel.tool_call("geo_distance_km", {"a": "Oslo", "b": "Stockholm"}), "Stockholm is 416.3 km from Oslo."]
    )
agent = AgentHarness(model=model, tools=[geo])
run = await agent.invoke("How far is Stockholm from Oslo?")
print(run.final_text)
print(next(t for t in geo.tools if t.name == "geo_distance_km").schema.parameters)
print([line for line in geo.stderr_tail().splitlines() if line.startswith("distance_km")])
await agent.aclose()
print("running after aclose:", geo.running)
""",
        check=True,
    ),
    md(
        """
## Remove it

`%agent mcp remove` stops the server (its process ends) and its tools leave later runs. Servers
still registered when the kernel shuts down are stopped then.
"""
    ),
    code("%agent mcp remove geo", check=True),
]


# ---------------------------------------------------------------------------------------------- 08
RLM_CELLS = [
    md(
        """
# Recursive language models: the kernel as the model's REPL

A log of 100,000 lines is about 6 MB: far more than a model should read in one prompt. With
`%%agent --rlm` the model never sees it. It works in a Python REPL (a child kernel) where the log
is a variable: it explores it with code, cuts it into chunks, asks a sub-model about each chunk
with `llm_batch`, checks the result with code, and answers with `FINAL_VAR`.

**Offline by default.** Without `OPENAI_API_KEY` the root model is scripted (its replies are the
code a model would write) and the sub-model is a small function that reads its chunk, so the
notebook prints the same thing every time; with the key set, both are `openai:gpt-4o-mini`.
"""
    ),
    LOAD,
    code(
        """
import random

rng = random.Random(7)
KINDS = ["timeout", "disk_full", "auth_failed", "oom", "conn_reset"]
lines = []
for i in range(100_000):
    if rng.random() < 0.04:
        lines.append(f"2026-11-24T00:{i % 60:02d}:{i % 59:02d} ERROR {rng.choice(KINDS)} request={i} host=web-{i % 17}")
    else:
        lines.append(f"2026-11-24T00:{i % 60:02d}:{i % 59:02d} INFO ok request={i} latency_ms={rng.randint(1, 900)} host=web-{i % 17}")
logs = "\\n".join(lines)
print(f"{len(lines):,} lines, {len(logs):,} characters")
""",
        check=True,
    ),
    code(
        '''
import json
import os
import re
from collections import Counter

from tinyagents_nb.harness import ModelRequest, ModelResponse, Usage
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.magics import get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))
FENCE = "`" * 3


def reply(code: str, tokens: int) -> ModelResponse:
    """What a model writes: a sentence, then a fenced python block for the REPL."""
    return ScriptedModel.text(f"Next step.\\n{FENCE}python\\n{code}\\n{FENCE}", usage=Usage(input_tokens=tokens, output_tokens=60))


def count_kinds(request: ModelRequest) -> ModelResponse:
    """Offline sub-model: counts the ERROR kinds in the chunk it was given, as JSON."""
    prompt = request.messages[-1].text
    counts = Counter(re.findall(r"^\\S+ ERROR (\\w+) ", prompt, re.MULTILINE))
    return ScriptedModel.text(json.dumps(dict(counts)), usage=Usage(input_tokens=len(prompt) // 4, output_tokens=20))


session = get_session()
if USE_REAL_PROVIDER:
    MODEL = SUB_MODEL = "openai:gpt-4o-mini"
else:
    MODEL, SUB_MODEL = "scripted-root", "chunk-counter"
    root = ScriptedModel(
        [
            reply("print(len(logs), logs.count(chr(10)) + 1)\\nprint(logs[:230])", 900),
            reply(
                "import json, re\\nfrom collections import Counter\\n"
                "rows = logs.splitlines()\\n"
                "chunks = [chr(10).join(rows[i : i + 5000]) for i in range(0, len(rows), 5000)]\\n"
                "answers = llm_batch([f'Count the ERROR kinds in these log lines. Answer with JSON {{kind: count}} only.{chr(10)}{c}' for c in chunks])\\n"
                "totals = Counter()\\n"
                "for a in answers:\\n"
                "    totals.update(json.loads(a))\\n"
                "print(len(chunks), 'chunks;', dict(totals))",
                1300,
            ),
            reply("check = Counter(re.findall(r' ERROR (\\\\w+) ', logs))\\nprint('matches a direct count:', check == totals)", 1700),
            reply("totals = dict(totals.most_common())\\nFINAL_VAR('totals')", 1900),
        ],
        model_name=MODEL,
    )
    session.register_model(MODEL, root)
    session.register_model(SUB_MODEL, FunctionModel(count_kinds, model_name=SUB_MODEL))
print("root:", MODEL, "· sub-queries:", SUB_MODEL)
''',
        check=True,
    ),
    md(
        """
## One cell: `%%agent --rlm`

`--rlm` runs the prompt in a child kernel started from this notebook's Python (once per session,
then reused); `--context logs` copies the variable into it; `--sub-model` picks the model behind
`llm()`/`llm_batch()`. The dashboard shows the run and, in its tree, the sub-queries as child runs.
"""
    ),
    code(
        """
%%agent --rlm --context logs --model {MODEL} --sub-model {SUB_MODEL} --name counted
Count the ERROR lines of `logs` by kind. Use the REPL; answer with a dict from kind to count.
""",
        ignore=True,
    ),
    code(
        """
run = await counted
print(run.status, "·", run.model_calls, "model calls")
print(run.final_text)
""",
        check=True,
    ),
    md(
        """
The model never received the log: the largest request it was sent is a few thousand characters.
The 20 sub-queries ran as child runs one level down, and their tokens are part of the run's usage:
"""
    ),
    code(
        """
events = session.journal_frame(counted)
children = events[(events["kind"] == "run.started") & (events["depth"] == 1)]
print("sub-queries (child runs at depth 1):", len(children))
print("tokens, sub-queries included:", f"{run.usage.input_tokens:,} in, {run.usage.output_tokens:,} out")
if not USE_REAL_PROVIDER:
    largest = max(sum(len(m.text) for m in request.messages) for request in root.requests)
    print(f"largest request to the root model: {largest:,} characters, against {len(logs):,} in the context")
""",
        check=True,
    ),
    md(
        """
## The code steps

Each block the model wrote is an `rlm.code` event and its output an `rlm.output` event in the
session's journal (the dashboard's view of the steps comes from them):
"""
    ),
    code(
        """
for item in session.journal.read_from(0, root_run_id=counted.run_id, kinds=["rlm.code", "rlm.output"]):
    event = item.event
    if event.kind == "rlm.code":
        print(f"--- step {event.iteration} ---")
        print(event.code)
    else:
        print(">>>", event.output.strip()[:300])
""",
        check=True,
    ),
    md(
        """
## From Python, and in-process

`tinyagents_nb.rlm.RLM` is the same thing as a Python API. `environment="local"` runs the code in
this process instead of a child kernel: values are passed by reference (no copy, no pickling) but
nothing is isolated, so use it only for code you trust. See
[docs/rlm.md](../docs/rlm.md) for what each environment isolates, the limits and Stop.
"""
    ),
    code(
        """
from tinyagents_nb.rlm import RLM, RLMLimits

local_model = ScriptedModel(
    [
        reply("slow = [line for line in logs.splitlines() if 'latency_ms=' in line and int(line.split('latency_ms=')[1].split()[0]) > 850]\\nprint(len(slow))", 800),
        reply("FINAL(len(slow))", 900),
    ]
)
local = await RLM(model=local_model, environment="local", limits=RLMLimits(max_iterations=5)).invoke(
    "How many requests took more than 850 ms?", context={"logs": logs}
)
print(local.status, "·", local.final_text, "slow requests")
""",
        check=True,
    ),
]


# ---------------------------------------------------------------------------------------------- 09
NOTEBOOK_ACCESS = [
    md(
        """
# The agent sees the notebook

An agent in a `%%agent` cell can look at this kernel: its variables (a DataFrame's columns, nulls and
statistics, always cut to a few thousand characters), the cells that ran and what they printed, and the
last error. With `--access ask` it may also run code here, after you click Approve, and propose new
cells; `--access auto` runs code without asking. Secrets (API keys in variables, the environment or an
output) are masked in everything the model sees. `%config AgentMagics.notebook_access = "off"` turns it
all off; `%agent hide NAME` hides one variable.

**Offline by default.** The models here are scripted stand-ins from the testkit: they call the notebook
tools in a fixed order and then answer, so the notebook runs anywhere and prints the same thing every
time. Pass `--model openai:gpt-4o-mini` (with `OPENAI_API_KEY` set) to let a real model choose.
"""
    ),
    LOAD,
    code(
        """
import numpy as np
import pandas as pd

rng = np.random.default_rng(7)
sales = pd.DataFrame(
    {
        "region": rng.choice(["north", "south", "east", "west"], size=10_000),
        "units": rng.integers(1, 20, size=10_000),
        "price": rng.uniform(2.0, 9.0, size=10_000).round(2),
    }
)
sales["revenue"] = sales["units"] * sales["price"]
sales.shape
""",
        check=True,
    ),
    md(
        """
The models. Offline, each is a scripted stand-in that calls the notebook tools in a fixed order; with
`OPENAI_API_KEY` set, all three names are `gpt-4o-mini`, which chooses its own calls.
"""
    ),
    code(
        """
import os

from tinyagents_nb.harness import ToolCall, resolve_model
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))  # set to False to stay offline anyway


def step(call_id, tool, **arguments):
    return ScriptedModel.tool_calls([ToolCall(id=call_id, name=tool, arguments=arguments)])


def use(name, script):
    model = resolve_model("openai:gpt-4o-mini") if USE_REAL_PROVIDER else ScriptedModel(script)
    get_session().register_model(name, model)


use(
    "explorer",
    [
        step("e1", "notebook_variables"),
        step("e2", "inspect_variable", name="sales"),
        "`sales` has 10,000 rows: region, units, price and revenue, with no missing values.",
    ],
)
"""
    ),
    code(
        """
%%agent --model explorer --name explore
What is in my notebook?
""",
        ignore=True,
    ),
    md("What the model saw (the tool results are notebook data, fenced so it cannot mistake them for orders):"),
    code(
        """
seen = [m.text for m in explore.outcome.messages if type(m).__name__ == "ToolMessage"]
print(seen[1][:400])
""",
        check=True,
    ),
    md("Now a mistake: the column is `revenue`, not `revenu`."),
    code('sales.groupby("region")["revenu"].sum()', raises=True),
    md(
        """
`%agent fix` reads the last error and its cell and proposes a corrected cell (in JupyterLab and
Notebook 7 it appears below; the record lists it too), with a short explanation. Nothing runs.
"""
    ),
    code(
        """
use(
    "fixer",
    [
        step(
            "f1",
            "propose_cell",
            code='sales.groupby("region")["revenue"].sum().round(2)',
            note="use the revenue column",
        ),
        "The column is called `revenue`; `revenu` does not exist, hence the KeyError.",
    ],
)
"""
    ),
    code("%agent model fixer"),
    code("%agent fix", ignore=True),
    code(
        """
proposal = get_session().notebook.proposed(_agent.run_id)[0]
print(proposal.note)
print(proposal.code)
""",
        check=True,
    ),
    md(
        """
With `--access auto` (or `ask`, which waits for your click on each call) the agent runs code in this
kernel, on its main thread, in your namespace: what it defines is there for the next cell.
"""
    ),
    code(
        """
use(
    "analyst",
    [
        step("a1", "run_code", code='by_region = sales.groupby("region")["revenue"].sum().round(2)\\nby_region'),
        "I stored revenue by region in `by_region`.",
    ],
)
"""
    ),
    code(
        """
%%agent --model analyst --access auto --name analyse
Total revenue by region, please.
""",
        ignore=True,
    ),
    code("by_region", check=True),
    code("%agent access", check=True),
]

NOTEBOOKS: dict[str, list[Cell]] = {
    "01_quickstart": QUICKSTART,
    "02_tools_and_structured_output": TOOLS,
    "03_steering_and_cancellation": STEERING,
    "04_subagents_and_recursion": SUBAGENTS,
    "05_context_pressure": PRESSURE,
    "06_observability": OBSERVABILITY,
    "07_mcp": MCP,
    "08_rlm": RLM_CELLS,
    "09_notebook_access": NOTEBOOK_ACCESS,
}
"""Notebook file stem → cells, in the order of the README's list."""
