"""Reports by DRA claim: the claim a holder's time came from travels from the agent's snapshot through
booking into the ledger, and ``report --by claim`` (and ``/api/v1/report?by=claim``) shows one row per
claim. Arithmetic in the docstrings and beside each assertion."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline, run_simulation
from exporter.sim.scenario import parse_scenario

#: H100 80GB at 4.00/h, 1 h. gpu-2 is in MIG mode with one 3g.40gb instance (3 of its 7 slices), so the DRA
#: driver publishes gpu-0, gpu-1 and gpu-2-mig-3g40gb-9-1. ``plain`` holds a device-plugin GPU: no claim.
#: ``whole`` is a Job's pod with a priority class, which the aggregator learns from its pod watch.
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: dra, model: "NVIDIA H100 80GB HBM3", gpus: 3, dra: true, mig: {2: [3g.40gb]}}
  - {name: plain, model: "NVIDIA H100 80GB HBM3", gpus: 1}
pods:
  - {name: whole, namespace: ml, node: dra, claims: [{name: whole-gpu, devices: [gpu-0]}], utilization: 0.5,
     owner: {kind: Job, name: train}, priority_class: gpu-batch}
  - {name: s1, namespace: ml, node: dra, claims: [{name: shared-gpu, devices: [gpu-1]}], utilization: 0.2}
  - {name: s2, namespace: ml, node: dra, claims: [{name: shared-gpu, devices: [gpu-1]}], utilization: 0.4}
  - {name: mig, namespace: ml, node: dra, claims: [{name: mig-3g, devices: [gpu-2-mig-3g40gb-9-1]}],
     utilization: 0.7}
  - {name: plain, namespace: ml, node: plain, gpus: 1, utilization: 0.9}
"""
PRICE = 4.0
START = 1_764_547_200.0  # 2025-12-01T00:00:00Z, an hour boundary


def close(got: float, exact: float) -> None:
    assert float(got) == pytest.approx(exact, abs=1e-6), f"{got} vs exact {exact}"


@pytest.fixture(scope="module")
def ledger() -> Path:
    work = Path(tempfile.mkdtemp(prefix="gce-claims-"))
    path = work / "ledger.db"
    asyncio.run(run_simulation(parse_scenario(SCENARIO, "claims.yaml"), path, workdir=work / "sim"))
    return path


def by(ledger: Path, keys: str) -> dict[tuple[str, ...], dict[str, Any]]:
    conn = sqlite3.connect(ledger)
    try:
        rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), keys, since=None, until=None)
    finally:
        conn.close()
    groups = {"claim": ("namespace", "claim"), "pod": ("namespace", "pod"), "workload": ("namespace", "workload"),
              "priority_class": ("priority_class",)}
    cols = [c for k in keys.split(",") for c in groups[k]]
    return {tuple(r[c] for c in dict.fromkeys(cols)): r for r in rows}


def test_report_by_claim_golden(ledger: Path) -> None:
    """One row per claim (namespace, claim); device-plugin time has claim "".
    ml/whole-gpu: 1 GPU x 1 h = 1 GPU-h, used 1 x 0.5 = 0.5; cost 1 x 4.00 = 4.00, idle cost 0.5 x 4.00 = 2.00.
    ml/shared-gpu: gpu-1 split 1/2 + 1/2 = 1 GPU-h; the GPU reads min(1, 0.2 + 0.4) = 0.6, split like the
      allocation: 1/2 x 0.6 each = 0.6 used; cost 4.00, idle (1 - 0.6) x 4.00 = 1.60.
    ml/mig-3g: 3g.40gb = 3/7 GPU-h, used 3/7 x 0.7 = 0.3; cost 3/7 x 4.00 = 12/7, idle (3/7 - 0.3) x 4 = 0.514286.
    ml/"" (plain, a device-plugin GPU): 1 GPU-h, used 0.9, cost 4.00, idle 0.1 x 4.00 = 0.40.
    Unallocated: dra has 3 GPU-h - (1 + 1 + 3/7) = 4/7 GPU-h, plain 0 -> 4/7 x 4.00 = 16/7."""
    r = by(ledger, "claim")
    whole, shared, mig, none = r[("ml", "ml/whole-gpu")], r[("ml", "ml/shared-gpu")], r[("ml", "ml/mig-3g")], \
        r[("ml", "")]
    close(whole["allocated_gpu_hours"], 1.0)
    close(whole["used_gpu_hours"], 0.5)
    close(whole["cost"], 1.0 * PRICE)
    close(whole["idle_cost"], 0.5 * PRICE)
    close(shared["allocated_gpu_hours"], 0.5 + 0.5)
    close(shared["used_gpu_hours"], 0.5 * 0.6 + 0.5 * 0.6)
    close(shared["cost"], 1.0 * PRICE)
    close(shared["idle_cost"], (1.0 - 0.6) * PRICE)
    close(mig["allocated_gpu_hours"], 3 / 7)
    close(mig["used_gpu_hours"], 3 / 7 * 0.7)
    close(mig["cost"], 3 / 7 * PRICE)
    close(mig["idle_cost"], (3 / 7 - 3 / 7 * 0.7) * PRICE)
    close(none["allocated_gpu_hours"], 1.0)
    close(none["cost"], 1.0 * PRICE)
    unallocated = r[("__unallocated__", "__unallocated__")]
    close(unallocated["idle_gpu_hours"], 3 - (1 + 1 + 3 / 7))
    close(unallocated["cost"], 4 / 7 * PRICE)
    assert set(r) == {("ml", "ml/whole-gpu"), ("ml", "ml/shared-gpu"), ("ml", "ml/mig-3g"), ("ml", ""),
                      ("__unallocated__", "__unallocated__")}


def test_report_by_claim_and_pod_splits_a_shared_claim_evenly(ledger: Path) -> None:
    """by claim,pod: ml/shared-gpu is 1/2 GPU-h for each of s1 and s2, used 1/2 x 0.6 = 0.3 each (not
    0.2 and 0.4: a claim's busy time is split like its allocation), cost 1/2 x 4.00 = 2.00 each."""
    r = by(ledger, "claim,pod")
    for pod in ("s1", "s2"):
        row = r[("ml", "ml/shared-gpu", pod)]
        close(row["allocated_gpu_hours"], 0.5)
        close(row["used_gpu_hours"], 0.5 * 0.6)
        close(row["cost"], 0.5 * PRICE)
    close(r[("ml", "ml/whole-gpu", "whole")]["cost"], 1.0 * PRICE)
    close(r[("ml", "", "plain")]["cost"], 1.0 * PRICE)


def test_running_dra_pods_are_known_to_the_aggregator(ledger: Path) -> None:
    """A pod holding its GPU only through a DRA claim is booked under its workload (the Job ``train``, not
    the pod's name) and its priority class: 1 GPU-h x 4.00 = 4.00 for each."""
    workloads = by(ledger, "workload")
    close(workloads[("ml", "train")]["allocated_gpu_hours"], 1.0)
    close(workloads[("ml", "train")]["cost"], 1.0 * PRICE)
    assert ("ml", "whole") not in workloads
    close(by(ledger, "priority_class")[("gpu-batch",)]["cost"], 1.0 * PRICE)


def test_report_command_by_claim(ledger: Path) -> None:
    """The CLI prints the same rows: ml/mig-3g costs 3/7 x 4.00 = 12/7 = 1.714286."""
    done = subprocess.run([sys.executable, "-m", "exporter", "report", "--ledger", str(ledger), "--by", "claim",
                           "--format", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = {r["claim"]: r for r in json.loads(done.stdout)}
    assert rows["ml/mig-3g"]["namespace"] == "ml"
    assert float(rows["ml/mig-3g"]["cost"]) == pytest.approx(12 / 7, abs=1e-6)


async def test_report_api_by_claim(tmp_path: Path) -> None:
    """``/api/v1/report?by=claim`` after 3 simulated minutes (12 intervals of 15 s = 0.05 h per holder):
    ml/whole-gpu 0.05 GPU-h x 4.00 = 0.20; ml/shared-gpu 2 x 1/2 x 0.05 = 0.05 GPU-h, 0.20;
    ml/mig-3g 3/7 x 0.05 = 0.021429 GPU-h, 3/7 x 0.05 x 4.00 = 0.085714; ml/"" (plain) 0.05 GPU-h, 0.20."""
    pipe = Pipeline(parse_scenario(SCENARIO, "claims.yaml"), tmp_path / "w", clock=VirtualClock(START))
    await pipe.start()
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(13):
            await pipe.step(k * 15)
        async with aiohttp.ClientSession() as session, session.get(
                f"http://{agg.settings.listen}/api/v1/report", params={"by": "claim"}) as resp:
            assert resp.status == 200
            api = {r["claim"]: r for r in await resp.json()}
        gauges = agg.gauges
    finally:
        await pipe.close()
    hours = 12 * 15 / 3600
    close(api["ml/whole-gpu"]["allocated_gpu_hours"], hours)
    close(api["ml/whole-gpu"]["cost"], hours * PRICE)
    close(api["ml/shared-gpu"]["allocated_gpu_hours"], 2 * 0.5 * hours)
    close(api["ml/shared-gpu"]["cost"], 2 * 0.5 * hours * PRICE)
    close(api["ml/mig-3g"]["allocated_gpu_hours"], 3 / 7 * hours)
    close(api["ml/mig-3g"]["cost"], 3 / 7 * hours * PRICE)
    close(api[""]["cost"], hours * PRICE)
    # held now: whole 1 + s1 1/2 + s2 1/2 + mig 3/7 + plain 1 = 3 3/7 GPUs; the DRA pods are not taken for gone
    close(gauges.allocated_gpus["ml"], 1 + 0.5 + 0.5 + 3 / 7 + 1)
    assert gauges.pods[("ml", "whole")].workload == "train"
    close(gauges.pods[("ml", "mig")].gpus, 3 / 7)
