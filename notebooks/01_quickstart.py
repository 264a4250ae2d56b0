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
# # Quickstart
#
# Ask an agent a question in a notebook cell, continue the conversation in the next one, then see
# what it cost and how full its context window is.
#
# **Offline by default.** Nothing here needs a key or a network: the first answer comes from the
# built-in offline model, and the rest from a stand-in model that streams canned answers (that is how
# CI tests this notebook). With `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`.

# %% [markdown]
# ## Load the extension
#
# `%load_ext` adds the `%%agent` cell magic and the `%agent` line magics, and creates this kernel's
# *session*: one conversation thread, history, event journal and usage and cost ledger for the
# whole notebook.

# %%
# %load_ext tinyagents_nb

# %% [markdown]
# ## Ask, with no model configured
#
# A `%%agent` cell sends its body as the prompt. With no model configured, the built-in offline model
# answers: it sends nothing anywhere and tells you how to configure a real model.

# %% tags=["nbval-ignore-output"] magic_args="--new-thread" language="agent"
# Hello! What can you do?

# %% [markdown]
# ## Choose the model
#
# `%agent model NAME` sets the model for every following `%%agent` cell, e.g. `%agent model
# openai:gpt-4o-mini` (its key is read from `OPENAI_API_KEY`; `%env OPENAI_API_KEY=...` sets it from a
# cell; `%agent models` lists every provider). Offline, `demo_model` registers a stand-in that
# streams the answers you give it, priced like gpt-4o-mini, so the cost table has numbers in it.

# %%
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
# %agent model {MODEL}
# %agent thread new
session = get_session()

# %% [markdown]
# ## Ask the model
#
# The dashboard streams the answer as it arrives, with tokens and cost in its header, Stop, Pause and
# a steer box, a context gauge, and (once there are any) tool calls and sub-agents. `--name first`
# binds the run's handle to the variable `first` (every run is also bound to `_agent`).

# %% tags=["nbval-ignore-output"] magic_args="--name first" language="agent"
# In two sentences: what is a context window, and why does it matter for an agent?

# %% [markdown]
# The cell waits for its run while the dashboard streams (Stop, Pause and the steer box work
# meanwhile); when the run ends, the dashboard gives way to a static record of the answer and its
# one-line summary, which the saved notebook keeps. The handle gives the result to Python code
# (`--background` returns at once instead: see [execution modes](../docs/jupyter/execution-modes.md)).

# %% tags=["nbval-check-output"]
run = await first  # the finished AgentRun; raises the run's error if it failed
print(run.status, "·", run.usage.total_tokens, "tokens")
print(run.final_text)

# %% [markdown]
# ## Follow up
#
# The next cell continues the same conversation: the session saved the first exchange in the
# thread's history and sends it along, which is why this call reads more input tokens.

# %% tags=["nbval-ignore-output"] magic_args="--name followup" language="agent"
# Give me one practical tip for staying inside it.

# %% tags=["nbval-check-output"]
run = await followup
print(run.status, "·", run.usage.input_tokens, "input tokens")
print(run.final_text)
print("thread history:", [message.role for message in session.messages()])

# %% [markdown]
# ## What did it cost?
#
# Every run records its usage and cost in the session's ledger. `%agent cost` prints the notebook's
# total and returns a table by run, agent (sub-agents get their own rows) and model.

# %% tags=["nbval-check-output"]
# %agent cost

# %% [markdown]
# ## How full is the context window?
#
# `%agent context` shows the thread's gauge: the prompt estimate made before the last model call,
# against the model's usable window (its total minus the room kept for the answer).

# %% tags=["nbval-check-output"]
# %agent context

# %% [markdown]
# ## Next
#
# - [Tools and structured output](02_tools_and_structured_output.ipynb): notebook functions as tools, injected values, typed answers.
# - [Steering and cancellation](03_steering_and_cancellation.ipynb): pause, steer, resume and stop a running agent.
# - [Sub-agents and recursion](04_subagents_and_recursion.ipynb): agents as tools, the run tree, a depth limit.
# - [Context pressure](05_context_pressure.ipynb): what happens when the conversation outgrows the window.
# - [Observability](06_observability.ipynb): the event journal, replay, metrics and redaction.
#
# Every magic and flag: [docs/jupyter/magics.md](../docs/jupyter/magics.md).
