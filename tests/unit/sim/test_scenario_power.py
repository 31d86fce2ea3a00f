"""A node's ``power: {idle_w, max_w}`` in a scenario: the board power DCGM serves and the energy counter it
integrates, by hand; bad values are one line naming the file and field."""

from __future__ import annotations

import pytest

from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import ScenarioError, parse_scenario

SCENARIO = """
tick: 15s
duration: 1h
default_price: 1
nodes:
  - {name: p, model: "NVIDIA H100 80GB HBM3", gpus: 1, power: {idle_w: 100, max_w: 700}}
  - {name: d, model: "NVIDIA H100 80GB HBM3", gpus: 1}
pods:
  - {name: a, namespace: x, node: p, gpus: 1, utilization: 0.5}
  - {name: b, namespace: x, node: d, gpus: 1, utilization: 0.5}
"""


def _served(cluster: SimCluster, node: str, family: str) -> float:
    """The one GPU's value of ``family`` in the node's DCGM exposition."""
    (value,) = [line.rsplit(" ", 1)[1] for line in cluster.render_dcgm(node).splitlines()
                if line.startswith(family + "{")]
    return float(value)


def test_power_drives_the_dcgm_power_and_energy_series() -> None:
    """p at 0.5: 100 + 0.5 x (700 - 100) = 400 W; over 60 s 400 x 60 = 24,000 J = 24,000,000 mJ. d keeps the
    simulator's H100 table (70-700 W): 70 + 0.5 x 630 = 385 W."""
    cluster = SimCluster(parse_scenario(SCENARIO, "s.yaml"), 0.0)
    cluster.advance(0.0)
    start = _served(cluster, "p", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    cluster.advance(60.0)
    assert _served(cluster, "p", "DCGM_FI_DEV_POWER_USAGE") == pytest.approx(400.0)
    assert _served(cluster, "d", "DCGM_FI_DEV_POWER_USAGE") == pytest.approx(385.0)
    assert _served(cluster, "p", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") - start == pytest.approx(24_000_000.0)


@pytest.mark.parametrize(("power", "message"), [
    ("{idle_w: 100}", "s.yaml: nodes[0].power.max_w: required"),
    ("{idle_w: 800, max_w: 700}", "s.yaml: nodes[0].power.idle_w: 800 is out of range [0, 700.0]"),
    ("{idle_w: -1, max_w: 700}", "s.yaml: nodes[0].power.idle_w: -1 is out of range"),
    ("{idle_w: 100, max_w: 5000}", "s.yaml: nodes[0].power.max_w: 5000 is out of range [0, 2000.0]"),
    ("{idle_w: 100, max_w: 700, peak_w: 900}", "s.yaml: nodes[0].power.peak_w: unknown field"),
    ("400", "s.yaml: nodes[0].power: expected a mapping"),
])
def test_bad_power_names_the_field(power: str, message: str) -> None:
    """One line naming the file and field."""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(SCENARIO.replace("power: {idle_w: 100, max_w: 700}", f"power: {power}"), "s.yaml")
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)
