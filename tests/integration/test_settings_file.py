"""The daemons started from settings files alone: the env files `sim-cluster` writes, passed as
``--config``, with no ``GPUCOST_*`` variable set; a flag still overrides the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exporter.sim.runner import free_port
from tests.procs import env_file, get, usage, wait
from tests.sim_fixture import SimClusterFactory

SCENARIO = """
tick: 1s
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: p, namespace: team-a, node: n0, gpus: 2, utilization: 0.5}]
"""


def _ticked(env: dict[str, str]) -> bool:
    """The agent has a snapshot to serve (/v1/usage answers 503 until its first tick)."""
    token = Path(env["GPUCOST_USAGE_TOKEN_FILE"]).read_text().strip()
    return get(f"http://{env['GPUCOST_LISTEN']}/v1/usage", {"Authorization": f"Bearer {token}"})[0] == 200


@pytest.mark.slow
def test_both_daemons_run_from_sim_cluster_env_files(sim_cluster: SimClusterFactory,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent serves node n0's holder and the aggregator books it, every setting read from the files
    (agent: node, DCGM, socket, token file; aggregator: agents, pricing, kubeconfig, token file); the
    aggregator's --listen and --ledger flags win over the file's."""
    for name in [k for k in os.environ if k.upper().startswith("GPUCOST_")]:
        monkeypatch.delenv(name)
    sim = sim_cluster(SCENARIO)
    c = sim.cluster
    agent_file, aggregator_file = sim.workdir / "agents" / "n0.env", sim.workdir / "aggregator.env"
    c.spawn("agent", ["agent", "--config", str(agent_file)])
    agent = env_file(agent_file)
    wait(lambda: get(f"http://{agent['GPUCOST_LISTEN']}/healthz")[0] == 200 and _ticked(agent))
    snap = usage(agent)
    assert snap["node"] == "n0" and {h["pod"] for h in snap["holders"]} == {"p"}

    listen, ledger = f"127.0.0.1:{free_port()}", sim.workdir / "flag-ledger.db"
    assert env_file(aggregator_file)["GPUCOST_LISTEN"] != listen
    c.spawn("aggregator", ["aggregator", "--config-file", str(aggregator_file), "--listen", listen,
                           "--ledger", str(ledger)])
    wait(lambda: b'gpucost_allocated_gpus{namespace="team-a"} 2.0' in get(f"http://{listen}/metrics")[1],
         timeout=30)
    assert ledger.exists() and not (sim.workdir / env_file(aggregator_file)["GPUCOST_LEDGER"]).exists()
    assert c.stop("aggregator") == 0 and c.stop("agent") == 0
