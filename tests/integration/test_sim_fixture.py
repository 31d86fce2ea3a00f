"""The sim_cluster fixture every process test starts from: ready when handed over, every spawned process
gone afterwards, and a scenario sim-cluster refuses is the simulator's own error, not a timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.procs import get
from tests.sim_fixture import SimClusterFactory, running_sim_cluster

SCENARIO = """
    tick: 15s
    duration: 1h
    prices: {"NVIDIA L4": 0.8}
    nodes:
      - {name: n0, model: "NVIDIA L4", gpus: 1}
      - {name: n1, model: "NVIDIA L4", gpus: 1}
    pods:
      - {name: p, namespace: team-a, node: n0, gpus: 1, utilization: 0.5}
"""


def test_handle_names_the_ready_cluster_and_its_envs(sim_cluster: SimClusterFactory) -> None:
    """Handed over ready: kubeconfig and both agents' env files exist; envs carry the 0.5 s tick unless overridden."""
    sim = sim_cluster(SCENARIO)
    assert sim.ready.exists() and sim.kubeconfig.exists() and sim.scenario.exists()
    assert sim.nodes == ["n0", "n1"]
    envs = sim.agent_envs(GPUCOST_TICK="1s")
    assert set(envs) == {"n0", "n1"} and envs["n0"]["GPUCOST_TICK"] == "1s"
    assert sim.agent_env("n1")["GPUCOST_TICK"] == "0.5s"
    assert sim.aggregator_env()["GPUCOST_KUBECONFIG"] == sim.raw_env("aggregator")["GPUCOST_KUBECONFIG"]
    assert sim.cluster.procs["sim"].poll() is None


def test_every_spawned_process_is_gone_after(tmp_path: Path) -> None:
    """Leaving the context kills the simulator and whatever the test spawned through the handle."""
    with running_sim_cluster(tmp_path, SCENARIO) as sim:
        agent = sim.cluster.spawn("agent", ["agent"], sim.agent_env("n0"))
        simulator = sim.cluster.procs["sim"]
        listen = sim.agent_env("n0")["GPUCOST_LISTEN"]
    assert simulator.poll() is not None and agent.poll() is not None
    with pytest.raises(OSError):
        get(f"http://{listen}/healthz")


def test_refused_scenario_fails_with_the_simulators_line(sim_cluster: SimClusterFactory) -> None:
    """A scenario sim-cluster refuses fails the test at once with its one line, not after a ready timeout."""
    with pytest.raises(AssertionError, match=r"pods\[0\]\.node: unknown node 'nope'"):
        sim_cluster(SCENARIO.replace("node: n0, gpus: 1, utilization", "node: nope, gpus: 1, utilization"))
