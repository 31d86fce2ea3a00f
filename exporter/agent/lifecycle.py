"""What the own-node pod watch knows about each pod's hold on its devices, for exact boundaries.

Per pod: ``status.startTime`` (kubelet admission, when devices are allocated), the latest
``finishedAt`` once every container terminated, the deletion time (when the DELETED event was seen,
or ``metadata.deletionTimestamp`` when that is earlier and after the start), and the GPU requests
per resource name. Also which pods have finished (phase Succeeded/Failed), so that pods an old
kubelet still lists are not charged.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from exporter.agent.holders.attribution import accepted_resource
from exporter.model.holding import PodLifetime

PodKey = tuple[str, str]


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _count(value: object) -> int:
    try:
        return max(0, int(str(value)))
    except ValueError:
        return 0


def finished_at(status: dict[str, Any]) -> float | None:
    """The last container's ``finishedAt``, only once every container has terminated."""
    statuses = status.get("containerStatuses") or []
    ends: list[float | None] = []
    for cs in statuses:
        terminated = ((cs or {}).get("state") or {}).get("terminated")
        if not terminated:
            return None
        ends.append(parse_time(terminated.get("finishedAt")))
    known = [e for e in ends if e is not None]
    return max(known) if known and len(known) == len(ends) else None


def gpu_requests(spec: dict[str, Any], extra: Iterable[str]) -> tuple[dict[str, int], str]:
    """GPU count per accounted resource, summed over containers, and the first GPU container's name."""
    extras = tuple(extra)
    out: dict[str, int] = {}
    first = ""
    for c in spec.get("containers") or []:
        res = (c or {}).get("resources") or {}
        asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, qty in asked.items():
            if accepted_resource(name, extras) and _count(qty) > 0:
                out[name] = out.get(name, 0) + _count(qty)
                first = first or str(c.get("name", ""))
    return out, first


def lifetime_of(pod: dict[str, Any], *, extra: Iterable[str], deleted_seen: float | None,
                before: PodLifetime | None) -> PodLifetime:
    """A pod's lifetime from its object, keeping what ``before`` knew that the object no longer says."""
    status = pod.get("status") or {}
    meta = pod.get("metadata") or {}
    start = parse_time(status.get("startTime"))
    if start is None and before is not None:
        start = before.start
    finished = finished_at(status) or (before.finished if before is not None else None)
    deleted = None
    if deleted_seen is not None:
        stamp = parse_time(meta.get("deletionTimestamp"))
        early = stamp is not None and start is not None and start < stamp < deleted_seen
        deleted = stamp if early else deleted_seen
    requests, container = gpu_requests(pod.get("spec") or {}, extra)
    return PodLifetime(start=start, finished=finished, deleted=deleted, requests=requests, container=container)


class PodLifetimes:
    """Lifetimes of this node's pods, fed by the watch; entries of ended pods are kept a while (the
    meter needs them at the next tick), then pruned."""

    def __init__(self, extra_resources: Iterable[str] = ()) -> None:
        self.extra = tuple(extra_resources)
        self.pods: dict[PodKey, PodLifetime] = {}
        self.finished: set[PodKey] = set()

    def on_event(self, etype: str, obj: dict[str, Any], *, now: float) -> None:
        """Fold one watch event (or a relist) into the lifetimes, ``now`` being when it was seen."""
        items = obj.get("items") or [] if etype == "LISTED" else [obj]
        if etype == "LISTED":  # a relist: pods gone meanwhile are forgotten unless their end is known
            self.finished.clear()
            self.pods = {k: v for k, v in self.pods.items() if v.end is not None}
        for pod in items:
            meta = pod.get("metadata") or {}
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            deleted = now if etype == "DELETED" else None
            self.pods[key] = lifetime_of(pod, extra=self.extra, deleted_seen=deleted, before=self.pods.get(key))
            if etype != "DELETED" and (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                self.finished.add(key)
            else:
                self.finished.discard(key)

    def prune(self, before: float) -> None:
        """Forget pods that ended before ``before``."""
        self.pods = {k: v for k, v in self.pods.items() if v.end is None or v.end >= before}
