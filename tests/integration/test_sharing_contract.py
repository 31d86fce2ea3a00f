"""The scenario contract's sharing-modes example (docs/scenario.md), nearly verbatim, end to end through
the real agents and aggregator: DRA claims written as requests (own, MIG, shared by name, adminAccess),
an ``mps: 4`` node and a ``hami: true`` node. Only prices, a second pod on the shared claim and
utilisations are added. Every figure is computed by hand beside its assertion."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.pipeline import run_simulation
from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import parse_scenario

#: 1 h at 15 s ticks; every pod runs the whole hour, so the figures are exact.
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.00, "NVIDIA L4": 0.80, "NVIDIA A100-SXM4-80GB": 2.00}
resource_claims:                 # DRA claims that several pods share (referenced by name)
  - {name: shared-gpu, namespace: ml, device_class: gpu.nvidia.com, count: 1}
nodes:
  - {name: n-dra, model: "NVIDIA H100 80GB HBM3", gpus: 4, dra: true,   # GPUs published by the
     mig: {3: [3g.40gb, 3g.40gb]}}                                       # NVIDIA DRA driver (ResourceSlices)
  - {name: n-mps, model: "NVIDIA L4", gpus: 2, mps: 4}      # device-plugin MPS, 4 replicas per GPU
  - {name: n-hami, model: "NVIDIA A100-SXM4-80GB", gpus: 2, hami: true}   # HAMi device plugin
pods:
  - {name: p1, namespace: ml, node: n-dra, claims: [{device_class: gpu.nvidia.com, count: 1}], utilization: 0.5}
  - {name: p2, namespace: ml, node: n-dra, claims: [{device_class: mig.nvidia.com, profile: 3g.40gb, count: 1}],
     utilization: 0.7}
  - {name: p3, namespace: ml, node: n-dra, claims: [{shared: shared-gpu}], utilization: 0.4}
  - {name: p4, namespace: ml, node: n-dra, claims: [{device_class: gpu.nvidia.com, count: 1, admin_access: true}]}
  - {name: p5, namespace: ml, node: n-dra, claims: [{shared: shared-gpu}], utilization: 0.2}
  - {name: m1, namespace: dev, node: n-mps, gpus: 1, utilization: 0.1}                       # one MPS replica
  - {name: h1, namespace: dev, node: n-hami, hami: {memory_mib: 10240, cores: 30}, utilization: 0.2}
"""
H100, L4, A100 = 4.00, 0.80, 2.00


def close(got: float, exact: float) -> None:
    assert float(got) == pytest.approx(exact, abs=1e-6), f"{got} vs exact {exact}"


@pytest.fixture(scope="module")
def ledger() -> Path:
    work = Path(tempfile.mkdtemp(prefix="gce-contract-"))
    path = work / "ledger.db"
    asyncio.run(run_simulation(parse_scenario(SCENARIO, "contract.yaml"), path, workdir=work / "sim"))
    return path


def report(ledger: Path, by: str, key: str) -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(ledger)
    try:
        rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), by, since=None, until=None)
    finally:
        conn.close()
    return {r[key]: r for r in rows}


def test_claims_are_allocated_lowest_free_first() -> None:
    """n-dra publishes gpu-0, gpu-1, gpu-2 and GPU 3's two 3g.40gb instances. In pod order: p1's own claim
    takes gpu-0, p2's the first 3g.40gb instance, shared-gpu (first used by p3) gpu-1; p4's adminAccess
    claim takes the lowest gpu.nvidia.com device whatever holds it, gpu-0. gpu-2 stays free."""
    cluster = SimCluster(parse_scenario(SCENARIO, "contract.yaml"), 0.0)
    cluster.advance(0.0)
    claims = {name: obj for (_ns, name), obj in cluster.store.objects["resourceclaims"].items()}
    devices = {name: [r["device"] for r in c["status"]["allocation"]["devices"]["results"]]
               for name, c in claims.items()}
    own = {name.split("-")[0]: name for name in claims if name != "shared-gpu"}
    assert devices[own["p1"]] == ["gpu-0"]
    assert devices[own["p2"]] == ["gpu-3-mig-3g40gb-9-1"]
    assert devices["shared-gpu"] == ["gpu-1"]
    assert devices[own["p4"]] == ["gpu-0"]
    classes = {name: c["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] for name, c in claims.items()}
    assert classes[own["p2"]] == "mig.nvidia.com" and classes[own["p1"]] == "gpu.nvidia.com"
    assert claims[own["p4"]]["status"]["allocation"]["devices"]["results"][0]["adminAccess"] is True
    assert [r["name"] for r in claims["shared-gpu"]["status"]["reservedFor"]] == ["p3", "p5"]
    # An inline claim is the pod's own, generated from a template: <pod>-<pod claim name>-<suffix>.
    p1 = claims[own["p1"]]
    assert own["p1"].startswith("p1-gpu-") and len(own["p1"]) == len("p1-gpu-") + 5
    assert p1["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert p1["metadata"]["ownerReferences"][0]["name"] == "p1"
    assert [r["name"] for r in p1["status"]["reservedFor"]] == ["p1"]
    pod = cluster.store.objects["pods"][("ml", "p1")]
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
    assert pod["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": own["p1"]}]
    assert cluster.store.objects["pods"][("ml", "p3")]["spec"]["resourceClaims"] == [
        {"name": "shared-gpu", "resourceClaimName": "shared-gpu"}]


def test_node_forms_set_the_sharing_mode() -> None:
    """``mps: 4`` is MPS with 4 replicas per GPU (the device plugin's labels); ``hami: true`` is HAMi."""
    scenario = parse_scenario(SCENARIO, "contract.yaml")
    mps, hami = scenario.node("n-mps"), scenario.node("n-hami")
    assert (mps.sharing, mps.time_slicing) == ("mps", 4)
    assert (hami.sharing, hami.time_slicing) == ("hami", None)
    labels = SimCluster(scenario, 0.0).node_object(SimCluster(scenario, 0.0).layouts["n-mps"])["metadata"]["labels"]
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps" and labels["nvidia.com/gpu.replicas"] == "4"


def test_gpu_hours_per_pod(ledger: Path) -> None:
    """n-dra (H100, 4.00/h):
    p1: gpu-0 whole = 1 GPU-h, used 1 x 0.5 = 0.5, cost 4.00.
    p2: 3g.40gb = 3/7 GPU-h, used 3/7 x 0.7 = 0.3, cost 3/7 x 4.00 = 12/7.
    p3, p5: shared-gpu (gpu-1) split evenly, 1/2 GPU-h each; gpu-1 reads min(1, 0.4 + 0.2) = 0.6, busy split
      like the allocation: 1/2 x 0.6 = 0.3 used each; cost 1/2 x 4.00 = 2.00 each.
    p4: adminAccess on gpu-0 = 0 (nothing booked).
    n-mps (L4, 0.80/h): m1 holds 1 of 4 replicas = 1/4 GPU-h; the GPU reads 0.1, m1 its only holder:
      used min(1/4, 0.1) = 0.1; cost 1/4 x 0.80 = 0.20.
    n-hami (A100 80 GB = 81920 MiB, 2.00/h): h1 = max(10240 / 81920, 30 / 100) = max(0.125, 0.3) = 0.3 GPU-h;
      its GPU reads 0.2: used min(0.3, 0.2) = 0.2; cost 0.3 x 2.00 = 0.60."""
    r = report(ledger, "pod", "pod")
    expected = {"p1": (1.0, 0.5, 1.0 * H100), "p2": (3 / 7, 3 / 7 * 0.7, 3 / 7 * H100),
                "p3": (0.5, 0.5 * 0.6, 0.5 * H100), "p5": (0.5, 0.5 * 0.6, 0.5 * H100),
                "m1": (0.25, 0.1, 0.25 * L4), "h1": (0.3, 0.2, 0.3 * A100)}
    for pod, (allocated, used, cost) in expected.items():
        close(r[pod]["allocated_gpu_hours"], allocated)
        close(r[pod]["used_gpu_hours"], used)
        close(r[pod]["cost"], cost)
    assert "p4" not in r or r["p4"]["allocated_gpu_hours"] == 0


def test_unallocated_capacity_per_node(ledger: Path) -> None:
    """n-dra: 4 GPU-h - (p1 1 + p2 3/7 + shared-gpu 1) = 11/7 GPU-h (gpu-2 whole, GPU 3's free 3g.40gb
      instance 3/7 and its uncarved slice 1/7) -> 11/7 x 4.00 = 44/7.
    n-mps: 2 GPU-h - 1/4 = 1.75 GPU-h -> 1.75 x 0.80 = 1.40.
    n-hami: 2 GPU-h - 0.3 = 1.7 GPU-h (GPU 0 is 0.7 free, GPU 1 wholly) -> 1.7 x 2.00 = 3.40."""
    r = report(ledger, "node", "node")
    for node, (hours, price) in {"n-dra": (4 - (1 + 3 / 7 + 1), H100), "n-mps": (2 - 0.25, L4),
                                 "n-hami": (2 - 0.3, A100)}.items():
        close(r[node]["unallocated_gpu_hours"], hours)
        close(r[node]["unallocated_cost"], hours * price)


def test_report_command_by_namespace(ledger: Path) -> None:
    """The run's answer (``report --by namespace --format json``):
    ml = p1 + p2 + p3 + p5 = 1 + 3/7 + 1/2 + 1/2 = 17/7 GPU-h, cost 4.00 + 12/7 + 2.00 + 2.00 = 68/7;
    dev = m1 + h1 = 0.25 + 0.3 = 0.55 GPU-h, cost 0.20 + 0.60 = 0.80;
    unallocated = 11/7 + 1.75 + 1.7 GPU-h, cost 44/7 + 1.40 + 3.40."""
    done = subprocess.run([sys.executable, "-m", "exporter", "report", "--ledger", str(ledger), "--by", "namespace",
                           "--format", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = {r["namespace"]: r for r in json.loads(done.stdout)}
    close(rows["ml"]["allocated_gpu_hours"], 17 / 7)
    close(rows["ml"]["cost"], 68 / 7)
    close(rows["dev"]["allocated_gpu_hours"], 0.55)
    close(rows["dev"]["cost"], 0.80)
    close(rows["__unallocated__"]["idle_gpu_hours"], 11 / 7 + 1.75 + 1.7)
    close(rows["__unallocated__"]["cost"], 44 / 7 + 1.40 + 3.40)


def test_report_by_claim(ledger: Path) -> None:
    """ml/shared-gpu: 1/2 + 1/2 = 1 GPU-h, cost 4.00; p1's own claim 1 GPU-h; p4's adminAccess claim books 0."""
    r = report(ledger, "claim", "claim")
    close(r["ml/shared-gpu"]["allocated_gpu_hours"], 1.0)
    close(r["ml/shared-gpu"]["cost"], 1.0 * H100)
    (p1,) = [row for claim, row in r.items() if claim.startswith("ml/p1-gpu-")]
    close(p1["allocated_gpu_hours"], 1.0)
    assert not any(claim.startswith("ml/p4-") and row["allocated_gpu_hours"] > 0 for claim, row in r.items())
