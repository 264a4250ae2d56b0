"""Scripted root and sub models for RLM tests."""

from __future__ import annotations

from tinyagents_nb.harness import ModelRequest, ModelResponse, Usage
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel

ROOT_USAGE = Usage(input_tokens=500, output_tokens=50)


def py(*blocks: str, text: str = "Let me check.") -> ModelResponse:
    """A root reply carrying fenced python blocks, with usage."""
    fences = "".join(f"\n```python\n{b}\n```\n" for b in blocks)
    return ScriptedModel.text(text + fences, usage=ROOT_USAGE)


def sub_model() -> FunctionModel:
    """Answers ``count:<chunk>`` with how many times "ERROR" occurs in it; usage depends on the prompt."""

    def answer(request: ModelRequest) -> ModelResponse:
        prompt = request.messages[-1].text
        count = prompt.count("ERROR")
        return ScriptedModel.text(str(count), usage=Usage(input_tokens=len(prompt) // 4 + 7, output_tokens=1))

    return FunctionModel(answer, model_name="sub")


def largest_request(model: ScriptedModel) -> int:
    return max(sum(len(m.text) for m in r.messages) + sum(len(str(t)) for t in r.tools) for r in model.requests)
