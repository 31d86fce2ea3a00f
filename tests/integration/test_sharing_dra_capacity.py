"""Consumable capacity (alpha ``DRAConsumableCapacity``) through ``simulate``: claims with ``memory_mib``
take shares of one GPU; the simulator publishes the GPU's memory and ``allowMultipleAllocations``, the
claims' results carry ``shareID`` and ``consumedCapacity``, and pod-resources the ``share_id``. Each share
is charged ``consumed memory / device memory``; the GPU's busy time is split among the shares by
fraction. Arithmetic in the docstrings and beside the assertions."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.pipeline import run_simulation
from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import ScenarioError, parse_scenario

#: A100-SXM4-80GB: 81920 MiB of framebuffer (the simulator's, as the real GPU's), 4.00/h, 1 h.
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 4.0}
nodes:
  - {name: dra, model: "NVIDIA A100-SXM4-80GB", gpus: 2, dra: true}
pods:
  - {name: a, namespace: ml, node: dra, claims: [{name: share-a, devices: [gpu-0], memory_mib: 20480}],
     utilization: 0.3}
  - {name: b1, namespace: ml, node: dra, claims: [{name: share-b, devices: [gpu-0], memory_mib: 40960}],
     utilization: 0.1}
  - {name: b2, namespace: ml, node: dra, claims: [{name: share-b, devices: [gpu-0], memory_mib: 40960}],
     utilization: 0.2}
  - {name: w, namespace: ml, node: dra, claims: [{name: whole, devices: [gpu-1]}], utilization: 0.5}
"""
PRICE = 4.0


def close(got: float, exact: float) -> None:
    assert float(got) == pytest.approx(exact, abs=1e-6), f"{got} vs exact {exact}"


def test_simulator_publishes_shares() -> None:
    """gpu-0: memory 81920Mi, allowMultipleAllocations; share-a's result: a shareID and 20480Mi consumed."""
    cluster = SimCluster(parse_scenario(SCENARIO, "capacity.yaml"), 0.0)
    cluster.advance(0.0)
    (slice_,) = cluster.store.objects["resourceslices"].values()
    gpu0, gpu1 = slice_["spec"]["devices"]
    assert gpu0["capacity"] == {"memory": {"value": "81920Mi"}} and gpu0["allowMultipleAllocations"] is True
    assert "allowMultipleAllocations" not in gpu1
    (result,) = cluster.store.objects["resourceclaims"][("ml", "share-a")]["status"]["allocation"]["devices"][
        "results"]
    assert result["consumedCapacity"] == {"memory": "20480Mi"} and result["shareID"]
    whole = cluster.store.objects["resourceclaims"][("ml", "whole")]["status"]["allocation"]["devices"]["results"]
    assert "shareID" not in whole[0]


@pytest.fixture(scope="module")
def by_claim() -> dict[str, dict[str, Any]]:
    work = Path(tempfile.mkdtemp(prefix="gce-capacity-"))
    asyncio.run(run_simulation(parse_scenario(SCENARIO, "capacity.yaml"), work / "ledger.db", workdir=work / "sim"))
    conn = sqlite3.connect(work / "ledger.db")
    try:
        rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), "claim,pod", since=None,
                            until=None)
    finally:
        conn.close()
    return {f"{r['claim']}:{r['pod']}": r for r in rows}


def test_consumable_capacity_golden(by_claim: dict[str, dict[str, Any]]) -> None:
    """gpu-0 reads min(1, 0.3 + 0.1 + 0.2) = 0.6.
    a: 20480 / 81920 = 0.25 GPU-h, cost 0.25 x 4.00 = 1.00.
    b1, b2: share-b is 40960 / 81920 = 0.5, split between its two pods: 0.25 GPU-h each, 1.00 each.
    Used: 0.6 busy GPU-h split by fraction over 0.75 held: 0.6 x 0.25 / 0.75 = 0.2 each (under 0.25);
    idle 0.05 GPU-h each -> idle cost 0.20 each.
    w: whole gpu-1, 1 GPU-h, used 0.5, cost 4.00.
    Unallocated: 2 GPU-h - (0.25 x 3 + 1) = 0.25 GPU-h -> 1.00."""
    for key in ("ml/share-a:a", "ml/share-b:b1", "ml/share-b:b2"):
        row = by_claim[key]
        close(row["allocated_gpu_hours"], 0.25)
        close(row["used_gpu_hours"], 0.6 * 0.25 / 0.75)
        close(row["cost"], 0.25 * PRICE)
        close(row["idle_cost"], (0.25 - 0.2) * PRICE)
    close(by_claim["ml/whole:w"]["allocated_gpu_hours"], 1.0)
    close(by_claim["ml/whole:w"]["used_gpu_hours"], 0.5)
    unallocated = by_claim["__unallocated__:__unallocated__"]
    close(unallocated["idle_gpu_hours"], 2 - (3 * 0.25 + 1))
    close(unallocated["cost"], 0.25 * PRICE)


@pytest.mark.parametrize(("claims", "error"), [
    ("[{name: c, devices: [gpu-0], memory_mib: 61440}]", "pods[1].claims[0].memory_mib: shares of gpu-0 add up "
                                                         "to 102400 MiB, over its 81920 MiB"),
    ("[{name: c, devices: [gpu-0]}]", "pods[1].claims[0].devices: gpu-0 is allocated to claim s"),
    ("[{name: c, devices: [gpu-0], memory_mib: 0}]", "pods[1].claims[0].memory_mib: expected an integer >= 1"),
])
def test_share_scenario_errors_name_the_field(claims: str, error: str) -> None:
    text = ('prices: {"NVIDIA A100-SXM4-80GB": 4.0}\nnodes: [{name: dra, model: "NVIDIA A100-SXM4-80GB", gpus: 1, '
            'dra: true}]\npods: [{name: a, namespace: n, node: dra, claims: [{name: s, devices: [gpu-0], '
            'memory_mib: 40960}]}, {name: b, namespace: n, node: dra, claims: ' + claims + '}]\n')
    with pytest.raises(ScenarioError, match=error.replace("[", r"\[").replace("]", r"\]")):
        SimCluster(parse_scenario(text, "s.yaml"), 0.0)
