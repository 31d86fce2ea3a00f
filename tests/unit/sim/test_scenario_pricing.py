"""A scenario's pricing block, checked as the aggregator checks its pricing file."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("block", "message"), [
    ("pricing: {default_price: 1, capacity_types: {spot: 0}}\n",
     "s.yaml: field pricing.capacity_types.spot: Input should be greater than 0"),
    ("pricing: {default_price: 1}\nprices: {A: 1}\n", "s.yaml: prices: not allowed beside pricing"),
    ("pricing: {versions: [{default_price: 1}, {default_price: 2}]}\n",
     "s.yaml: field pricing.versions[0].effective_from: required when several pricing documents are kept"),
])
def test_scenario_pricing_block_is_validated(block: str, message: str) -> None:
    """A scenario's pricing: block is checked as the aggregator checks its file: one line, file and field."""
    from exporter.sim.scenario import ScenarioError, parse_scenario

    with pytest.raises(ScenarioError) as err:
        parse_scenario(block + "nodes: [{name: n, model: M, gpus: 1}]\n", "s.yaml")
    assert str(err.value) == message or str(err.value).startswith(message)
