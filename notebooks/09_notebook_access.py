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
# # The agent sees the notebook
#
# An agent in a `%%agent` cell can look at this kernel: its variables (a DataFrame's columns, nulls and
# statistics, always cut to a few thousand characters), the cells that ran and what they printed, and the
# last error. With `--access ask` it may also run code here, after you click Approve, and propose new
# cells; `--access auto` runs code without asking. Secrets (API keys in variables, the environment or an
# output) are masked in everything the model sees. `%config AgentMagics.notebook_access = "off"` turns it
# all off; `%agent hide NAME` hides one variable.
#
# **Offline by default.** The models here are scripted stand-ins from the testkit: they call the notebook
# tools in a fixed order and then answer, so the notebook runs anywhere and prints the same thing every
# time. Pass `--model openai:gpt-4o-mini` (with `OPENAI_API_KEY` set) to let a real model choose.

# %%
# %load_ext tinyagents_nb

# %% tags=["nbval-check-output"]
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

# %% [markdown]
# The models. Offline, each is a scripted stand-in that calls the notebook tools in a fixed order; with
# `OPENAI_API_KEY` set, all three names are `gpt-4o-mini`, which chooses its own calls.

# %%
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

# %% tags=["nbval-ignore-output"] magic_args="--model explorer --name explore" language="agent"
# What is in my notebook?

# %% [markdown]
# What the model saw (the tool results are notebook data, fenced so it cannot mistake them for orders):

# %% tags=["nbval-check-output"]
seen = [m.text for m in explore.outcome.messages if type(m).__name__ == "ToolMessage"]
print(seen[1][:400])

# %% [markdown]
# Now a mistake: the column is `revenue`, not `revenu`.

# %% tags=["raises-exception"]
sales.groupby("region")["revenu"].sum()

# %% [markdown]
# `%agent fix` reads the last error and its cell and proposes a corrected cell (in JupyterLab and
# Notebook 7 it appears below; the record lists it too), with a short explanation. Nothing runs.

# %%
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

# %%
# %agent model fixer

# %% tags=["nbval-ignore-output"]
# %agent fix

# %% tags=["nbval-check-output"]
proposal = get_session().notebook.proposed(_agent.run_id)[0]
print(proposal.note)
print(proposal.code)

# %% [markdown]
# With `--access auto` (or `ask`, which waits for your click on each call) the agent runs code in this
# kernel, on its main thread, in your namespace: what it defines is there for the next cell.

# %%
use(
    "analyst",
    [
        step("a1", "run_code", code='by_region = sales.groupby("region")["revenue"].sum().round(2)\nby_region'),
        "I stored revenue by region in `by_region`.",
    ],
)

# %% tags=["nbval-ignore-output"] magic_args="--model analyst --access auto --name analyse" language="agent"
# Total revenue by region, please.

# %% tags=["nbval-check-output"]
by_region

# %% tags=["nbval-check-output"]
# %agent access
