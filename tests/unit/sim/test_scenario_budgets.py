"""Scenario namespace ``monthly_budget``: validated, and served as the namespace's budget annotation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from exporter.aggregator.kube.budgets import BUDGET_ANNOTATION, BudgetAnnotations, BudgetSource
from exporter.sim.kube.objects import namespace_object
from exporter.sim.scenario import ScenarioError, load_scenario
from tests.conftest import REPO

BASE = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}
"""


def test_budget_becomes_the_namespace_annotation(write_scenario: Callable[[str], Path]) -> None:
    """1500.5 in the scenario -> annotation "1500.5" -> the aggregator's budget 1500.5; no field, no annotation."""
    s = load_scenario(write_scenario(BASE + "namespaces: [{name: ml, monthly_budget: 1500.5}, {name: web}]\n"))
    ml, web = s.namespaces
    assert ml.monthly_budget == 1500.5 and web.monthly_budget is None
    objs = [namespace_object(ns, created=0.0) for ns in s.namespaces]
    assert objs[0]["metadata"]["annotations"] == {BUDGET_ANNOTATION: "1500.5"}
    assert "annotations" not in objs[1]["metadata"]
    seen = BudgetAnnotations()
    seen.handle("namespaces", "LISTED", obj={"items": objs})
    assert {n: b.amount for n, b in BudgetSource().current(seen.by_namespace).items()} == {"ml": 1500.5}


@pytest.mark.parametrize(("value", "message"), [
    ("0", "scenario.yaml: namespaces[0].monthly_budget: expected an amount > 0, got 0"),
    ("-10", "scenario.yaml: namespaces[0].monthly_budget: expected an amount > 0, got -10"),
    ("lots", "scenario.yaml: namespaces[0].monthly_budget: expected a number, got 'lots'"),
])
def test_bad_budget_names_file_and_field(write_scenario: Callable[[str], Path], value: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(BASE + f"namespaces: [{{name: ml, monthly_budget: {value}}}]\n"))
    assert str(info.value) == message


def test_default_scenario_budgets_two_teams() -> None:
    """ai-training (about 24.00/h) has 500 a month, ai-dev (about 0.33/h) 1000."""
    s = load_scenario(REPO / "exporter" / "sim" / "scenarios" / "default.yaml")
    assert {ns.name: ns.monthly_budget for ns in s.namespaces if ns.monthly_budget} == {
        "ai-training": 500.0, "ai-dev": 1000.0}
