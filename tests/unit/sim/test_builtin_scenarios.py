"""The scenarios shipped with the package load, place and render."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import load_scenario

#: The utilisation series each vendor's exporter serves (DCGM, device-metrics-exporter, gaudi-metric-exporter).
VENDOR_UTILISATION = {"nvidia": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "amd": "gpu_gfx_activity",
                      "gaudi": "habanalabs_utilization"}
SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "exporter" / "sim" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_builtin_scenario_runs_to_its_end(path: Path) -> None:
    scenario = load_scenario(path)
    cluster = SimCluster(scenario, 0.0)
    vendors = {n.name: n.vendor for n in scenario.nodes}
    t = 0.0
    while t <= scenario.duration:
        cluster.advance(t)
        for node in cluster.layouts:
            assert VENDOR_UTILISATION[vendors[node]] in cluster.render_dcgm(node)
        t += 600.0


def test_sharing_scenario_has_every_mode() -> None:
    scenario = load_scenario(next(p for p in SCENARIOS if p.name == "sharing.yaml"))
    assert {n.sharing for n in scenario.nodes} == {"mps", "hami", "none"}
    assert any(n.dra for n in scenario.nodes)
