"""Shared by the version-2 pricing tests of booking, commitments, metrics, the ledger and report: a committed
p5.48xlarge price list, one-holder snapshots, a labelled cluster, and a ledger as a pre-version-2 build left it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import MIGRATIONS
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UsageSnapshot

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z, an hour boundary
COMMITTED = parse_pricing("""
default_price: 1
models: {"NVIDIA H100 80GB HBM3": 4.0}
instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}
capacity_types: {spot: 0.35}
commitments:
  - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: 12, hourly: 2.10,
     start: "2027-01-01T00:00:00Z", end: "2028-01-01T00:00:00Z"}
""", "p.yaml")


def snap(node: str, seq: int, ts: float, *, held: float, gpus: int = 8, model: str = H100,
         energy_j: float = 0.0) -> UsageSnapshot:
    """One holder (ns/p) holding 1 GPU for ``held`` seconds so far, on a node of ``gpus`` GPUs."""
    return UsageSnapshot(node=node, epoch="e1", timestamp=ts, seq=seq, started_at=T0, holders=[HolderCounters(
        namespace="ns", pod=f"p-{node}", container="c", device_id="GPU-0", gpu_uuid="GPU-0", gpu_model=model,
        fraction=1.0, allocated_s=held, used_s=held, unmeasured_s=0.0, energy_j=energy_j)],
        capacity=[GpuCapacity(gpu_uuid=f"GPU-{i}", gpu_model=model) for i in range(gpus)])


def cluster(**labels: dict[str, str]) -> KubeState:
    k = KubeState()
    for node, node_labels in labels.items():
        k.nodes[node] = node_labels
    return k


def version_2_ledger(path: Path) -> sqlite3.Connection:
    """A ledger as a build before version-2 pricing left it: migrations 1 and 2 only."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for version in (1, 2):
        for stmt in filter(None, (s.strip() for s in MIGRATIONS[version].split(";"))):
            conn.execute(stmt)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    return conn
