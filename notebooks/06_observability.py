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
# # Observability
#
# Every event of every run in this notebook goes to the session's event journal, a SQLite file that
# other processes can read while the kernel runs and that survives a kernel crash. This notebook runs
# one agent, then reads its events back: replay from an offset, the events as a pandas DataFrame,
# latency metrics, and a redacting sink that keeps a secret out of what is stored.
#
# **Offline by default.** Without an API key this notebook uses scripted stand-in models from the
# testkit: they stream canned answers with fixed token counts, call tools and spawn sub-agents, so the
# notebook runs anywhere and prints the same thing every time (that is how CI tests it). With
# `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`; the configuration cell switches.

# %%
# %load_ext tinyagents_nb

# %% [markdown]
# ## A journal on disk
#
# `AgentMagics.store_path` puts the session's history, state and journal in a SQLite file;
# `%agent reset` reopens the session on it. (A temporary directory here, so running the notebook
# leaves nothing behind.)

# %% tags=["nbval-ignore-output"]
import tempfile
from pathlib import Path

JOURNAL = Path(tempfile.mkdtemp()) / "agent-session.db"
# %config AgentMagics.store_path = str(JOURNAL)
# %agent reset

# %% [markdown]
# ## Redact before storing
#
# The session's journal stores events as they are. To keep a secret out of a stored copy, put a
# `RedactingSink` in front of the journal: it masks the secrets you name, key-shaped strings
# (`sk-...`, bearer tokens) and values under sensitive keys (`api_key`, `password`, ...).
# `secrets_from_env()` collects the values of credential-like environment variables.

# %%
from tinyagents_nb.harness.observability import InMemoryEventJournal, JournalSink, RedactingSink, secrets_from_env
from tinyagents_nb.magics import get_session

SECRET = "swordfish-1234"  # a password the user is about to paste into a prompt
session = get_session()
redacted = InMemoryEventJournal()
detach = session.context.events.add_listener(
    RedactingSink(JournalSink(redacted), secrets=[SECRET, *secrets_from_env()])
)

# %% [markdown]
# ## Run an agent

# %%
import asyncio
import os

from tinyagents_nb.harness import Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import agent_tool

USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))


@agent_tool
async def order_status(order_id: str) -> str:
    """Where an order is."""
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
                ScriptedModel.tool_call(
                    "order_status", {"order_id": "42"}, usage=Usage(input_tokens=96, output_tokens=15)
                ),
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
# %agent model {MODEL}

# %% tags=["nbval-ignore-output"] magic_args="--name order" language="agent"
# My password is swordfish-1234 if you need it. Why is order 42 late?

# %% [markdown]
# ## The journal
#
# `%agent journal order` returns the run's events as a DataFrame (`events_to_dataframe`): offset,
# ids, depth, timestamp and a one-line detail per event. Token deltas are not journaled; every model
# call is, with its usage.

# %% tags=["nbval-check-output"]
await order
frame = session.journal_frame(order)
frame[["offset", "depth", "kind"]]

# %% tags=["nbval-ignore-output"]
# %agent journal order

# %% [markdown]
# ## Replay from an offset
#
# Every event has an offset in the session's stream, so a reader can resume where it stopped. A
# second connection to the same file (another process would do the same) replays from the tool call
# on, and a `RunStatusStore` rebuilds the run's status from the replayed events, as after a restart:

# %% tags=["nbval-check-output"]
from tinyagents_nb.harness.observability import RunStatusStore, SQLiteEventJournal

start = int(frame.loc[frame["kind"] == "tool.started", "offset"].iloc[0])
reader = SQLiteEventJournal(JOURNAL)
for observation in reader.replay_from(start, root_run_id=order.run_id):
    print(observation.offset - start, observation.kind)

status = RunStatusStore().replay(reader.read_from(0, root_run_id=order.run_id)).get(order.run_id)
print(status.status, "·", status.model_calls, "model calls ·", status.tool_calls, "tool call")
reader.close()

# %% [markdown]
# ## Latency metrics
#
# `AgentLatencyMetrics` pairs each started event with its end, across the run and any sub-agents:
# where did the time go?

# %% tags=["nbval-ignore-output"]
from tinyagents_nb.harness.observability import AgentLatencyMetrics

metrics = AgentLatencyMetrics.from_record(session.journal.read_from(0, root_run_id=order.run_id))
metrics.to_dataframe()

# %% tags=["nbval-check-output"]
print(len(metrics.model_calls), "model calls ·", len(metrics.tool_calls), "tool call")
print("the tool took at least 50 ms:", metrics.max_tool_s >= 0.05)


# %% [markdown]
# ## The secret
#
# The session's own journal stored the prompt as typed; the redacted copy did not:


# %% tags=["nbval-check-output"]
def mentions_secret(journal):
    return any(SECRET in str(observation.event) for observation in journal.read_from(0, root_run_id=order.run_id))


print("session journal holds the secret:", mentions_secret(session.journal))
print("redacted journal holds the secret:", mentions_secret(redacted))
started = redacted.read_from(0, root_run_id=order.run_id, kinds=["run.started"])[0].event
print("stored prompt:", started.input)
