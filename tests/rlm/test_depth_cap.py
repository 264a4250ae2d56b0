"""The depth cap holds against code in the REPL that tries to get past it.

The child kernel is the sandboxed REPL, so that is where the attempts run: a forged request with a
depth of its own on the REPL's channel, the same on a fresh connection made with the channel's
token, and a parent handing its own channel to its child so the child asks the parent's harness.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from tinyagents_nb.harness import ModelRequest, ModelResponse, RunContext
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel
from tinyagents_nb.rlm import RLM, KernelEnvironment, RLMLimits

from .test_rlm_recursion import fenced, task_of, turn_of

pytestmark = [pytest.mark.anyio, pytest.mark.kernel]

# the REPL's own channel, dug out of the helpers' closures (what hostile code would do)
_CHANNEL = """\
def _cell(fn, name):
    return next(c.cell_contents for c, n in zip(fn.__closure__, fn.__code__.co_freevars) if n == name)
call = _cell(rlm_query_batched, 'call')
port, token = _cell(call, 'port'), _cell(call, 'token')
"""

_FORGE = """\
import json, socket
forged = {'op': 'rlm', 'prompts': ['DEEPER'], 'contexts': [None],
          'depth': -1, 'max_depth': 99, 'limits': {'max_depth': 99}}
def raw(port, token, payload):
    with socket.create_connection(('127.0.0.1', port)) as s:
        f = s.makefile('rwb')
        f.write(json.dumps({'token': token}).encode() + b'\\n')
        f.write(json.dumps(payload).encode() + b'\\n')
        f.flush()
        return json.loads(f.readline())
"""


def _model(seen: dict[str, str]) -> FunctionModel:
    def reply(request: ModelRequest) -> ModelResponse:
        task, turn = task_of(request), turn_of(request)
        if turn > 0:
            seen[next(n for n in ("ROOT", "CHILD", "GRAND") if n in task)] = request.messages[-1].text
            return fenced("answer.update(content='done', ready=True)")
        if "ROOT" in task:  # hands its own channel to the child, which sits at the cap
            return fenced(_CHANNEL + "print(rlm_query('CHILD', {'port': port, 'token': token}))")
        if "CHILD" in task:
            return fenced(
                _CHANNEL
                + _FORGE
                + "max_depth = 99\nRLMLimits = None\n"
                + "try:\n    rlm_query('DEEPER')\nexcept RLMCallError as e:\n    print('plain:', e)\n"
                + "print('own channel:', call(forged))\n"
                + "print('new connection:', raw(port, token, forged))\n"
                + "print('parent channel:', raw(context['port'], context['token'], dict(forged, prompts=['GRAND'])))"
            )
        # GRAND: started through the root's channel, so at the root's depth + 1, where it is capped too
        return fenced("try:\n    rlm_query('DEEPER')\nexcept RLMCallError as e:\n    print('plain:', e)")

    return FunctionModel(reply)


async def test_code_in_the_kernel_cannot_start_a_run_below_max_depth(
    kernels: Callable[[str], KernelEnvironment],
) -> None:
    seen: dict[str, str] = {}
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    rlm = RLM(model=_model(seen), environment=kernels(sys.executable), limits=RLMLimits(max_depth=1))
    try:
        run = await rlm.invoke_in_context(ctx, "ROOT", context={})
    finally:
        if rlm.children is not None:
            rlm.children.close()
    assert run.final_text == "done"
    depths = sorted(e.depth for e in rec.events if e.kind == "run.started")
    assert depths == [0, 1, 1]  # the root, CHILD, and GRAND (which the root's harness started at depth 1)
    child = seen["CHILD"]
    assert "plain: RLMDepthError: rlm_query refused: this run is at RLM depth 1" in child
    refused = "'ok': False, 'type': 'RLMDepthError'"
    assert f"own channel: {{{refused}" in child  # the forged depth and limits were not read
    assert f"new connection: {{{refused}" in child
    assert "parent channel: {'ok': True, 'results': ['done']}" in child  # a sibling at depth 1, not depth 2
    assert "plain: RLMDepthError" in seen["GRAND"]
    assert seen["ROOT"] == "done"
