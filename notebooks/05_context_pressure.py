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
# # Context pressure
#
# A long conversation on a deliberately tiny context window (380 tokens, 100 of them kept for the
# answer), so you can watch the harness make room. Before every model call it estimates the request;
# the gauge rises turn by turn, and when a request no longer fits the harness applies its pressure
# chain in order — **drop retrieved context, trim old turns, summarize, compact tool outputs** —
# stopping as soon as it fits, and failing with `ContextLimitError` when nothing more can go. Each
# action is a `context.pressure` event with the estimate before and after, and the dashboard lists
# it under its gauge. The transcript itself is never changed: relief applies to what is sent.
#
# This notebook drives the harness API (`AgentHarness` and the same `RunDashboard` the magics use),
# because it needs two things `%%agent` does not set: a custom window and a retrieval provider.
#
# **Offline by default.** Without an API key this notebook uses scripted stand-in models from the
# testkit: they stream canned answers with fixed token counts, call tools and spawn sub-agents, so the
# notebook runs anywhere and prints the same thing every time (that is how CI tests it). With
# `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`; the configuration cell switches.

# %%
# %load_ext tinyagents_nb

# %%
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
                ScriptedModel.tool_call(
                    "fetch_logs", {"service": "api"}, usage=Usage(input_tokens=266, output_tokens=16)
                ),
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

# %% [markdown]
# ## The agent
#
# An incident assistant with two sources of context: a handbook retriever, whose snippet is added to
# every request and tagged *retrieved* (nonessential, so pressure drops it first), and a log tool
# whose output is large.

# %%
from tinyagents_nb.harness import AgentHarness, ContextWindow, UserMessage, tool
from tinyagents_nb.harness.memory import ContextProvidersMiddleware


class Handbook:
    """A stand-in retriever: the same handbook snippet for every question."""

    async def provide(self, ctx, request):
        return [
            UserMessage(
                text="[handbook §4] Incidents are triaged by severity. A sev-1 is a customer-facing outage: page "
                "the on-call, open #incident, post updates every 30 minutes, write a postmortem within 5 days."
            )
        ]


@tool
def fetch_logs(service: str) -> str:
    """The last 40 log lines of a service."""
    return "\n".join(
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

# %% [markdown]
# ## One turn at a time
#
# Each turn runs on a new root of the session's context (so it lands in the session's journal and
# ledger) in one conversation thread, shows a live dashboard, keeps the transcript for the next
# turn, and prints the gauge and the pressure actions it took.

# %%
from IPython.display import display

from tinyagents_nb.widgets import RunDashboard

history, turns = [], []


async def turn(question):
    """Ask one question with the conversation so far; show the dashboard, then the gauge as text."""
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
    turns.append(
        {"turn": len(turns) + 1, "status": run.status, "context": gauge, "pressure actions": ", ".join(actions)}
    )
    print(f"{run.status} · context {gauge}")
    for mark in dashboard.gauge.marks:
        print("  pressure:", mark)
    if run.error is not None:
        print(f"  {type(run.error).__name__}: {run.error}")


# %% [markdown]
# ## Turns 1 to 3: the gauge rises
#
# Each answer is added to the history, so each request is bigger than the last. The third request
# takes 94% of the usable window; nothing had to go yet.

# %% tags=["nbval-ignore-output"]
await turn("What is a sev-1?")

# %% tags=["nbval-ignore-output"]
await turn("What happens after paging?")

# %% tags=["nbval-ignore-output"]
await turn("Our API has been down since 11:52. What should we do first?")

# %% [markdown]
# ## Turn 4: drop, trim, compact
#
# The first call of this turn no longer fits with the handbook snippet, so the snippet is dropped.
# Then the log tool returns over a thousand tokens, about four times what fits: the chain drops the
# snippet again, trims the oldest turns, and finally compacts the tool output (its full text stays
# in the session's store, retrievable with `load_tool_output`).

# %% tags=["nbval-ignore-output"]
await turn("Check the api logs: what is wrong?")

# %% [markdown]
# Compaction lost nothing: the full log is in the session's store under the key the placeholder names.

# %% tags=["nbval-check-output"]
from tinyagents_nb.harness.memory import TOOL_OUTPUT_NAMESPACE, load_tool_output

key = session.store.keys(TOOL_OUTPUT_NAMESPACE)[0]
log = load_tool_output(session.store, key)
print(f"{key}: {log.name} output, {len(log.text):,} characters kept")

# %% [markdown]
# ## Turn 5: nothing more can go
#
# A pasted document that is larger than the whole window on its own. The chain drops, trims and
# summarizes everything it may, but the current question must stay, so the run fails with
# `ContextLimitError` before any model call — reported in the dashboard, not as a crash.

# %% tags=["nbval-ignore-output"]
await turn("Here is the full postmortem draft, please check it: " + "lorem ipsum dolor sit amet " * 300)

# %% [markdown]
# ## All turns
#
# What the dashboards showed, as one table:

# %% tags=["nbval-check-output"]
import pandas as pd

pd.set_option("display.max_colwidth", None)
pd.DataFrame(turns).set_index("turn")
