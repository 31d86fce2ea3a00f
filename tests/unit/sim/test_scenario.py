"""Scenario validation: a bad scenario is one line naming the file and field; the built-in one loads."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from exporter.sim.scenario import ScenarioError, load_scenario
from tests.conftest import REPO

BASE = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}
"""


@pytest.mark.parametrize(("extra", "message"), [
    ("pods: [{name: p, namespace: a, node: nope, gpus: 1}]", "scenario.yaml: pods[0].node: unknown node 'nope'"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 3}]",
     "scenario.yaml: pods[0].gpus: 3 nvidia.com/gpu requested, node n0 has 2"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 1, resource: nvidia.com/mig-1g.10gb}]",
     "scenario.yaml: pods[0].resource: node n0 offers no nvidia.com/mig-1g.10gb"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 1, start: soon}]",
     "scenario.yaml: pods[0].start: not a duration: 'soon'"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 1, utilization: 1.5}]",
     "scenario.yaml: pods[0].utilization: 1.5 is out of range"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 2}, {name: q, namespace: a, node: n0, gpus: 1}]",
     "scenario.yaml: pods[1].gpus: node n0 has only 0 free nvidia.com/gpu at 0s"),
    ("events: [{type: dcgm_down, node: n0, from: 5m}]", "scenario.yaml: events[0].to: required for dcgm_down"),
    ("bogus: 1", "scenario.yaml: bogus: unknown field"),
])
def test_bad_scenarios(write_scenario: Callable[[str], Path], extra: str, message: str) -> None:
    """A bad scenario fails with one line naming the file and field."""
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(BASE + extra))
    assert str(info.value).startswith(message)


def test_unpriced_model_needs_default(write_scenario: Callable[[str], Path]) -> None:
    """A model with no price and no default_price is an error (a GPU is never free)."""
    path = write_scenario("nodes: [{name: n0, model: Mystery GPU, gpus: 1}]\n")
    with pytest.raises(ScenarioError, match=re.escape("nodes[0].model: 'Mystery GPU' has no price")):
        load_scenario(path)


def test_mig_on_too_many_slices(write_scenario: Callable[[str], Path]) -> None:
    """MIG profiles that need more slices than the GPU has are rejected."""
    path = write_scenario(BASE.replace("gpus: 2}", "gpus: 2, mig: {0: [4g.40gb, 4g.40gb]}}"))
    with pytest.raises(ScenarioError, match=re.escape("nodes[0].mig.0: profiles need 8 slices")):
        load_scenario(path)


def test_default_scenario_is_valid() -> None:
    """The built-in scenario loads: five pools (research: spot and committed GPUs; shared: DRA and HAMi), a
    pending pod, a quota rejection."""
    s = load_scenario(REPO / "exporter" / "sim" / "scenarios" / "default.yaml")
    assert {n.labels["gpu.platform/pool"] for n in s.nodes} == {"training", "inference", "dev", "research", "shared"}
    assert any(n.dra for n in s.nodes) and any(n.sharing == "hami" for n in s.nodes)
    assert any(p.node is None for p in s.pods)
    assert any(e.type == "quota_rejection" for e in s.events)
