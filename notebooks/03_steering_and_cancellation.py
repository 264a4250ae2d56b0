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
# # Steering and cancellation
#
# A long run that you control while it works: pause it, steer it with a message, resume it, and stop
# runs from the dashboard's Stop button and with `%agent stop`. A stopped run keeps its partial
# transcript and the usage it had so far.
#
# **This notebook uses background runs** (`%%agent --background`): the cell starts the run and
# returns at once, and the following cells control it while it streams on the session's own thread.
# (A default, waiting `%%agent` cell is controlled from its dashboard instead: Stop, Pause, Resume
# and the steer box work while it waits.)
#
# Executed headless (nbconvert, papermill, nbval), a `--background` cell waits for its run, because no
# frontend would update the cell afterwards. This notebook controls its runs from later cells, so it
# keeps them in the background with `headless_background = "keep"` and awaits each one: a run's
# record lands in its own cell while a later cell waits for it.
#
# **Offline by default.** Without an API key this notebook uses scripted stand-in models from the
# testkit: they stream canned answers with fixed token counts, call tools and spawn sub-agents, so the
# notebook runs anywhere and prints the same thing every time (that is how CI tests it). With
# `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`; the configuration cell switches.

# %%
# %load_ext tinyagents_nb
# %config AgentMagics.headless_background = "keep"

# %% [markdown]
# ## A slow agent
#
# The agent reads an annual report one chapter per tool call, and each chapter takes a moment, so
# there is time to intervene. Offline, a `FunctionModel` plays the model: it asks for the next chapter
# until it has read all six, then summarizes, and follows a steer message if it got one.

# %%
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
    """Read one chapter (1-6) of the annual report."""
    await asyncio.sleep(0.15)  # a slow source
    return REPORT.get(number, "There is no such chapter.")


def reviewer(request: ModelRequest) -> ModelResponse:
    """Offline stand-in: one chapter per turn, then a summary that follows any steer message."""
    read = sum(message.role == "tool" for message in request.messages)
    usage = Usage(input_tokens=120 + 35 * read, output_tokens=14)
    if read < len(REPORT):
        return ScriptedModel.tool_call(
            "read_chapter", {"number": read + 1}, text=f"Reading chapter {read + 1}. ", usage=usage
        )
    steered = any(message.role == "user" for message in request.messages[1:])
    if steered:
        return ScriptedModel.text("Totals: revenue $60M, costs $42M, so an $18M margin (30%).", usage=usage)
    return ScriptedModel.text("Growth with rising costs, two launches slipped, a flat outlook.", usage=usage)


session = get_session()
if USE_REAL_PROVIDER:
    MODEL = "openai:gpt-4o-mini"
else:
    MODEL = "scripted"
    session.register_model(
        MODEL, SlowModel(FunctionModel(reviewer, model_name=MODEL, chunk_size=4), chunk_delay_s=0.02)
    )
# %agent model {MODEL}

# %% [markdown]
# ## Start a long run
#
# No `--wait`: the cell returns at once and the run streams in the dashboard. `--new-thread` gives
# each run of this notebook its own conversation.

# %% tags=["nbval-ignore-output"] magic_args="--background --name long --new-thread" language="agent"
# Read the annual report chapter by chapter with read_chapter (chapters 1 to 6), then summarize it in one sentence.

# %% [markdown]
# ## Pause, steer, resume
#
# `%agent pause` holds the run before its next model call (the dashboard's Pause button does the
# same). While it is paused, `%agent steer` queues a user message that the next model call will see,
# and `%agent resume` lets it continue.

# %% tags=["nbval-check-output"]
await asyncio.sleep(0.5)  # let it read a chapter or two
# %agent pause

# %% tags=["nbval-check-output"]
while long.status != "paused":  # the pause takes effect at the run's next checkpoint
    await asyncio.sleep(0.05)
print(long.status)

# %% tags=["nbval-check-output"]
# %agent steer Focus on the totals: revenue, costs and margin.

# %% tags=["nbval-check-output"]
# %agent resume

# %% [markdown]
# Awaiting the handle waits for the end. The summary follows the steer message:

# %% tags=["nbval-check-output"]
run = await long
print(run.status, "·", run.tool_calls, "chapters read")
print(run.final_text)

# %% [markdown]
# ## Stop from the dashboard
#
# The Stop button cancels the run cooperatively: the run stops at its next checkpoint (between
# tokens, before a model or tool call) and ends as `cancelled`. The notebook clicks it here with
# `Button.click()`, which runs the same callback as a real click; `second.cancel()` does the same
# from code.

# %% tags=["nbval-ignore-output"] magic_args="--background --name second --new-thread" language="agent"
# Read the annual report chapter by chapter with read_chapter (chapters 1 to 6), then summarize it in one sentence.

# %% tags=["nbval-check-output"]
await asyncio.sleep(0.5)
second.dashboard.controls.stop.click()
run = await second.wait()  # wait() returns a cancelled run; `await second` would raise RunCancelled
print(run.status, "·", run.error.reason)

# %% [markdown]
# The partial transcript and the usage so far survive the cancel (how far it got depends on timing,
# so this output varies):

# %% tags=["nbval-ignore-output"]
for message in run.messages:
    calls = "".join(f" -> {call.name}({call.arguments})" for call in getattr(message, "tool_calls", ()))
    partial = " (partial: streamed when the stop came)" if "partial" in message.tags else ""
    print(f"{message.role:>9}: {message.text.strip()}{calls}{partial}")
print(f"before the stop: model calls {run.model_calls}, tool calls {run.tool_calls}, tokens {run.usage.total_tokens}")

# %% [markdown]
# ## Stop with `%agent stop`
#
# `%agent stop` cancels the latest active run (or a named one, or `all`), from any cell.

# %% tags=["nbval-ignore-output"] magic_args="--background --name third --new-thread" language="agent"
# Read the annual report chapter by chapter with read_chapter (chapters 1 to 6), then summarize it in one sentence.

# %% tags=["nbval-check-output"]
await asyncio.sleep(0.5)
# %agent stop third

# %% tags=["nbval-check-output"]
run = await third.wait()
print(run.status, "·", run.error.reason)

# %% [markdown]
# The session keeps every run; `%agent runs` has the full table (ids, tokens, cost).

# %% tags=["nbval-check-output"]
session.runs_frame()[["run", "status", "mode"]]
