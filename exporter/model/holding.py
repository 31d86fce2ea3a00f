"""Holding time and conservation: how much of an interval a holder held, and where the rest went.

A pod holds its devices from ``status.startTime`` (kubelet admission) to its last container's
``finishedAt``, or its disappearance while running (ARCHITECTURE.md, "Holding time"). Every second of
a node's capacity between two ticks lands in exactly one bucket: a holder's allocated time,
unallocated, or unobserved ("Conservation").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.model.devices import mig_fraction, mig_profile_from_resource


@dataclass(frozen=True, slots=True)
class Window:
    """The part of wall time one tick charges: ``[start, end]`` (seconds since the epoch)."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        """The window's length; 0 when it is empty (end before start)."""
        return max(0.0, self.end - self.start)

    def overlap(self, held_from: float | None, held_until: float | None) -> float:
        """Seconds of this window inside ``[held_from, held_until]``; None = unbounded on that side."""
        lo = self.start if held_from is None else max(self.start, held_from)
        hi = self.end if held_until is None else min(self.end, held_until)
        return max(0.0, hi - lo)


@dataclass(frozen=True, slots=True)
class PodLifetime:
    """What the API server said about one pod's hold on its devices (from the own-node pod watch).

    ``finished`` is the latest ``finishedAt`` once every container terminated; ``deleted`` is when the
    pod vanished (the DELETED event, or an earlier ``metadata.deletionTimestamp``). ``requests`` is the
    GPU count per extended-resource name, summed over the pod's containers.
    """

    start: float | None
    finished: float | None = None
    deleted: float | None = None
    requests: Mapping[str, int] = field(default_factory=dict)
    container: str = ""

    @property
    def end(self) -> float | None:
        """When the pod stopped holding its devices: its containers' end, else its disappearance."""
        return self.finished if self.finished is not None else self.deleted


def request_fraction(resource: str, *, model: str | None, replicas: int) -> float:
    """One unit of ``resource`` as a fraction of a GPU: whole GPU 1, MIG by profile, a replica 1/r.

    ``replicas`` is the node's time-slicing replicas per GPU (1 when the node is not time-sliced).
    """
    profile = mig_profile_from_resource(resource)
    if profile is not None:
        try:
            return mig_fraction(profile, model)
        except ValueError:
            return 1.0
    if resource.startswith("nvidia.com/gpu"):
        return 1.0 / max(1, replicas)
    return 1.0


@dataclass(frozen=True, slots=True)
class FreeCapacity:
    """What one window's capacity not held by anyone comes to."""

    unallocated: Mapping[str, float]  # GPU-seconds per model
    oversubscribed: float  # GPU-seconds held beyond the capacity (see ``free_capacity``)


def free_capacity(capacity: Mapping[str, float], held: Mapping[str, float], *, seconds: float) -> FreeCapacity:
    """Unallocated GPU-seconds per model = capacity x seconds - held, never negative.

    ``capacity`` is physical GPUs per model; ``held`` is GPU-seconds held per model in the window.
    Holders of a model the node has no capacity for (an unresolved device, a mixed node's unknown
    model) take their time out of the free capacity of the node's models, in model-name order.
    When more is held than exists (a misread MIG layout, replicas miscounted) holders are still
    charged what Kubernetes allocated them, unallocated is 0 and the excess is returned as
    ``oversubscribed``, so that Σ held + Σ unallocated - oversubscribed = Σ capacity x seconds holds
    exactly in every case.
    """
    free = {m: max(0.0, gpus * seconds - held.get(m, 0.0)) for m, gpus in sorted(capacity.items())}
    homeless = sum(v for m, v in held.items() if m not in capacity)
    for m in free:
        take = min(free[m], homeless)
        free[m] -= take
        homeless -= take
    total_capacity = sum(capacity.values()) * seconds
    over = sum(held.values()) + sum(free.values()) - total_capacity
    return FreeCapacity(unallocated=free, oversubscribed=max(0.0, over))
