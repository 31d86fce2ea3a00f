"""KAI Scheduler fractions and GPUs served by DRA behind ``nvidia.com/gpu``, through ``simulate`` (simulator ->
agents -> aggregator -> ledger), then ``report`` and the FOCUS export. Each node is one golden, its arithmetic in
the test's docstring; every pod runs the whole hour unless it says otherwise, so the figures are exact."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import parse_scenario
from tests.integration.test_golden import close
from tests.unit.aggregator.focus.focus_helpers import read_csv

pytestmark = pytest.mark.timeout(300)

SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.00, "NVIDIA A100-SXM4-80GB": 2.50}
nodes:
  - {name: n-kai, model: "NVIDIA H100 80GB HBM3", gpus: 1, scheduler: kai}
  - {name: n-kai-end, model: "NVIDIA H100 80GB HBM3", gpus: 1, scheduler: kai}
  - {name: n-kai-multi, model: "NVIDIA H100 80GB HBM3", gpus: 2, scheduler: kai}
  - {name: n-kai-mem, model: "NVIDIA H100 80GB HBM3", gpus: 1, scheduler: kai}
  - {name: n-drx, model: "NVIDIA A100-SXM4-80GB", gpus: 2, dra_extended: true}
pods:
  - {name: a, namespace: team-a, node: n-kai, kai: {fraction: 0.5}, utilization: 0.3, owner: {kind: Job, name: train}}
  - {name: b, namespace: team-b, node: n-kai, kai: {fraction: 0.25}, utilization: 0.2}
  - {name: a, namespace: end-a, node: n-kai-end, kai: {fraction: 0.5}, utilization: 0.3}
  - {name: b, namespace: end-b, node: n-kai-end, kai: {fraction: 0.25}, end: 30m, utilization: 0.2}
  - {name: w, namespace: multi, node: n-kai-multi, kai: {fraction: 0.5, devices: 2}, utilization: 0.4}
  - {name: m, namespace: mem, node: n-kai-mem, kai: {memory_mib: 40960}, utilization: 0.4}
  - {name: d, namespace: dra, node: n-drx, gpus: 2, utilization: 0.5}
"""
H100, A100 = 4.00, 2.50
ALL = ("--since", "2000-01-01T00:00:00Z", "--until", "2100-01-01T00:00:00Z")


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "exporter", *args], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("sharing-kai")
    (work / "s.yaml").write_text(SCENARIO)
    cli("simulate", "--scenario", str(work / "s.yaml"), "--ledger", str(work / "l.db"))
    return work / "l.db"


@pytest.fixture(scope="module")
def by_node(ledger: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = json.loads(cli("report", "--ledger", str(ledger), "--by", "node,namespace", "--format", "json"))
    return {(r["node"], r["namespace"]): r for r in rows}


@pytest.fixture(scope="module")
def focus(ledger: Path) -> list[dict[str, str]]:
    return read_csv(cli("export", "--ledger", str(ledger), "--format", "focus-csv", *ALL))


def test_kai_fractions_golden(by_node: dict[tuple[str, str], dict[str, Any]]) -> None:
    """One H100 at 4.00/h for 1 h: team-a gpu-fraction 0.5 -> 0.5 GPU-h, 0.5 x 4.00 = 2.00; team-b 0.25 ->
    0.25 GPU-h, 1.00; the GPU's rest 1 - 0.5 - 0.25 = 0.25 GPU-h unallocated, 1.00. The reservation pod holding
    the GPU in pod-resources is charged nothing. Conservation: 0.5 + 0.25 + 0.25 = 1 GPU-h = 1 GPU x 1 h."""
    a, b, un = by_node["n-kai", "team-a"], by_node["n-kai", "team-b"], by_node["n-kai", "__unallocated__"]
    close(a["allocated_gpu_hours"], 0.5)
    close(a["cost"], 0.5 * H100)
    close(b["allocated_gpu_hours"], 0.25)
    close(b["cost"], 0.25 * H100)
    close(un["idle_gpu_hours"], 0.25)
    close(un["cost"], 0.25 * H100)
    assert not [k for k in by_node if k[1] == "kai-resource-reservation"]
    close(a["allocated_gpu_hours"] + b["allocated_gpu_hours"] + un["idle_gpu_hours"], 1.0)


def test_kai_sharer_deleted_after_30_minutes(by_node: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The same hour, end-b deleted at 30m: 0.25 x 0.5 h = 0.125 GPU-h (0.50); end-a 0.5 GPU-h; unallocated
    1 - 0.5 - 0.125 = 0.375 GPU-h (1.50)."""
    close(by_node["n-kai-end", "end-b"]["allocated_gpu_hours"], 0.125)
    close(by_node["n-kai-end", "end-b"]["cost"], 0.125 * H100)
    close(by_node["n-kai-end", "end-a"]["allocated_gpu_hours"], 0.5)
    close(by_node["n-kai-end", "__unallocated__"]["idle_gpu_hours"], 0.375)
    close(by_node["n-kai-end", "__unallocated__"]["cost"], 0.375 * H100)


def test_kai_multi_device_fraction(by_node: dict[tuple[str, str], dict[str, Any]]) -> None:
    """gpu-fraction 0.5 with gpu-fraction-num-devices 2: 0.5 of each of two H100s for 1 h = 1.0 GPU-h (4.00);
    the node's other 2 - 1 = 1 GPU-h is unallocated."""
    close(by_node["n-kai-multi", "multi"]["allocated_gpu_hours"], 0.5 + 0.5)
    close(by_node["n-kai-multi", "multi"]["cost"], 1.0 * H100)
    close(by_node["n-kai-multi", "__unallocated__"]["idle_gpu_hours"], 1.0)


def test_kai_memory_pod_charged_its_gpu_portion(by_node: dict[tuple[str, str], dict[str, Any]]) -> None:
    """gpu-memory 40960 on an H100 (81559 MiB): the binder's GPU_PORTION "0.50" -> 0.5 GPU-h per hour (2.00),
    not 40960 / 81559 = 0.5022 (the fallback when no ConfigMap can be read)."""
    close(by_node["n-kai-mem", "mem"]["allocated_gpu_hours"], 0.5)
    close(by_node["n-kai-mem", "mem"]["cost"], 0.5 * H100)
    close(by_node["n-kai-mem", "__unallocated__"]["idle_gpu_hours"], 0.5)


def test_dra_behind_extended_resource_charged_once(by_node: dict[tuple[str, str], dict[str, Any]]) -> None:
    """nvidia.com/gpu: 2 served by the DRA driver on A100s at 2.50/h for 1 h: the claim's two devices,
    2 GPU-h, 2 x 2.50 = 5.00, once (not 4 GPU-h through the spec's request as well); nothing unallocated."""
    d = by_node["n-drx", "dra"]
    close(d["allocated_gpu_hours"], 2.0)
    close(d["cost"], 2 * A100)
    assert ("n-drx", "__unallocated__") not in by_node or by_node["n-drx", "__unallocated__"]["idle_gpu_hours"] == 0


def test_kai_sharer_is_booked_under_its_workload(ledger: Path) -> None:
    """The aggregator keeps a KAI fraction in its pod cache though it requests no GPU: team-a's pod is booked
    under its Job ``train``, not its own name."""
    rows = json.loads(cli("report", "--ledger", str(ledger), "--by", "namespace,workload", "--format", "json"))
    assert {r["workload"] for r in rows if r["namespace"] == "team-a"} == {"train"}


def test_sharing_breakdown_reads_kai_and_dra(ledger: Path) -> None:
    """``--by sharing``: kai = 0.5 + 0.25 + 0.5 + 0.125 + 1.0 + 0.5 = 2.875 GPU-h, 2.875 x 4.00 = 11.50;
    dra = 2 GPU-h, 5.00; unallocated 0.25 + 0.375 + 1.0 + 0.5 = 2.125 GPU-h, 8.50."""
    rows = {r["sharing"]: r for r in json.loads(cli("report", "--ledger", str(ledger), "--by", "sharing",
                                                    "--format", "json"))}
    assert set(rows) == {"kai", "dra", "__unallocated__"}
    close(rows["kai"]["allocated_gpu_hours"], 2.875)
    close(rows["kai"]["cost"], 2.875 * H100)
    close(rows["dra"]["allocated_gpu_hours"], 2.0)
    close(rows["dra"]["cost"], 2 * A100)
    close(rows["__unallocated__"]["idle_gpu_hours"], 2.125)
    close(rows["__unallocated__"]["cost"], 2.125 * H100)


def test_focus_rows_carry_the_sharing_mode(focus: list[dict[str, str]]) -> None:
    """FOCUS: team-a's rows sum to 0.5 x 3600 = 1800 GPU-s and 2.00, sharing kai; dra's to 7200 GPU-s and 5.00,
    sharing dra; no row names kai-resource-reservation."""
    seconds: dict[str, Decimal] = defaultdict(Decimal)
    cost: dict[str, Decimal] = defaultdict(Decimal)
    modes: dict[str, set[str]] = defaultdict(set)
    for r in focus:
        if r["x_CapacityState"] == "Allocated":
            seconds[r["x_Namespace"]] += Decimal(r["x_AllocatedGpuSeconds"])
            cost[r["x_Namespace"]] += Decimal(r["EffectiveCost"])
            modes[r["x_Namespace"]].add(r["x_Sharing"])
    assert seconds["team-a"] == Decimal(1800) and cost["team-a"] == Decimal("2.00")
    assert seconds["dra"] == Decimal(7200) and cost["dra"] == Decimal("5.00")
    assert modes["team-a"] == {"kai"} and modes["mem"] == {"kai"} and modes["dra"] == {"dra"}
    assert "kai-resource-reservation" not in seconds


def test_simulator_places_kai_as_its_binder_does() -> None:
    """The reservation pod (namespace, label, ``gpu-reservation-`` name, GPU UUID annotation) is what the kubelet
    lists holding GPU 0; the sharers request no GPU, carry the group label and the binder's annotations, and
    their ConfigMap holds GPU_PORTION. A multi-device fraction carries one ``runai-gpu-group/<id>`` per GPU."""
    cluster = SimCluster(parse_scenario(SCENARIO, "kai.yaml"), 0.0)
    cluster.advance(0.0)
    pods = {k: o for k, o in cluster.store.objects["pods"].items()}
    gpu0 = cluster.layouts["n-kai"].gpus[0].uuid
    listed = {(a.pod.namespace, a.pod.name): a.devices for a in cluster.pod_resources("n-kai")}
    (res_key,) = [k for k in listed if k[0] == "kai-resource-reservation"]
    res = pods[res_key]
    assert res_key[1].startswith("gpu-reservation-") and listed[res_key] == [gpu0]
    assert listed["team-a", "a"] == [] and listed["team-b", "b"] == []
    assert res["metadata"]["labels"]["app"] == "kai-resource-reservation"
    assert res["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"] == gpu0
    group = res["metadata"]["labels"]["runai-gpu-group"]
    a = pods["team-a", "a"]
    assert a["metadata"]["labels"]["runai-gpu-group"] == group
    assert a["metadata"]["annotations"]["gpu-fraction"] == "0.5"
    assert "nvidia.com/gpu" not in a["spec"]["containers"][0]["resources"]["limits"]
    cm_name = a["metadata"]["annotations"]["runai/shared-gpu-configmap"] + "-0"
    assert cluster.store.objects["configmaps"]["team-a", cm_name]["data"]["GPU_PORTION"] == "0.50"
    m = pods["mem", "m"]
    cm_name = m["metadata"]["annotations"]["runai/shared-gpu-configmap"] + "-0"
    assert cluster.store.objects["configmaps"]["mem", cm_name]["data"]["GPU_PORTION"] == "0.50"
    w = pods["multi", "w"]["metadata"]
    assert "runai-gpu-group" not in w["labels"] and w["annotations"]["gpu-fraction-num-devices"] == "2"
    assert len([k for k in w["labels"] if k.startswith("runai-gpu-group/")]) == 2


def test_simulator_serves_nvidia_gpu_through_dra() -> None:
    """On a dra_extended node the pod keeps its nvidia.com/gpu request; the scheduler's claim
    ``d-extended-resources-…`` (annotated, owned by the pod) holds gpu-0 and gpu-1 under request
    ``container-0-request-0``, named in the pod's extendedResourceClaimStatus."""
    cluster = SimCluster(parse_scenario(SCENARIO, "kai.yaml"), 0.0)
    cluster.advance(0.0)
    pod = cluster.store.objects["pods"]["dra", "d"]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "resourceClaims" not in pod["spec"]
    ext = pod["status"]["extendedResourceClaimStatus"]
    assert ext["resourceClaimName"].startswith("d-extended-resources-")
    assert ext["requestMappings"] == [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                                       "requestName": "container-0-request-0"}]
    claim = cluster.store.objects["resourceclaims"]["dra", ext["resourceClaimName"]]
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert [(r["request"], r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]] == [
        ("container-0-request-0", "gpu-0"), ("container-0-request-0", "gpu-1")]
    (listed,) = cluster.pod_resources("n-drx")
    assert listed.devices == []  # the kubelet reports the claim under dynamic_resources, not devices
