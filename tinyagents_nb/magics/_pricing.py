"""What a run's record says once about cost: a model without a price, a server answering as another model.

A model with no known price is recorded with an unknown cost (never $0). In a notebook that is said
in one line in the run's record, with the notebook's way to set a price (``%agent price``), instead
of a Python warning with a source line and a harness-API hint. A local server may answer under
another name than the one asked for (Ollama's ``llama3:latest`` for ``llama3``); prices are looked
up by the name it answered with, so that is noted once too.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from tinyagents_nb.harness import ConfigurationError, CostTracker, ModelPricing

if TYPE_CHECKING:
    from ._handle import NotebookRun

__all__ = ["run_notes", "set_price"]


def run_notes(costs: CostTracker, noted: set[str], run: NotebookRun) -> list[str]:
    """One-time notes for an ended run (``noted`` keeps what this session already said)."""
    notes = []
    asked = run.harness.model.model_name
    for record in costs.records:
        if str(record.run_id) != run.run_id:
            continue
        served = record.model or asked
        if served != asked and f"served:{asked}" not in noted:
            noted.add(f"served:{asked}")
            notes.append(f"note: the server answered as model {served!r} (asked for {asked!r})")
        if record.cost is None and f"price:{served}" not in noted:
            noted.add(f"price:{served}")
            notes.append(
                f"note: no price known for {served!r}, so its cost shows as unknown; "
                f"set one with %agent price {served} INPUT OUTPUT (USD per million tokens)"
            )
    return notes


def set_price(costs: CostTracker, noted: set[str], model: str, input_per_mtok: str, output_per_mtok: str) -> None:
    """Price ``model`` for this session (USD per million input and output tokens).

    Raises:
        ConfigurationError: A price that is not a non-negative decimal number.
    """
    try:
        pricing = ModelPricing(input_per_mtok=Decimal(input_per_mtok), output_per_mtok=Decimal(output_per_mtok))
    except (InvalidOperation, ArithmeticError):
        raise ConfigurationError(
            f"prices must be decimal numbers such as 0.15, got {input_per_mtok!r} and {output_per_mtok!r}"
        ) from None
    costs.register_price(model, pricing)
    noted.discard(f"price:{model}")
