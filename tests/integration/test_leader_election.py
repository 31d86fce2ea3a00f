"""HA: two aggregator replicas elect a leader through a Lease on the simulated API server; the standby
serves /readyz false and no accounting metrics; SIGKILL the leader and the standby takes over with
complete books."""

from __future__ import annotations

import json
import signal
import sqlite3
import time

import pytest

from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.sim.runner import free_port
from tests.procs import get, usage, wait
from tests.sim_fixture import SimClusterFactory

SCENARIO = """
tick: 1s
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: p, namespace: team-a, node: n0, gpus: 2, utilization: 0.5}]
"""


def _ready(listen: str) -> bool:
    return get(f"http://{listen}/readyz")[0] == 200


@pytest.mark.slow
@pytest.mark.timeout(180)  # 36 s and more measured on a loaded 2-core machine
def test_failover_to_standby(sim_cluster: SimClusterFactory) -> None:
    sim = sim_cluster(SCENARIO)
    tmp, c = sim.workdir, sim.cluster
    try:
        agent = c.agent_env("n0", GPUCOST_TICK="1s")
        c.spawn("agent", ["agent"], agent)
        replicas = {}
        for name in ("a", "b"):
            env = {**c.aggregator_env(), "GPUCOST_TICK": "1s", "GPUCOST_LISTEN": f"127.0.0.1:{free_port()}",
                   "GPUCOST_LEDGER": str(tmp / f"ledger-{name}.db"), "GPUCOST_LEADER_ELECTION": "true",
                   "GPUCOST_LEASE_DURATION": "3s", "GPUCOST_LEASE_RENEW_PERIOD": "1s"}
            replicas[name] = env
            c.spawn(f"agg-{name}", ["aggregator"], env)
        wait(lambda: sum(_ready(e["GPUCOST_LISTEN"]) for e in replicas.values()) == 1)
        time.sleep(3)
        ready = [n for n, e in replicas.items() if _ready(e["GPUCOST_LISTEN"])]
        assert len(ready) == 1
        leader, standby = ready[0], ({"a", "b"} - set(ready)).pop()
        standby_metrics = get(f"http://{replicas[standby]['GPUCOST_LISTEN']}/metrics")[1].decode()
        assert "gpucost_aggregator_leader 0.0" in standby_metrics
        assert "gpucost_allocated_gpu_seconds_total" not in standby_metrics
        status, body = get(f"http://{replicas[standby]['GPUCOST_LISTEN']}/readyz")
        assert status == 503 and json.loads(body)["leader"] is False

        c.stop(f"agg-{leader}", signal.SIGKILL)
        killed = time.monotonic()
        wait(lambda: _ready(replicas[standby]["GPUCOST_LISTEN"]), timeout=15)
        failover_s = time.monotonic() - killed
        wait(lambda: b'gpucost_allocated_gpus{namespace="team-a"} 2.0' in get(
            f"http://{replicas[standby]['GPUCOST_LISTEN']}/metrics")[1])
        def agent_allocated() -> float:
            snap = usage(agent)
            return float(sum(h["allocated_s"] for h in snap["holders"]))

        before = agent_allocated()
        time.sleep(2)
        assert c.stop(f"agg-{standby}") == 0  # final tick books everything the agent has now
        after = agent_allocated()
        conn = sqlite3.connect(replicas[standby]["GPUCOST_LEDGER"])
        ((booked,),) = decoded_rows(conn.execute("SELECT SUM(allocated_s) FROM usage"))  # from nano-units
        conn.close()
    finally:
        c.close()
    assert failover_s < 10
    # The new leader's ledger is complete from the agent's first tick: it booked all along as a standby
    # (without acknowledging), so it holds at least what the agent had counted before its final pull,
    # and never more than the agent has counted at all.
    assert before < booked <= after + 1e-6
