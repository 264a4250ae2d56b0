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
# # MCP servers as tools
#
# Attach a [Model Context Protocol](https://modelcontextprotocol.io) server to the notebook's agent:
# its tools are offered to every `%%agent` run, named `{server}_{tool}`. The server here is a small
# local one shipped next to this notebook (`mcp_geo_server.py`, written with the official `mcp` SDK)
# that answers from a fixed table, so nothing leaves the machine; any MCP server from npm or PyPI
# plugs in the same way. Needs the extra: `pip install 'tinyagents-nb[mcp]'`.
#
# **Offline by default.** Without an API key this notebook uses scripted stand-in models from the
# testkit: they stream canned answers with fixed token counts, call tools and spawn sub-agents, so the
# notebook runs anywhere and prints the same thing every time (that is how CI tests it). With
# `OPENAI_API_KEY` set, the same cells use `openai:gpt-4o-mini`; the configuration cell switches.

# %%
# %load_ext tinyagents_nb

# %%
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
# %agent model {MODEL}

# %% [markdown]
# ## Add a server
#
# `%agent mcp add NAME -- COMMAND ARGS…` starts a stdio server, lists its tools and registers it with
# the session (`%agent mcp add NAME --url URL` reaches a streamable-HTTP server instead). The server's
# stderr goes to a log file, never into the notebook: a kernel has no terminal to give it.

# %% tags=["nbval-ignore-output"]
# %agent mcp add geo -- {sys.executable} mcp_geo_server.py

# %% tags=["nbval-check-output"]
session.mcp.frame()[["server", "transport", "status", "tools"]]

# %% [markdown]
# ## Ask
#
# Every later `%%agent` run is offered the server's tools next to the notebook's own. The model calls
# `geo_distance_km` and `geo_population`; the calls run in the server process.

# %% tags=["nbval-ignore-output"] magic_args="--name trip" language="agent"
# How far is Bergen from Oslo, and how many people live there?

# %% tags=["nbval-check-output"]
print(trip.status)
for message in trip.outcome.messages[-4:]:
    if message.role == "tool":
        print(f"{message.name} -> {message.text}")
print(trip.final_text)

# %% [markdown]
# ## The same server from Python
#
# `MCPServer.stdio(...)` (or `MCPServer.http(url, headers=...)`) goes straight into an `AgentHarness`.
# The server starts when a run first needs it and is reused by later runs, whichever event loop they
# run on; `aclose()` stops it and its process. The model sees the schema the server published, and the
# server's own log lines stay in its stderr file, readable with `stderr_tail()`.

# %% tags=["nbval-check-output"]
from tinyagents_nb.harness import AgentHarness, MCPServer

geo = MCPServer.stdio("geo", sys.executable, ["mcp_geo_server.py"])
if USE_REAL_PROVIDER:
    model = session.resolve_model(MODEL)
else:
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("geo_distance_km", {"a": "Oslo", "b": "Stockholm"}),
            "Stockholm is 416.3 km from Oslo.",
        ]
    )
agent = AgentHarness(model=model, tools=[geo])
run = await agent.invoke("How far is Stockholm from Oslo?")
print(run.final_text)
print(next(t for t in geo.tools if t.name == "geo_distance_km").schema.parameters)
print([line for line in geo.stderr_tail().splitlines() if line.startswith("distance_km")])
await agent.aclose()
print("running after aclose:", geo.running)

# %% [markdown]
# ## Remove it
#
# `%agent mcp remove` stops the server (its process ends) and its tools leave later runs. Servers
# still registered when the kernel shuts down are stopped then.

# %% tags=["nbval-check-output"]
# %agent mcp remove geo
