"""``python -m tinyagents_nb``: the README's main job, the quickstart notebook executed headless.

It runs ``notebooks/01_quickstart.ipynb`` top to bottom in a real Jupyter kernel of this interpreter
(``%%agent`` cells wait for their runs by default, so every output stays in its cell), writes the executed copy to ``artifacts/``, and
prints the conversation, the cost table and where the notebook is. Without ``OPENAI_API_KEY`` the
notebook uses its offline scripted model and this prints one line on how to use a real provider.

``python -m tinyagents_nb --harness-tour`` is the older, kernel-free tour of the harness API: a
scripted model plays ``gpt-4o-mini``; the loop, a typed tool, a sub-agent one level down, streaming,
one shared event stream, and usage and cost rolled up the tree are all real.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .harness import AgentHarness, RunConfig, RunContext, SubAgent, TextDelta, Usage, tool
from .harness.providers import known_providers
from .harness.testkit import ScriptedModel

__all__ = ["current_env_kernel", "main", "provider_notice", "report", "run_notebook"]

REPO = Path(__file__).resolve().parent.parent
QUICKSTART = REPO / "notebooks" / "01_quickstart.ipynb"
EXECUTED = REPO / "artifacts" / "01_quickstart.executed.ipynb"
REAL_MODEL = "openai:gpt-4o-mini"
CELL_TIMEOUT_S = 300


# ------------------------------------------------------------------------------------------ the quickstart
def current_env_kernel() -> type[Any]:
    """A kernel manager class whose kernels run *this* interpreter, whatever ``python3`` kernelspecs are installed.

    For ``NotebookClient(kernel_manager_class=...)``, which then owns (and shuts down) the kernel.
    """
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class ThisInterpreterSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> Any:
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict())

    class ThisInterpreterKernelManager(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _kernel_spec_manager_default(self) -> KernelSpecManager:
            return ThisInterpreterSpecs(data_dir=self.data_dir)

    return ThisInterpreterKernelManager


def provider_notice() -> str:
    """One line: which model the quickstart will use, and how to switch to a real provider."""
    if os.environ.get("OPENAI_API_KEY"):
        return f"Using {REAL_MODEL} (OPENAI_API_KEY is set): the quickstart calls the provider, which bills the key."
    names = [spec.api_key_env for spec, _ in known_providers() if spec.api_key_env]
    variables = ", ".join(dict.fromkeys(names))  # two providers may read one variable: name it once
    return (
        "Offline: OPENAI_API_KEY is not set, so the quickstart runs its scripted model. For a real provider "
        f'export OPENAI_API_KEY and re-run, or in a notebook run %config AgentMagics.default_model = "{REAL_MODEL}" '
        f"(keys are read from {variables})."
    )


_WIDGET = "application/vnd.jupyter.widget-view+json"


def _text(outputs: Sequence[Any]) -> list[str]:
    """What a terminal would show for a cell: stdout/stderr and the text/plain of results and records, no widgets."""
    lines: list[str] = []
    for output in outputs:
        if output.output_type == "stream":
            lines.append(str(output.text).rstrip("\n"))
        elif output.output_type == "execute_result" or (
            output.output_type == "display_data" and _WIDGET not in output.data
        ):
            lines.append(str(output.data.get("text/plain", "")))
        elif output.output_type == "error":
            lines.append(f"{output.ename}: {output.evalue}")
    return lines


def report(nb: Any) -> list[str]:
    """The transcript (each ``%%agent`` prompt and what its cell printed) and the ``%agent cost`` table."""
    transcript: list[str] = []
    cost: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = str(cell.source).strip()
        if source.startswith("%%agent"):
            prompt = source.split("\n", 1)[1].strip() if "\n" in source else ""
            transcript += [f"> {prompt}", *_text(cell.outputs), ""]
        elif source.startswith("%agent cost"):
            cost += _text(cell.outputs)
    return ["Transcript", "", *transcript, "Cost", *cost]


def run_notebook(notebook: Path, output: Path) -> int:
    """Execute ``notebook`` headless, write the executed copy to ``output``, print the report; 0 on success."""
    try:
        import nbformat as _nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:
        print(f"running the quickstart needs nbclient ({exc}); install the test extra: pip install -e '.[test]'")
        return 2
    if not notebook.is_file():
        print(f"no notebook at {notebook} (an installed package has no notebooks/): pass --notebook PATH")
        return 2
    print(provider_notice())
    print(f"Executing {_shown(notebook)} in a Jupyter kernel...\n")
    nbformat: Any = _nbformat  # untyped
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        kernel_manager_class=current_env_kernel(),
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(notebook.parent)}},
        record_timing=False,
    )
    env = {k: v for k, v in os.environ.items() if k != "TINYAGENTS_NB_BLOCKING"}  # the default: cells wait
    failed: str | None = None
    with tempfile.TemporaryFile(mode="w+") as kernel_log:  # the kernel's own stderr: shown only if it fails
        try:
            client.execute(env=env, stderr=kernel_log)
        except CellExecutionError as exc:
            failed = f"{getattr(exc, 'ename', 'Error')}: {getattr(exc, 'evalue', exc)}"
        except Exception as exc:  # the kernel died or timed out
            kernel_log.seek(0)
            failed = f"{type(exc).__name__}: {exc}\n{kernel_log.read()[-2000:]}"
    output.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, output)
    print("\n".join(report(nb)))
    print(f"\nExecuted notebook: {_shown(output)}")
    print(f"Open it in JupyterLab: .venv/bin/jupyter lab {_shown(notebook)}  (or the executed copy above)")
    if failed is not None:
        print(f"\nThe notebook stopped at an error: {failed}")
        return 1
    return 0


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------------------ the harness tour
MODEL = "gpt-4o-mini"


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return {"Oslo": "8°C, light rain (6 mm expected)"}.get(city, "unknown")


class _PlaysGpt4oMini(ScriptedModel):
    """Canned replies that report themselves as gpt-4o-mini on openai, so the cost table is realistic."""

    @property
    def provider(self) -> str:
        return "openai"


def _agents() -> AgentHarness[None]:
    advice = "Bring a compact umbrella and a water-resistant jacket."
    advisor = SubAgent(
        "packing_advisor",
        AgentHarness(
            model=_PlaysGpt4oMini(
                [ScriptedModel.text(advice, usage=Usage(input_tokens=310, output_tokens=14))], model_name=MODEL
            ),
            system_prompt="You give short packing advice.",
        ),
        description="Gives packing advice for given weather.",
    )
    calls = [("weather", {"city": "Oslo"}), ("packing_advisor", {"input": "Light rain, 8°C in Oslo: what to pack?"})]
    answer = "It's 8°C in Oslo with light rain, so yes: bring a compact umbrella and a water-resistant jacket."
    script = [
        ScriptedModel.tool_calls(calls, usage=Usage(input_tokens=420, output_tokens=46)),
        ScriptedModel.text(answer, usage=Usage(input_tokens=610, cached_input_tokens=384, output_tokens=24)),
    ]
    return AgentHarness(
        model=_PlaysGpt4oMini(script, model_name=MODEL, chunk_size=6),
        tools=[weather, advisor.as_tool()],
        system_prompt="You are a concise travel assistant.",
    )


async def _tour() -> int:
    harness = _agents()
    ctx = RunContext(config=RunConfig(thread_id="demo-thread", tags=["demo"]))
    prompt = "What's the weather in Oslo, and should I bring an umbrella?"
    print("Offline demo: a scripted model plays gpt-4o-mini; no network, no API key.\n")
    print(f"> {prompt}\n")
    kinds: Counter[str] = Counter()
    runs: dict[str, tuple[str | None, int]] = {}
    stream = harness.invoke_streaming(prompt, context=ctx)
    async for event in stream:
        kinds[event.kind] += 1
        runs.setdefault(event.run_id, (event.parent_run_id, event.depth))
        if event.kind == "model.delta" and event.depth == 0:
            delta = getattr(event, "delta", None)
            if isinstance(delta, TextDelta):
                sys.stdout.write(delta.text)
                sys.stdout.flush()
        elif event.kind == "tool.completed":
            print(f"  [tool] {getattr(event, 'tool_name', '')} -> {getattr(event, 'output', '')}")
    run = await stream.result()
    print("\n\nRun tree (one root, one sub-agent one level down)")
    for run_id, (parent, depth) in runs.items():
        print(f"  {'  ' * depth}{run_id}  parent={parent}  depth={depth}")
    print(f"\nEvents on the shared sink: {sum(kinds.values())}")
    for kind, count in sorted(kinds.items()):
        print(f"  {kind:<18} {count}")
    print("\nUsage and cost per model call (genai-prices, offline)")
    usage = ctx.usage.to_dataframe()[
        ["run_id", "depth", "model", "input_tokens", "cached_input_tokens", "output_tokens"]
    ]
    costs = ctx.costs.to_dataframe()[["total_usd"]]
    print(usage.join(costs).to_string(index=False))
    total = run.cost.total_usd if run.cost is not None else None
    print(f"\nWhole tree: {run.usage.total_tokens} tokens, {total} USD; status={run.status}")
    return 0


# ------------------------------------------------------------------------------------------ entry point
def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="python -m tinyagents_nb", description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", type=Path, default=QUICKSTART, help="the notebook to execute")
    parser.add_argument("--output", type=Path, default=EXECUTED, help="where to write the executed copy")
    parser.add_argument("--harness-tour", action="store_true", help="run the kernel-free harness tour instead")
    args = parser.parse_args(list(argv))
    if args.harness_tour:
        return asyncio.run(_tour())
    return run_notebook(args.notebook, args.output)
