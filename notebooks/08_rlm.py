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
# # Recursive language models: the kernel as the model's REPL
#
# A log of 100,000 lines is about 6 MB: far more than a model should read in one prompt. With
# `%%agent --rlm` the model never sees it. It works in a Python REPL (a child kernel) where the log
# is a variable: it explores it with code, cuts it into chunks, asks a sub-model about each chunk
# with `llm_batch`, checks the result with code, and answers with `FINAL_VAR`.
#
# **Offline by default.** Without `OPENAI_API_KEY` the root model is scripted (its replies are the
# code a model would write) and the sub-model is a small function that reads its chunk, so the
# notebook prints the same thing every time; with the key set, both are `openai:gpt-4o-mini`.

# %%
# %load_ext tinyagents_nb

# %% tags=["nbval-check-output"]
import random

rng = random.Random(7)
KINDS = ["timeout", "disk_full", "auth_failed", "oom", "conn_reset"]
lines = []
for i in range(100_000):
    if rng.random() < 0.04:
        lines.append(f"2026-11-24T00:{i % 60:02d}:{i % 59:02d} ERROR {rng.choice(KINDS)} request={i} host=web-{i % 17}")
    else:
        lines.append(
            f"2026-11-24T00:{i % 60:02d}:{i % 59:02d} INFO ok request={i} latency_ms={rng.randint(1, 900)} host=web-{i % 17}"
        )
logs = "\n".join(lines)
print(f"{len(lines):,} lines, {len(logs):,} characters")

# %% tags=["nbval-check-output"]
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
    return ScriptedModel.text(
        f"Next step.\n{FENCE}python\n{code}\n{FENCE}", usage=Usage(input_tokens=tokens, output_tokens=60)
    )


def count_kinds(request: ModelRequest) -> ModelResponse:
    """Offline sub-model: counts the ERROR kinds in the chunk it was given, as JSON."""
    prompt = request.messages[-1].text
    counts = Counter(re.findall(r"^\S+ ERROR (\w+) ", prompt, re.MULTILINE))
    return ScriptedModel.text(json.dumps(dict(counts)), usage=Usage(input_tokens=len(prompt) // 4, output_tokens=20))


session = get_session()
if USE_REAL_PROVIDER:
    MODEL = SUB_MODEL = "openai:gpt-4o-mini"
else:
    MODEL, SUB_MODEL = "scripted-root", "chunk-counter"
    root = ScriptedModel(
        [
            reply("print(len(logs), logs.count(chr(10)) + 1)\nprint(logs[:230])", 900),
            reply(
                "import json, re\nfrom collections import Counter\n"
                "rows = logs.splitlines()\n"
                "chunks = [chr(10).join(rows[i : i + 5000]) for i in range(0, len(rows), 5000)]\n"
                "answers = llm_batch([f'Count the ERROR kinds in these log lines. Answer with JSON {{kind: count}} only.{chr(10)}{c}' for c in chunks])\n"
                "totals = Counter()\n"
                "for a in answers:\n"
                "    totals.update(json.loads(a))\n"
                "print(len(chunks), 'chunks;', dict(totals))",
                1300,
            ),
            reply(
                "check = Counter(re.findall(r' ERROR (\\w+) ', logs))\nprint('matches a direct count:', check == totals)",
                1700,
            ),
            reply("totals = dict(totals.most_common())\nFINAL_VAR('totals')", 1900),
        ],
        model_name=MODEL,
    )
    session.register_model(MODEL, root)
    session.register_model(SUB_MODEL, FunctionModel(count_kinds, model_name=SUB_MODEL))
print("root:", MODEL, "· sub-queries:", SUB_MODEL)

# %% [markdown]
# ## One cell: `%%agent --rlm`
#
# `--rlm` runs the prompt in a child kernel started from this notebook's Python (once per session,
# then reused); `--context logs` copies the variable into it; `--sub-model` picks the model behind
# `llm()`/`llm_batch()`. The dashboard shows the run and, in its tree, the sub-queries as child runs.

# %% tags=["nbval-ignore-output"] magic_args="--rlm --context logs --model {MODEL} --sub-model {SUB_MODEL} --name counted" language="agent"
# Count the ERROR lines of `logs` by kind. Use the REPL; answer with a dict from kind to count.

# %% tags=["nbval-check-output"]
run = await counted
print(run.status, "·", run.model_calls, "model calls")
print(run.final_text)

# %% [markdown]
# The model never received the log: the largest request it was sent is a few thousand characters.
# The 20 sub-queries ran as child runs one level down, and their tokens are part of the run's usage:

# %% tags=["nbval-check-output"]
events = session.journal_frame(counted)
children = events[(events["kind"] == "run.started") & (events["depth"] == 1)]
print("sub-queries (child runs at depth 1):", len(children))
print("tokens, sub-queries included:", f"{run.usage.input_tokens:,} in, {run.usage.output_tokens:,} out")
if not USE_REAL_PROVIDER:
    largest = max(sum(len(m.text) for m in request.messages) for request in root.requests)
    print(f"largest request to the root model: {largest:,} characters, against {len(logs):,} in the context")

# %% [markdown]
# ## The code steps
#
# Each block the model wrote is an `rlm.code` event and its output an `rlm.output` event in the
# session's journal (the dashboard's view of the steps comes from them):

# %% tags=["nbval-check-output"]
for item in session.journal.read_from(0, root_run_id=counted.run_id, kinds=["rlm.code", "rlm.output"]):
    event = item.event
    if event.kind == "rlm.code":
        print(f"--- step {event.iteration} ---")
        print(event.code)
    else:
        print(">>>", event.output.strip()[:300])

# %% [markdown]
# ## From Python, and in-process
#
# `tinyagents_nb.rlm.RLM` is the same thing as a Python API. `environment="local"` runs the code in
# this process instead of a child kernel: values are passed by reference (no copy, no pickling) but
# nothing is isolated, so use it only for code you trust. See
# [docs/rlm.md](../docs/rlm.md) for what each environment isolates, the limits and Stop.

# %% tags=["nbval-check-output"]
from tinyagents_nb.rlm import RLM, RLMLimits

local_model = ScriptedModel(
    [
        reply(
            "slow = [line for line in logs.splitlines() if 'latency_ms=' in line and int(line.split('latency_ms=')[1].split()[0]) > 850]\nprint(len(slow))",
            800,
        ),
        reply("FINAL(len(slow))", 900),
    ]
)
local = await RLM(model=local_model, environment="local", limits=RLMLimits(max_iterations=5)).invoke(
    "How many requests took more than 850 ms?", context={"logs": logs}
)
print(local.status, "·", local.final_text, "slow requests")
