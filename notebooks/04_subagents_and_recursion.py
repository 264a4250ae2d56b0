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
# # Sub-agents and recursion
#
# An orchestrator that delegates to sub-agents registered as tools: a `researcher` that may hand a
# sub-question to another researcher (recursion), and a `writer`. Every sub-agent runs as a child of
# its caller, so one event stream shows the whole tree, the dashboard's *Agents* pane draws it live,
# and usage and cost roll up per subtree. A depth limit stops the recursion, and the refused call is
# reported to the parent as a tool result, so the parent carries on.
#
# **Offline by default.** Without an API key this notebook uses scripted stand-in models from the
# testkit: they stream canned answers with fixed token counts, call tools and spawn sub-agents, so the
# notebook runs anywhere and prints the same thing every time (that is how CI tests it). With
# `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`; the configuration cell switches.

# %%
# %load_ext tinyagents_nb

# %%
import os

from tinyagents_nb.harness import ModelPricing, Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))
REAL_MODEL = "openai:gpt-4o-mini"


def scripted(*responses):
    """Offline stand-in: a model that streams these responses in order."""
    return ScriptedModel(list(responses), model_name="scripted", chunk_size=6)


session = get_session()
session.context.costs.register_price("scripted", ModelPricing(input_per_mtok="0.15", output_per_mtok="0.60"))

# %% [markdown]
# ## The sub-agents
#
# A `SubAgent` wraps a whole agent (`AgentHarness`) and `as_tool()` turns it into a tool whose only
# input is a task. The researcher's own tools include the researcher, so it can recurse; its
# `RunLimits(max_depth=2)` caps how deep researchers may nest.

# %% tags=["nbval-check-output"]
from tinyagents_nb.harness import AgentHarness, RunLimits, RunPolicy, SubAgent

researcher_model = (
    REAL_MODEL
    if USE_REAL_PROVIDER
    else scripted(
        # depth 1: delegate the sourcing question
        ScriptedModel.tool_call(
            "researcher",
            {"input": "Find the most recent figure for installed tidal capacity."},
            usage=Usage(input_tokens=210, output_tokens=24),
        ),
        # depth 2: try to delegate a check of the source (refused: too deep)
        ScriptedModel.tool_call(
            "researcher",
            {"input": "Double-check the source of that figure."},
            usage=Usage(input_tokens=190, output_tokens=19),
        ),
        # depth 2, after the refusal: answer without the check
        ScriptedModel.text(
            "About 0.5 GW was installed worldwide in 2023; I could not double-check the source (depth limit).",
            usage=Usage(input_tokens=260, output_tokens=27),
        ),
        # depth 1: report up
        ScriptedModel.text(
            "Installed tidal capacity is about 0.5 GW (2023 figure, source not double-checked).",
            usage=Usage(input_tokens=290, output_tokens=22),
        ),
    )
)
researcher_harness = AgentHarness(
    model=researcher_model,
    system_prompt="You research one question. You may delegate a narrower sub-question to a researcher.",
    policy=RunPolicy(limits=RunLimits(max_depth=2)),
)
researcher = SubAgent(
    "researcher",
    researcher_harness,
    description="Researches one question; may delegate a sub-question to another researcher.",
)
researcher_harness.tools.register(researcher.as_tool())  # recursion: a researcher can call a researcher

writer = SubAgent(
    "writer",
    AgentHarness(
        model=REAL_MODEL
        if USE_REAL_PROVIDER
        else scripted(
            ScriptedModel.text(
                "Tidal power is still tiny: about half a gigawatt worldwide.",
                usage=Usage(input_tokens=95, output_tokens=14),
            ),
        ),
        system_prompt="You turn notes into one clear sentence.",
    ),
    description="Turns notes into one clear sentence for a general reader.",
)

session.register_tool(researcher.as_tool())
session.register_tool(writer.as_tool())
# %agent tools

# %% [markdown]
# ## The orchestrator
#
# The notebook's default model plays the orchestrator: it is offered every registered tool, so both
# sub-agents.

# %%
if USE_REAL_PROVIDER:
    MODEL = REAL_MODEL
else:
    MODEL = "orchestrator"
    session.register_model(
        MODEL,
        scripted(
            ScriptedModel.tool_call(
                "researcher",
                {"input": "How much tidal power capacity is installed worldwide?"},
                usage=Usage(input_tokens=230, output_tokens=21),
            ),
            ScriptedModel.tool_call(
                "writer",
                {"input": "Tidal capacity: about 0.5 GW worldwide (2023)."},
                usage=Usage(input_tokens=340, output_tokens=20),
            ),
            ScriptedModel.text(
                "Tidal power is still tiny: about half a gigawatt worldwide (a 2023 figure whose source could not be double-checked).",
                usage=Usage(input_tokens=410, output_tokens=29),
            ),
        ),
    )
# %agent model {MODEL}

# %% [markdown]
# ## Run the tree
#
# While the run works, the dashboard's *Agents* pane draws the tree: each sub-agent appears as it
# starts, indented under its caller, with its status and its subtree's tokens and cost. This scripted
# run ends in under a second, so under Run All you will mostly see what stays: the record's collapsed
# **details** (click it) keep the tree, every tool call with its arguments and result, and the cost
# by agent and model. `display(tides.dashboard)` shows the live panes again while the kernel runs.

# %% tags=["nbval-ignore-output"] magic_args="--name tides" language="agent"
# How much tidal power is installed worldwide? Answer in one sentence for a general reader.

# %% [markdown]
# The same tree as text, from the dashboard's state and the session's ledgers. Each line's tokens
# and cost are its whole subtree, so the root's figures are the run's total:

# %% tags=["nbval-check-output"]
run = await tides
usage, costs = session.context.usage, session.context.costs
for node in tides.dashboard.tree.ordered():
    subtree = usage.for_subtree(node.run_id)
    usd = costs.for_subtree(node.run_id).total_usd
    print(f"{'    ' * node.depth}{node.name:<12} {node.status:<10} {subtree.total_tokens:>6,} tokens  ${usd:.6f}")
assert usage.for_subtree(tides.run_id) == run.usage  # the run's usage includes every sub-agent's

# %% [markdown]
# ## The depth limit, reported to the parent
#
# The second researcher tried to go one level deeper than `max_depth` allows. The harness refused
# before starting it and handed the caller an error tool result that says so; the caller then
# answered without it. The journal has every tool result of the tree:

# %% tags=["nbval-check-output"]
for observation in session.journal.read_from(0, root_run_id=tides.run_id, kinds=["tool.completed"]):
    event = observation.event
    flag = "error" if event.is_error else "ok"
    print(f"depth {observation.depth} · {event.tool_name} ({flag}): {event.output[:110]}")

# %% [markdown]
# `%agent cost` breaks the cost down by agent and depth:

# %% tags=["nbval-check-output"]
# %agent cost
