"""Other accelerators and measured shares end to end: the simulator serves device-metrics-exporter (whole
MI300X GPUs and a CPX-partitioned one), gaudi-metric-exporter, dcgm-exporter's per-pod series and HAMi's
monitor with their real IDs, formats and limits; `simulate` runs the agents and the aggregator; the report's
numbers are worked by hand in each docstring."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from exporter.aggregator.advice.reprice import reprice
from exporter.aggregator.ledger.report import ReportError, build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.model.pricing.document import parse_pricing
from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import ScenarioError, parse_scenario
from tests.integration.test_golden import close, simulate

OAM = "AMD Instinct MI300X OAM"
AMD = f"""
tick: 15s
duration: 1h
prices: {{"{OAM}": 3.2, "Intel Gaudi": 5.0, "Intel Gaudi 3": 5.0, "NVIDIA L4": 0.8}}
nodes:
  - {{name: n-l4, model: "NVIDIA L4", gpus: 1}}
  - {{name: n-mi300, vendor: amd, model: "{OAM}", gpus: 2}}
  - {{name: n-mi300-cpx, vendor: amd, model: "{OAM}", gpus: 1, partition: cpx}}
  - {{name: n-gaudi, vendor: gaudi, model: "Intel Gaudi 3", gpus: 8}}
pods:
  - {{name: train, namespace: ml, node: n-mi300, gpus: 1, utilization: 0.6}}
  - {{name: a, namespace: team-a, node: n-mi300-cpx, gpus: 1, utilization: 0.4}}
  - {{name: b, namespace: team-b, node: n-mi300-cpx, gpus: 2, utilization: 0.5}}
  - {{name: bert, namespace: nlp, node: n-gaudi, gpus: 2, utilization: 0.8}}
  - {{name: serve, namespace: web, node: n-l4, gpus: 1, utilization: 0.5}}
"""


def test_simulator_serves_the_vendors_ids() -> None:
    """AMD: PCI addresses, and on the CPX GPU its PCI address for partition 0 then amdgpu_xcp_1..7; Gaudi: serial
    numbers, the same in pod-resources and the exporter's Serial label."""
    cluster = SimCluster(parse_scenario(AMD, "amd.yaml"), 0.0)
    cluster.advance(0.0)
    assert cluster.layouts["n-mi300"].resources == {"amd.com/gpu": ["0000:05:00.0", "0000:15:00.0"]}
    assert cluster.layouts["n-mi300-cpx"].resources == {
        "amd.com/gpu": ["0000:05:00.0", *(f"amdgpu_xcp_{n}" for n in range(1, 8))]}
    listed = {a.pod.name: a.devices for a in cluster.pod_resources("n-mi300-cpx")}
    assert listed == {"a": ["0000:05:00.0"], "b": ["amdgpu_xcp_1", "amdgpu_xcp_2"]}
    text = cluster.render_dcgm("n-mi300-cpx")
    assert 'gpu_gfx_activity{' in text and text.count("gpu_gfx_activity{") == 8
    # the exporter's real limit: only partition 0 reports activity; b's partitions read 0
    assert 'gpu_partition_id="1",gpu_uuid' in text and "amdgpu_xcp" not in text
    serials = cluster.layouts["n-gaudi"].resources["habana.ai/gaudi"]
    gaudi = cluster.render_dcgm("n-gaudi")
    assert all(f'Serial="{s}"' in gaudi for s in serials) and "habanalabs_power_mW{" in gaudi


async def test_amd_and_gaudi_nodes_golden(tmp_path: Path) -> None:
    """One hour.
    ml/train: 1 MI300X, 60 %: 1 GPU-h allocated, 0.6 used, cost 1 x 3.20 = 3.20.
    team-a: partition 0 of the CPX GPU = 1/8 GPU at 40 %: 0.125 allocated, 0.05 used, cost 0.40.
    team-b: partitions 1 and 2 = 2/8: 0.25 allocated, unmeasured 0.25 (the exporter gives no activity there),
    used 0, cost 0.80.
    nlp/bert: 2 Gaudi cards at 80 %: 2 card-h, 1.6 used, cost 10.00.
    web/serve: the NVIDIA L4, 1 GPU-h, 0.5 used, 0.80.
    Unallocated: MI300X 1 (n-mi300) + 0.625 (n-mi300-cpx) = 1.625 GPU-h -> 5.20; Gaudi 6 card-h -> 30.00.
    --by vendor: amd 1.375 GPU-h allocated (4.40, unallocated 1.625 -> 5.20), gaudi 2 (10.00, unallocated 6 ->
    30.00), nvidia 1 (0.80, none unallocated)."""
    r = await simulate(AMD, tmp_path)
    close(r["ml"]["allocated_gpu_hours"], 1.0)
    close(r["ml"]["used_gpu_hours"], 0.6)
    close(r["ml"]["cost"], 3.2)
    close(r["team-a"]["allocated_gpu_hours"], 0.125)
    close(r["team-a"]["used_gpu_hours"], 0.05)
    close(r["team-a"]["cost"], 0.4)
    close(r["team-b"]["allocated_gpu_hours"], 0.25)
    close(r["team-b"]["used_gpu_hours"], 0.0)
    close(r["team-b"]["unmeasured_gpu_hours"], 0.25)
    close(r["team-b"]["cost"], 0.8)
    close(r["nlp"]["allocated_gpu_hours"], 2.0)
    close(r["nlp"]["used_gpu_hours"], 1.6)
    close(r["nlp"]["cost"], 10.0)
    close(r["__unallocated__"]["idle_gpu_hours"], 1.625 + 6.0)
    close(r["__unallocated__"]["cost"], 5.2 + 30.0)
    conn = sqlite3.connect(tmp_path / "ledger.db")
    try:
        rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), "vendor", since=None, until=None)
    finally:
        conn.close()
    vendor = {row["vendor"]: row for row in rows}
    assert set(vendor) == {"amd", "gaudi", "nvidia"}
    for name, allocated, cost, unallocated_cost in (("amd", 1.375, 4.4, 5.2), ("gaudi", 2.0, 10.0, 30.0),
                                                    ("nvidia", 1.0, 0.8, 0.0)):
        close(vendor[name]["allocated_gpu_hours"], allocated)
        close(vendor[name]["cost"], cost)
        close(vendor[name]["unallocated_cost"], unallocated_cost)


SHARED = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 0.8, "NVIDIA A10": 1.0}
nodes:
  - {name: n-ts, model: "NVIDIA L4", gpus: 1, time_slicing: 2, per_pod_metrics: dcgm}
  - {name: n-h, model: "NVIDIA A10", gpus: 1, hami: true, per_pod_metrics: hami}
pods:
  - {name: a, namespace: ts-a, node: n-ts, gpus: 1, utilization: 0.6}
  - {name: b, namespace: ts-b, node: n-ts, gpus: 1, utilization: 0.1}
  - {name: p, namespace: h-p, node: n-h, gpus: 1, hami: {memory_mib: 1024, cores: 50}, utilization: 0.2}
  - {name: q, namespace: h-q, node: n-h, gpus: 1, hami: {memory_mib: 1024, cores: 25}, utilization: 0.6}
"""


async def test_measured_shares_golden(tmp_path: Path) -> None:
    """L4 time-sliced in 2 (ARCHITECTURE.md): device 0.6 + 0.1 = 70 % busy; A 60/70 x 0.7 = 0.6 capped at its 0.5,
    B 10/70 x 0.7 = 0.1 (by fraction: 0.35 each).
    HAMi A10 (16 GiB: 1 GiB is 1/16 < cores): p at fraction 0.5 (cores 50), q 0.25 (cores 25); device busy
    0.2 + 0.6 = 0.8; measured shares 0.25 / 0.75 of 0.8 = 0.2 / 0.6; used min(0.5, 0.2) = 0.2 and
    min(0.25, 0.6) = 0.25 GPU-h."""
    r = await simulate(SHARED, tmp_path)
    close(r["ts-a"]["allocated_gpu_hours"], 0.5)
    close(r["ts-a"]["used_gpu_hours"], 0.5)
    close(r["ts-b"]["used_gpu_hours"], 0.1)
    close(r["h-p"]["allocated_gpu_hours"], 0.5)
    close(r["h-p"]["used_gpu_hours"], 0.2)
    close(r["h-q"]["allocated_gpu_hours"], 0.25)
    close(r["h-q"]["used_gpu_hours"], 0.25)
    for ns in ("ts-a", "ts-b", "h-p", "h-q"):  # every value measured all along: nothing split by fraction
        close(r[ns]["split_gpu_hours"], 0.0)


SPLIT = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 0.8, "NVIDIA A10": 1.0}
nodes:
  - {name: n-ts, model: "NVIDIA L4", gpus: 1, time_slicing: 2, per_pod_metrics: dcgm}
  - {name: n-h, model: "NVIDIA A10", gpus: 1, hami: true, per_pod_metrics: hami}
pods:
  - {name: a, namespace: ts-a, node: n-ts, gpus: 1, utilization: 0.6}
  - {name: b, namespace: ts-b, node: n-ts, gpus: 1, utilization: 0.1}
  - {name: p, namespace: h-p, node: n-h, gpus: 1, hami: {memory_mib: 1024, cores: 50}, utilization: 0.2}
  - {name: q, namespace: h-q, node: n-h, gpus: 1, hami: {memory_mib: 1024, cores: 25}, utilization: 0.6}
events:
  - {type: per_pod_metrics_down, node: n-ts, from: 20m, to: 50m}
  - {type: per_pod_metrics_down, node: n-h, from: 45m, to: 60m}
"""


async def test_split_hours_golden(tmp_path: Path) -> None:
    """The scenario of test_measured_shares_golden, with each node's per-pod metrics gone for a while.
    L4 (a 0.6, b 0.1, device 0.7 busy, 0.5 each): measured 30 min (a 0.5 capped, b 0.1), split by fraction 30 min
    (0.7 x 0.5 / 1 = 0.35 each). a: used 0.5 x 0.5 + 0.35 x 0.5 = 0.425 GPU-h, split 0.5 x 0.5 = 0.25; b: used
    0.1 x 0.5 + 0.35 x 0.5 = 0.225, split 0.25. Held 0.5 GPU-h each, cost 0.5 x 0.80 = 0.40 each.
    HAMi A10 (p 0.5, q 0.25, device 0.8 busy): measured 45 min (p 0.2, q 0.25 capped), split 15 min (0.8 x 0.5 /
    0.75 = 0.533 capped at 0.5; 0.8 x 0.25 / 0.75 = 0.267 capped at 0.25). p: used 0.2 x 0.75 + 0.5 x 0.25 = 0.275,
    split 0.5 x 0.25 = 0.125; q: used 0.25 x 0.75 + 0.25 x 0.25 = 0.25, split 0.25 x 0.25 = 0.0625.
    Each window edge may land a tick either way: one 15 s tick per edge, at the holder's fraction."""
    r = await simulate(SPLIT, tmp_path)
    for ns, used, split, fraction in (("ts-a", 0.425, 0.25, 0.5), ("ts-b", 0.225, 0.25, 0.5),
                                      ("h-p", 0.275, 0.125, 0.5), ("h-q", 0.25, 0.0625, 0.25)):
        close(r[ns]["allocated_gpu_hours"], fraction)
        close(r[ns]["split_gpu_hours"], split, ticks=2, fraction=fraction)
        close(r[ns]["used_gpu_hours"], used, ticks=2, fraction=fraction)
    close(r["ts-a"]["cost"], 0.4)
    close(r["__unallocated__"]["split_gpu_hours"], 0.0)


def test_per_pod_metrics_down_needs_per_pod_metrics() -> None:
    """The event takes per-pod series away; on a node that serves none it is a mistake, named by field."""
    text = 'default_price: 1\nnodes: [{name: x, model: "M", gpus: 1}]\n' + \
           "events: [{type: per_pod_metrics_down, node: x, from: 1m, to: 2m}]\n"
    with pytest.raises(ScenarioError, match=re.escape("events[0].node: 'x' serves no per-pod metrics")):
        parse_scenario(text, "s.yaml")


@pytest.mark.parametrize(("node", "error"), [
    ('{name: x, model: "M", gpus: 1, vendor: intel}', "nodes[0].vendor: expected one of nvidia, amd, gaudi"),
    ('{name: x, model: "M", gpus: 1, partition: cpx}', "nodes[0].partition: expected one of spx, dpx, qpx, cpx"),
    ('{name: x, model: "M", gpus: 1, per_pod_metrics: dcgm}', "nodes[0].per_pod_metrics: dcgm's per-pod series"),
    ('{name: x, model: "M", gpus: 1, vendor: amd, time_slicing: 2}', "nodes[0].vendor: amd nodes have whole"),
])
def test_vendor_fields_errors_name_the_field(node: str, error: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(error)):
        parse_scenario(f'default_price: 1\nnodes: [{node}]\n', "s.yaml")


def test_reprice_refuses_the_derived_vendor_grouping() -> None:
    """Repricing needs booked group columns; vendor is derived from the model, so it says to use --by model."""
    with pytest.raises(ReportError, match="use --by model"):
        reprice(lambda _sql, _p: [], [], by="vendor", since=None, until=None,
                pricing=parse_pricing('{"currency": "USD", "default_price": 1.0}', "p"))


def test_built_in_accelerators_scenario_serves_every_vendor() -> None:
    """`demo --scenario exporter/sim/scenarios/accelerators.yaml`: each node serves its vendor's format, and the
    per-pod nodes their per-pod series (dcgm-exporter's beside the device's; HAMi's on the monitor)."""
    path = Path(__file__).resolve().parents[2] / "exporter" / "sim" / "scenarios" / "accelerators.yaml"
    cluster = SimCluster(parse_scenario(path.read_text(), str(path)), 0.0)
    cluster.advance(0.0)
    assert "gpu_gfx_activity{" in cluster.render_dcgm("gpu-mi300-0")
    assert 'gpu_compute_partition_type="cpx"' in cluster.render_dcgm("gpu-mi300-cpx-0")
    assert "habanalabs_utilization{" in cluster.render_dcgm("gpu-gaudi-0")
    assert cluster.render_dcgm("gpu-l4-ts-0").count("pod_uid=") == 2
    assert cluster.render_hami("gpu-a10-hami-0").count("hami_container_device_utilization_ratio{") == 2
    assert "DCGM_FI_DEV_GPU_UTIL{" in cluster.render_dcgm("gpu-h100-0")
