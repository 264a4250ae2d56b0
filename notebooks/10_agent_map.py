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
# # Agents over a DataFrame's rows
#
# The commonest job in a notebook: run the same prompt over every row of a table (classify
# reviews, extract fields, label a dataset). `%%agent --map NAME` runs one full agent run per row
# of the DataFrame `NAME`, with a live view (progress, rows per second, ETA, spend against the
# budget, the last outputs, an errors table and Stop), and binds the result to `NAME_result`:
# the input's rows and index, the output model's fields as columns, then `status`, `error`,
# `tokens` and `cost_usd`.
#
# **Offline by default.** Without an API key a small function plays the model: it reads the review
# and answers with the JSON the output model asks for, priced like gpt-4o-mini so the cost column
# has numbers in it. With `OPENAI_API_KEY` set, the same cells run against `gpt-4o-mini`.

# %%
# %load_ext tinyagents_nb

# %% [markdown]
# A map commits each finished row to the session's store, so the store must be on disk for a map to
# be resumable. A temporary directory here, so running the notebook leaves nothing behind; in your
# own notebooks `%config AgentMagics.store_path` names a file you keep.

# %% tags=["nbval-ignore-output"]
import tempfile
from pathlib import Path

STORE = Path(tempfile.mkdtemp()) / "agent-session.db"
# %config AgentMagics.store_path = str(STORE)
# %agent reset

# %% [markdown]
# ## The data and the output
#
# Twelve product reviews, and `Review`, the pydantic model each row's answer must validate
# against: its fields become the result's columns. One review is corrupt, to show what a row's own
# failure looks like: it fails that row (the `error` column), not the map.

# %%
import json
import os

import pandas as pd
import pydantic

from tinyagents_nb.harness import AssistantMessage, ModelPricing, ModelResponse, Usage
from tinyagents_nb.harness.testkit import FunctionModel
from tinyagents_nb.magics import get_session

reviews = pd.DataFrame(
    {
        "text": [
            "Arrived quickly and works perfectly, love it.",
            "Broke after two days. Waste of money.",
            "It is fine. Does what it says.",
            "Excellent battery life, great screen.",
            "Terrible support, never again.",
            "Good value for the price.",
            "[corrupt]",
            "Stopped charging after a week, awful.",
            "Great sound, comfortable to wear.",
            "Okay but the manual is confusing.",
            "Perfect gift, my dad loves it.",
            "Poor build quality, cheap plastic.",
        ]
    },
    index=[f"R{n:03d}" for n in range(1, 13)],
)


class Review(pydantic.BaseModel):
    sentiment: str  # positive, negative or neutral
    stars: int  # 1 to 5


USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))  # set to False to stay offline anyway
MODEL = "openai:gpt-4o-mini"
if not USE_REAL_PROVIDER:
    GOOD, BAD = ("love", "excellent", "great", "perfect", "good"), ("broke", "terrible", "awful", "poor", "waste")

    def reviewer(request):
        text = request.messages[-1].text.lower()
        if "[corrupt]" in text:
            raise ValueError("the review text is unreadable")
        if any(word in text for word in BAD):
            answer = {"sentiment": "negative", "stars": 1}
        elif any(word in text for word in GOOD):
            answer = {"sentiment": "positive", "stars": 5}
        else:
            answer = {"sentiment": "neutral", "stars": 3}
        usage = Usage(input_tokens=len(text) // 4 + 60, output_tokens=12)
        return ModelResponse(message=AssistantMessage(text=json.dumps(answer)), usage=usage, model="reviewer")

    session = get_session()
    session.register_model("reviewer", FunctionModel(reviewer, model_name="reviewer"))
    session.context.costs.register_price("reviewer", ModelPricing(input_per_mtok="0.15", output_per_mtok="0.60"))
    MODEL = "reviewer"
# %agent model {MODEL}

# %% [markdown]
# ## Map the prompt over the rows
#
# The cell body is the prompt, a template over the row's columns (`{{text}}`). `--output Review`
# asks for structured output; `--concurrency 4` keeps four rows in flight; `--budget 0.05` stops
# starting rows before the map would spend more than five cents. The live view shows while the map
# runs and leaves a static record when it ends.

# %% tags=["nbval-ignore-output"] magic_args="--map reviews --output Review --concurrency 4 --budget 0.05" language="agent"
# Classify the sentiment of this product review and rate it from 1 to 5 stars.
#
# Review: {{text}}

# %% tags=["nbval-check-output"]
reviews_result

# %% [markdown]
# The corrupt review failed on its own; every other row is `done`. The summary of the map (counts,
# speed, spend) is in the frame's `attrs`:

# %% tags=["nbval-check-output"]
summary = reviews_result.attrs["agent_map"]
{key: summary[key] for key in ("state", "done", "failed", "pending", "skipped")}

# %% [markdown]
# ## Run it again: only what is not done
#
# Every finished row was committed to the session's store as it ended, so running the same map
# again does only the rows not yet there and says how many it skipped. (A Stop, a kernel restart
# or a crash leaves the same state: the next run picks up the rest.) Failed rows are kept as failed,
# so a re-run never pays twice for a row the provider rejects.

# %% tags=["nbval-ignore-output"] magic_args="--map reviews --output Review --concurrency 4" language="agent"
# Classify the sentiment of this product review and rate it from 1 to 5 stars.
#
# Review: {{text}}

# %% tags=["nbval-check-output"]
reviews_result.attrs["agent_map"]["skipped"]

# %% [markdown]
# ## From Python
#
# `agent_map` is the same thing as a function (`agent_map_async` inside async code), for scripts
# and pipelines. `rate_limits=RateLimits(...)` shares requests and tokens per minute between the
# rows, and also follows what the provider reports in its rate-limit headers, so the rows slow down
# before a 429. Other executors, with the same result frame: `executor="batch"` sends the rows
# through the provider's Batch API at half price, `executor="dask"` or `executor="ray"` partitions
# them over a cluster (see the agents-over-data guide).

# %% tags=["nbval-check-output"]
from tinyagents_nb.harness.batch import RateLimits, agent_map

labels = agent_map(
    reviews.head(6),
    "Classify the sentiment of this product review and rate it from 1 to 5 stars.\n\nReview: {{text}}",
    model=get_session().resolve_model(MODEL),
    output=Review,
    rate_limits=RateLimits(requests_per_minute=600),
)
labels[["sentiment", "stars", "status", "tokens"]]
