"""The simulated Kueue under each stop policy, driven through the object store as a patch would: ``Hold`` admits
nothing new and lets admitted workloads run; ``HoldAndDrain`` also evicts them (reason by which queue is stopped),
and only a pod with an owner comes back once the queue runs again (``schedulers.md`` §3)."""

from __future__ import annotations

import copy

from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import parse_scenario

SCENARIO = """
prices: {"NVIDIA H100 80GB HBM3": 4}
nodes: [{name: n, model: "NVIDIA H100 80GB HBM3", gpus: 8}]
namespaces: [{name: team-a}]
queues:
  - {kind: kueue, name: gpu, gpus: 8, local_queues: [{namespace: team-a, name: train}, {namespace: team-a, name: dev}]}
pods:
  - {name: t0, namespace: team-a, node: n, gpus: 2, queue: train, end: 50m, owner: {kind: Job, name: job-t}}
  - {name: p0, namespace: team-a, node: n, gpus: 1, queue: train, end: 50m}
  - {name: d0, namespace: team-a, node: n, gpus: 1, queue: dev, end: 50m}
"""


def _stop(cluster: SimCluster, kind: str, key: tuple[str, str], policy: str) -> None:
    obj = copy.deepcopy(cluster.store.objects[kind][key])
    obj["spec"]["stopPolicy"] = policy
    cluster.store.upsert(kind, obj)


def _running(cluster: SimCluster) -> list[str]:
    return sorted(p.name for p in cluster.running_pods("n"))


def _evicted(cluster: SimCluster, workload: str) -> str | None:
    wl = cluster.store.objects["workloads"][("team-a", workload)]
    return next((c["reason"] for c in wl["status"].get("conditions", []) if c["type"] == "Evicted"), None)


def test_hold_lets_admitted_workloads_run() -> None:
    cluster = SimCluster(parse_scenario(SCENARIO, "s.yaml"), 0.0)
    cluster.advance(60)
    _stop(cluster, "localqueues", ("team-a", "train"), "Hold")
    cluster.advance(120)
    assert _running(cluster) == ["d0", "p0", "t0"]


def test_local_queue_drain_evicts_its_workloads_only() -> None:
    """t0 and p0 (LocalQueue train) stop at 120 s (LocalQueueStopped); d0 (dev) runs on. Released at 600 s, the Job's
    new pod runs for what t0 had left (3000 - 120 = 2880 s, to 3480 s); the plain pod p0 is gone for good."""
    cluster = SimCluster(parse_scenario(SCENARIO, "s.yaml"), 0.0)
    cluster.advance(60)
    _stop(cluster, "localqueues", ("team-a", "train"), "HoldAndDrain")
    cluster.advance(120)
    assert _running(cluster) == ["d0"]
    assert _evicted(cluster, "job-job-t") == "LocalQueueStopped"
    assert ("team-a", "t0") not in cluster.store.objects["pods"]
    cluster.advance(300)
    assert _running(cluster) == ["d0"]  # still held: nothing admitted
    _stop(cluster, "localqueues", ("team-a", "train"), "None")
    cluster.advance(600)
    new = [p for p in cluster.scenario.pods if p.name.startswith("job-t-")]
    assert len(new) == 1 and (new[0].start, new[0].end) == (600, 3480)
    assert _running(cluster) == sorted(["d0", new[0].name])
    assert _evicted(cluster, "job-job-t") is None  # admitted again
    cluster.advance(3000)  # t0's first end is stale: nothing of it comes back, its successor runs on
    assert ("team-a", "t0") not in cluster.store.objects["pods"]
    assert _running(cluster) == [new[0].name]
    cluster.advance(3480)
    assert _running(cluster) == []


def test_cluster_queue_drain_evicts_every_local_queue() -> None:
    cluster = SimCluster(parse_scenario(SCENARIO, "s.yaml"), 0.0)
    cluster.advance(60)
    _stop(cluster, "clusterqueues", ("", "gpu"), "HoldAndDrain")
    cluster.advance(120)
    assert _running(cluster) == []
    assert _evicted(cluster, "job-job-t") == "ClusterQueueStopped"


def test_a_held_back_pod_admitted_before_its_end_runs_its_whole_time() -> None:
    """h0 is submitted at 120 s while train is held and admitted at 600 s: it runs its 3000 - 120 = 2880 s to 3480 s,
    its object Running past 3000 s (the end it would have had), gone at 3480 s."""
    cluster = SimCluster(parse_scenario(SCENARIO + """
  - {name: h0, namespace: team-a, node: n, gpus: 1, queue: train, start: 2m, end: 50m}
""", "s.yaml"), 0.0)
    cluster.advance(60)
    _stop(cluster, "localqueues", ("team-a", "train"), "Hold")
    cluster.advance(120)
    assert cluster.store.objects["pods"][("team-a", "h0")]["status"]["phase"] == "Pending"
    _stop(cluster, "localqueues", ("team-a", "train"), "None")
    cluster.advance(600)
    cluster.advance(3000)
    assert cluster.store.objects["pods"][("team-a", "h0")]["status"]["phase"] == "Running"
    assert _running(cluster) == ["h0"]
    cluster.advance(3480)
    assert ("team-a", "h0") not in cluster.store.objects["pods"]
