"""``%agent trace otlp URL`` in a real kernel (6.x and 7.x): the notebook's runs reach an OTLP receiver in this process."""

from __future__ import annotations

import pytest

from tests.harness.observability.otlp_receiver import OTLPReceiver
from tests.kernel._kernel import KernelHarness

from .test_kernel_magics import wait_for

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session
get_session().register_model(
    "scripted", ScriptedModel([ScriptedModel.tool_call("double", {"x": 21}), "42", "again"], model_name="kernel-model")
)

def double(x: int) -> int:
    \"\"\"Double a number.\"\"\"
    return 2 * x

get_session().register_tool(double)
"""


def test_a_kernels_runs_are_exported_over_otlp(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    with OTLPReceiver() as rx:
        traced = kernel.execute(f"%agent trace otlp {rx.url}")
        assert traced.status == "ok", traced.error
        assert f"tracing: OTLP/HTTP to {rx.url}/v1/traces" in traced.stdout
        waiting = kernel.execute("%%agent --model scripted --wait --name first\nDouble 21.")
        assert waiting.status == "ok", waiting.error
        background = kernel.execute("%%agent --model scripted --background --name second\nOnce more.")
        assert background.status == "ok", background.error
        wait_for(kernel, "second.done", timeout=60)
        assert kernel.value("second.outcome.final_text") == "again"
        assert kernel.value("get_session().tracing.sink.force_flush()") is True
        spans = rx.wait_for(5)
        stopped = kernel.execute("%agent trace off")
        assert "tracing: stopped" in stopped.stdout
    names = sorted(s.name for s in spans)
    assert names == sorted(  # a notebook run's agent is named by its --name
        ["invoke_agent first", "invoke_agent second", *["chat kernel-model"] * 3, "execute_tool double"]
    )
    thread = kernel.value("get_session().thread_id")
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    assert {s.attributes["gen_ai.conversation.id"] for s in agents} == {thread}
    tool_span = next(s for s in spans if s.name == "execute_tool double")
    assert tool_span.parent_span_id in {a.span_id for a in agents}
