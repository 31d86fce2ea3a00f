"""What the cluster has free: devices a node advertised (MIG instances, whole GPUs, replicas) that nobody
held, hour by hour over the window. A workload moved onto one of them takes capacity the cluster already
pays for, so it is offered as a target although no workload held that kind of device.

Free device-hours of a kind on a node over the window = the device-hours it advertised (devices x hours)
- the device-hours held on it (the usage rows' GPU-seconds over the device's share of the GPU), never more
than the node's unallocated GPU-seconds of the model allow (an hour the window or the node covers only in
part is not free time). Each is summed by the database over the window: what is read is one row per node and
kind of device, whatever the window's length. A free device is priced at the node's own effective rate for
its GPU model (the unallocated rows' cost per GPU-hour over the window) times the device's share of the GPU;
a node with no unallocated time in the window has nothing free. Several nodes' prices are averaged by their
free device-hours.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.model.books import hour_of
from exporter.model.rightsizing.types import Offer, Placement

Query = Callable[[str, Iterable[Any]], list[tuple[Any, ...]]]

@dataclass(slots=True)
class _Free:
    """One placement's free device-hours and the cost of them at their nodes' effective rates."""

    device_hours: float = 0.0
    cost: float = 0.0


def free_offers(query: Query, cluster: str, *, start: float, end: float) -> list[Offer]:
    """Each kind of device some node had free in the window, at its own effective price per device-hour."""
    span = (cluster, hour_of(start), end)
    window = "WHERE cluster = ? AND hour >= ? AND hour < ?"
    advertised = [(str(node), str(model), str(profile), int(replicas), float(device_hours)) for
                  node, model, profile, replicas, device_hours in query(
                      f"SELECT node, gpu_model, mig_profile, replicas, SUM(devices) FROM node_devices {window} "
                      "GROUP BY node, gpu_model, mig_profile, replicas", span)]
    if not advertised:
        return []
    held = {(str(node), str(model), str(profile)): float(seconds or 0.0) for node, model, profile, seconds in query(
        f"SELECT node, gpu_model, mig_profile, SUM(allocated_s) FROM usage {window} "
        "GROUP BY node, gpu_model, mig_profile", span)}
    unallocated = {(str(node), str(model)): (float(seconds or 0.0), float(cost or 0.0)) for node, model, seconds, cost
                   in query(f"SELECT node, gpu_model, SUM(seconds), SUM(cost) FROM unallocated {window} "
                            "GROUP BY node, gpu_model", span)}
    free: dict[Placement, _Free] = defaultdict(_Free)
    for node, model, profile, replicas, device_hours in advertised:
        nobody_s, cost = unallocated.get((node, model), (0.0, 0.0))
        if nobody_s <= 0:
            continue
        placement = Placement(model, profile or None, 1, replicas or None)
        taken = held.get((node, model, profile), 0.0) / 3600.0 / placement.share
        spare = min(device_hours - taken, nobody_s / 3600.0 / placement.share)
        if spare <= 1e-9:
            continue
        f = free[placement]
        f.device_hours += spare
        f.cost += spare * cost / nobody_s * 3600.0 * placement.share
    return [Offer(p, f.cost / f.device_hours, free=True) for p, f in free.items()]


def with_free(held: Sequence[Offer], free: Sequence[Offer]) -> list[Offer]:
    """The offers held in the window and those free in it; a kind both held and free is offered at the free
    price (what a moved workload would take is the spare device, not another's)."""
    by_placement = {o.placement: o for o in held}
    by_placement.update({o.placement: o for o in free})
    return list(by_placement.values())
