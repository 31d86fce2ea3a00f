"""The scenarios shipped with the package load, place and render."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "exporter" / "sim" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_builtin_scenario_runs_to_its_end(path: Path) -> None:
    scenario = load_scenario(path)
    cluster = SimCluster(scenario, 0.0)
    t = 0.0
    while t <= scenario.duration:
        cluster.advance(t)
        for node in cluster.layouts:
            assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in cluster.render_dcgm(node)
        t += 600.0


def test_sharing_scenario_has_every_mode() -> None:
    scenario = load_scenario(next(p for p in SCENARIOS if p.name == "sharing.yaml"))
    assert {n.sharing for n in scenario.nodes} == {"mps", "hami", "none"}
    assert any(n.dra for n in scenario.nodes)
