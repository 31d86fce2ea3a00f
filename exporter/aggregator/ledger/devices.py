"""The devices each node advertised, per hour: how many MIG instances of each profile, whole GPUs and
time-sliced replicas Kubernetes could hand out. With the evidence rows (what was held) they show the
capacity a cluster has free, which right-sizing may offer as a target although no workload held it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from exporter.aggregator.ledger.backend import Tx


class DeviceKey(NamedTuple):
    """One kind of device a node advertised in one hour."""

    hour: int
    node: str
    gpu_model: str
    mig_profile: str  # "" for a whole GPU or a replica
    replicas: int  # a time-sliced GPU's replicas; 0 for a whole GPU or a MIG instance


def write_devices(tx: Tx, rows: Mapping[DeviceKey, int], *, cluster: str) -> None:
    """Upsert the most devices of each kind the node advertised in the hour (a layout that changes within
    the hour keeps its larger count)."""
    if not rows:
        return
    cols = ("cluster", *DeviceKey._fields, "devices")
    tx.executemany(
        f"INSERT INTO node_devices ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
        f"ON CONFLICT (cluster, {', '.join(DeviceKey._fields)}) DO UPDATE SET devices = CASE WHEN "
        "excluded.devices > node_devices.devices THEN excluded.devices ELSE node_devices.devices END",
        ((cluster, *k, n) for k, n in rows.items()))
