"""Real daemon processes against `sim-cluster`: crash consistency under SIGKILL, a real scrape that
`promtool check metrics` accepts, and /readyz."""

from __future__ import annotations

import json
import random
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.procs import Cluster, get, usage, wait
from tests.sim_fixture import SimClusterFactory

SCENARIO = """
tick: 1s
duration: 2h
prices: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.5}
nodes:
  - {name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 4, labels: {gpu.platform/pool: train}}
  - {name: n-a100, model: "NVIDIA A100-SXM4-80GB", gpus: 2, mig: {0: [3g.40gb, 3g.40gb]},
     labels: {gpu.platform/pool: infer}}
namespaces: [{name: team-a, gpu_quota: 8}, {name: team-b}]
pods:
  - {name: train, namespace: team-a, node: n-h100, gpus: 3, utilization: 0.9, owner: {kind: Job, name: train}}
  - {name: idle-nb, namespace: team-a, node: n-h100, gpus: 1, utilization: 0.01}
  - {name: serve, namespace: team-b, node: n-a100, gpus: 1, resource: nvidia.com/mig-3g.40gb, utilization: 0.5,
     owner: {kind: Deployment, name: serve}}
  - {name: whole, namespace: team-b, node: n-a100, gpus: 1, utilization: 0.3}
  - {name: waiting, namespace: team-a, gpus: 2, pending_reason: Insufficient nvidia.com/gpu}
events:
  - {type: quota_rejection, namespace: team-a, at: 0s, requested: 2}
"""


@pytest.fixture(name="cluster")
def _cluster(sim_cluster: SimClusterFactory) -> Cluster:
    return sim_cluster(SCENARIO).cluster


def _ledger_totals(path: Path) -> dict[str, float]:
    """Each namespace's allocated GPU-seconds in the ledger (stored as integer nano-units on SQLite)."""
    conn = sqlite3.connect(path)
    rows = dict(conn.execute("SELECT namespace, SUM(allocated_s) FROM usage GROUP BY namespace").fetchall())
    totals = dict(conn.execute("SELECT namespace, allocated_s FROM totals").fetchall())
    conn.close()
    assert rows.keys() == totals.keys()
    for ns in rows:  # the hourly rows and the running totals were written in the same transactions: exactly equal
        assert rows[ns] == totals[ns]
    return {ns: units / 1e9 for ns, units in rows.items()}


@pytest.mark.slow
@pytest.mark.timeout(180)  # 16 s and more measured on a loaded 2-core machine
def test_sigkill_aggregator_loses_and_repeats_nothing(cluster: Cluster) -> None:
    """SIGKILL the aggregator at random moments during 0.5 s ticks, restart it each time; at the end the
    ledger equals the agents' own counters to the microsecond: no GPU-second lost or booked twice."""
    rng = random.Random(20261130)
    nodes = ["n-h100", "n-a100"]
    for n in nodes:
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n))
    agg_env = cluster.aggregator_env()
    listen = agg_env["GPUCOST_LISTEN"]
    kills = 0
    for _ in range(6):
        cluster.spawn("aggregator", ["aggregator"], agg_env)
        time.sleep(rng.uniform(0.6, 2.5))
        cluster.stop("aggregator", signal.SIGKILL)
        kills += 1
    # Freeze the agents' counters: stop them (final tick + state flush), restart with a 1 h tick (they
    # resume their state and tick once at start), then let a fresh aggregator book everything.
    for n in nodes:
        assert cluster.stop(f"agent-{n}") == 0
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n, GPUCOST_TICK="1h"))
    cluster.spawn("aggregator", ["aggregator"], agg_env)
    wait(lambda: get(f"http://{listen}/readyz")[0] == 200)
    time.sleep(2.0)
    agent_alloc: dict[str, float] = {}
    observed: dict[str, float] = {}  # per node: allocated + unallocated GPU-seconds (time the agent saw)
    epochs = set()
    for n in nodes:
        snap = usage(cluster.agent_env(n))
        epochs.add(snap["epoch"])
        held = sum(h["allocated_s"] for h in snap["holders"])
        free = sum(u["seconds"] for u in snap["unallocated"])
        unobserved = sum(u["seconds"] for u in snap["unobserved"])
        gpus = len(snap["capacity"])
        # the agent's own conservation: every second since its epoch began is in one bucket
        assert held + free + unobserved == pytest.approx(gpus * (snap["timestamp"] - snap["started_at"]), abs=1e-6)
        observed[n] = held + free
        for h in snap["holders"]:
            agent_alloc[h["namespace"]] = agent_alloc.get(h["namespace"], 0.0) + h["allocated_s"]
    assert cluster.stop("aggregator") == 0  # graceful: final tick, exit 0
    ledger = _ledger_totals(Path(agg_env["GPUCOST_LEDGER"]))
    assert kills == 6 and len(epochs) == 2
    assert set(ledger) == {"team-a", "team-b"}
    for ns, seconds in agent_alloc.items():
        assert ledger[ns] == pytest.approx(seconds, abs=1e-6), ns
    # And the agents' counters match what the nodes hold, whenever they were observed: team-a holds all 4
    # H100s; team-b holds 1 whole A100 + one 3g.40gb (3/7) of the node's 2 GPUs.
    assert agent_alloc["team-a"] > 4 * 5.0
    assert agent_alloc["team-a"] == pytest.approx(observed["n-h100"], rel=1e-9)
    assert agent_alloc["team-b"] == pytest.approx(observed["n-a100"] * (1 + 3 / 7) / 2, rel=1e-9)


@pytest.mark.slow
@pytest.mark.timeout(180)  # 31 s measured on a loaded 2-core machine
def test_real_scrape_passes_promtool_and_carries_the_contract(cluster: Cluster) -> None:
    """A real scrape of the aggregator has every contract series and `promtool check metrics` accepts it."""
    for n in ("n-h100", "n-a100"):
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n))
    env = cluster.aggregator_env()
    cluster.spawn("aggregator", ["aggregator"], env)
    listen = env["GPUCOST_LISTEN"]
    wait(lambda: get(f"http://{listen}/readyz")[0] == 200)
    wait(lambda: b'gpucost_pod_idle_seconds{namespace="team-a",pod="idle-nb"' in get(
        f"http://{listen}/metrics")[1])
    time.sleep(1.5)
    _status, body = get(f"http://{listen}/metrics")
    text = body.decode()
    for series in ("gpucost_allocated_gpu_seconds_total", "gpucost_used_gpu_seconds_total",
                   "gpucost_unmeasured_gpu_seconds_total", "gpucost_cost_total", "gpucost_idle_cost_total",
                   "gpucost_unallocated_gpu_seconds_total", "gpucost_allocated_gpus", "gpucost_gpu_utilization_ratio",
                   "gpucost_workload_gpu_utilization_ratio", "gpucost_pod_idle_seconds", "gpucost_gpu_hourly_price",
                   "gpucost_quota_gpus", "gpucost_pending_gpu_pods", "gpucost_agent_up", "gpucost_dcgm_up",
                   "gpucost_quota_rejections_total", "gpucost_split_gpu_seconds_total"):
        assert f"\n{series}{{" in text, series
    assert 'gpucost_allocated_gpus{namespace="team-a"} 4.0' in text
    assert 'gpucost_quota_gpus{namespace="team-a",type="hard",source="resourcequota"} 8.0' in text
    # 4 running + 2 pending (admitted)
    assert 'gpucost_quota_gpus{namespace="team-a",type="used",source="resourcequota"} 6.0' in text
    assert 'gpucost_pending_gpu_pods{namespace="team-a",reason="insufficient_gpu"} 1.0' in text
    assert 'gpucost_quota_rejections_total{namespace="team-a"} 1.0' in text
    assert 'gpucost_workload_gpu_utilization_ratio{namespace="team-b",workload="serve"} 0.5' in text
    keda = json.loads(get(f"http://{listen}/api/v1/keda/utilization?namespace=team-b&workload=serve")[1])
    assert keda["value"] == pytest.approx(0.5)
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    proc = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    agent_listen = cluster.agent_env("n-a100")["GPUCOST_LISTEN"]
    proc = subprocess.run([promtool, "check", "metrics"], input=get(f"http://{agent_listen}/metrics")[1],
                          capture_output=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
