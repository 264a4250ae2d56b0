# ---
# jupyter:
#   jupytext:
#     custom_cell_magics: agent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tools and structured output
#
# Give the agent functions from this notebook as tools (one reads a pandas DataFrame defined right
# here), hand it runtime values the model never sees, and get an answer back as a validated pydantic
# object.
#
# **Offline by default.** Without an API key this notebook uses scripted stand-in models from the
# testkit: they stream canned answers with fixed token counts, call tools and spawn sub-agents, so the
# notebook runs anywhere and prints the same thing every time (that is how CI tests it). With
# `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`; the configuration cell switches.

# %%
# %load_ext tinyagents_nb

# %%
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
                ScriptedModel.tool_call(
                    "revenue_by_region", {"quarter": "Q2"}, usage=Usage(input_tokens=182, output_tokens=17)
                ),
                ScriptedModel.tool_call(
                    "in_user_currency", {"amount_usd": 131000}, usage=Usage(input_tokens=231, output_tokens=19)
                ),
                ScriptedModel.text(
                    "North had the highest Q2 revenue: $131,000, which is 120,520 EUR.",
                    usage=Usage(input_tokens=270, output_tokens=21),
                ),
                # the structured-output run: one tool call, then the typed answer
                ScriptedModel.tool_call(
                    "revenue_by_region", {"quarter": "Q2"}, usage=Usage(input_tokens=240, output_tokens=17)
                ),
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
# %agent model {MODEL}

# %% [markdown]
# ## The data
#
# A DataFrame that lives only in this kernel. The agent will answer questions about it through a tool.

# %% tags=["nbval-check-output"]
import pandas as pd

sales = pd.DataFrame(
    {
        "region": ["north", "south", "east", "west"] * 2,
        "quarter": ["Q1"] * 4 + ["Q2"] * 4,
        "revenue_usd": [120_000, 95_000, 143_000, 88_000, 131_000, 99_000, 128_000, 104_000],
    }
)
sales

# %% [markdown]
# ## Tools from notebook functions
#
# `@agent_tool` registers a function with the session, and every `%%agent` run is offered it. Its
# name, docstring and annotated parameters become the schema the model sees; the function runs in
# the kernel, so it reads `sales` directly.
#
# A parameter typed as a runtime handle (`RunContext`, a store, the cancellation token, ...) is
# *injected*: the harness fills it in and leaves it out of the schema, so the model can neither see
# nor forge it. `in_user_currency` uses the run's context to read the user's currency from the
# session's per-thread state.

# %%
from tinyagents_nb.harness import RunContext
from tinyagents_nb.harness.memory import get_state
from tinyagents_nb.magics import agent_tool


@agent_tool
def revenue_by_region(quarter: str) -> dict[str, int]:
    """Total revenue in USD per region for one quarter, e.g. "Q2"."""
    rows = sales[sales["quarter"] == quarter]
    return {region: int(total) for region, total in rows.groupby("region")["revenue_usd"].sum().items()}


@agent_tool
def in_user_currency(amount_usd: float, ctx: RunContext) -> str:
    """Convert an amount in USD into the user's currency."""
    user = get_state(ctx, "user")  # this thread's state, reached through the injected context
    return f"{amount_usd * user['usd_rate']:,.0f} {user['currency']}"


session.state.set_state(session.thread_id, "user", {"name": "Ada", "currency": "EUR", "usd_rate": 0.92})

# %% [markdown]
# `%agent tools` lists what the model is offered. `ctx` is not among the parameters:

# %% tags=["nbval-check-output"]
# %agent tools

# %% [markdown]
# ## Ask
#
# The model calls `revenue_by_region`, then `in_user_currency`, then answers. The dashboard's
# *Tool calls* pane shows each call with its arguments and result as it happens.

# %% tags=["nbval-ignore-output"] magic_args="--name q2" language="agent"
# Which region had the highest revenue in Q2, and how much is that in my currency?

# %% tags=["nbval-check-output"]
run = await q2
for message in run.messages:
    if message.role == "tool":
        print(f"{message.name} -> {message.text}")
print(run.final_text)

# %% [markdown]
# ## Structured output
#
# For an answer your code can use, ask for a type. `%%agent` answers in text, so this step calls the
# harness API directly, on a new root of the session's context (its events, usage and cost land in
# the same journal and ledger). `output_type=QuarterReport` offers the model the schema (offline as an
# extra tool it must call) and validates its answer with pydantic; an answer that does not fit fails
# the run with `StructuredOutputError` rather than returning something half-typed.

# %% tags=["nbval-check-output"]
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

# %% tags=["nbval-check-output"]
print(
    f"{report.best_region} led {report.quarter} with ${report.revenue_usd:,}; below $100k: {report.regions_below_100k}"
)
