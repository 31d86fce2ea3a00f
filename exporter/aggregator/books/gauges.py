"""Point-in-time figures (what is held now, by whom, how busy, for how long idle): pure functions of the
latest snapshots, the API cache and the prices, recomputed every tick and on pod deletion."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from exporter.aggregator.books.booking import NodeModel, NodePrice
from exporter.aggregator.kube.state import KubeState
from exporter.model.books import UsageAmounts
from exporter.model.pricing.document import Pricing
from exporter.model.pricing.labels import NodeFacts
from exporter.model.usage import UsageSnapshot

OVERFLOW = "__overflow__"
_Key = TypeVar("_Key")


@dataclass(slots=True)
class PodGauge:
    """What one pod holds now: GPUs, their model, last tick's utilisation (None: unmeasured), idle time and hourly
    cost."""

    workload: str
    gpus: float
    gpu_model: str
    utilization: float | None
    idle_seconds: float
    hourly_cost: float


@dataclass(slots=True)
class AgentHealth:
    """Whether the last pull of a node's agent was booked, and whether that agent could read DCGM."""

    up: bool
    dcgm_up: bool


@dataclass(slots=True)
class Gauges:
    """Point-in-time figures recomputed every tick (and on pod deletion)."""

    allocated_gpus: dict[str, float] = field(default_factory=dict)
    ns_utilization: dict[str, float] = field(default_factory=dict)
    workload_utilization: dict[tuple[str, str], float] = field(default_factory=dict)
    pods: dict[tuple[str, str], PodGauge] = field(default_factory=dict)
    agents: dict[str, AgentHealth] = field(default_factory=dict)
    overflow_pods: dict[str, int] = field(default_factory=dict)
    last_commit: float = 0.0
    tick_duration: float = 0.0

    def show_held(self, held: HeldNow) -> None:
        """Take the GPUs held now (per namespace, per pod, pods folded past the cap) from ``held_now``."""
        self.allocated_gpus, self.pods, self.overflow_pods = held.allocated_gpus, held.pods, held.overflow_pods


def utilization_ratio(amount: UsageAmounts) -> float | None:
    """Used over measured allocated time, to 6 digits (each side of a tick's delta is booked to the nanosecond,
    so the quotient carries that rounding: 7.5 s of 15.000000001, not 0.5); None when nothing was measured."""
    measured = amount.allocated_s - amount.unmeasured_s
    return min(1.0, max(0.0, round(float(amount.used_s / measured), 6))) if measured > 0 else None


def ratios(deltas: Mapping[_Key, UsageAmounts]) -> dict[_Key, float]:
    """The utilisation ratio of each key's delta; keys with nothing measured are left out (no gauge, not 0)."""
    return {k: r for k, v in deltas.items() if (r := utilization_ratio(v)) is not None}


@dataclass(slots=True)
class _PodAcc:
    gpus: float = 0.0
    used: float = 0.0
    measured: float = 0.0
    model: str = "unknown"
    hourly: float = 0.0


@dataclass(frozen=True, slots=True)
class HeldNow:
    """What ``held_now`` computes: GPUs per namespace, pod gauges (bounded), pods folded per namespace."""

    allocated_gpus: dict[str, float]
    pods: dict[tuple[str, str], PodGauge]
    overflow_pods: dict[str, int]


def hourly_rate(*, node: str, model: str | None, mig_profile: str | None, kube: KubeState, pricing: Pricing,
                now: float, booked: Mapping[NodeModel, NodePrice]) -> float:
    """What one GPU-hour of a holder's device costs now, as booking prices it: the node's last booked
    rate (commitments blended in) for a whole GPU of the node's model, else the rules of the pricing
    document in force (instance type, capacity type, pool, MIG listed price, owned hardware's capital)."""
    price = booked.get(NodeModel(node, model)) if model and not mig_profile else None
    if price is not None:
        return price.rate.effective_per_gpu_hour
    pool = kube.pool_of(node) or None
    facts = NodeFacts.from_labels(node, model, labels=kube.nodes.get(node, {}), pool=pool)
    return pricing.rate(facts, at=now, mig_profile=mig_profile).effective_per_gpu_hour


def held_now(latest: Mapping[str, UsageSnapshot], *, kube: KubeState, pricing: Pricing, now: float,
             idle_threshold: float, idle_since: dict[tuple[str, str], float], max_pods_per_namespace: int,
             pod_gone: Callable[[str, str], bool], booked: Mapping[NodeModel, NodePrice] | None = None) -> HeldNow:
    """GPUs held now per namespace and per pod, from the latest snapshots. ``idle_since`` (pod -> when it
    went below the idle threshold) is the one piece of memory across ticks; it is updated in place."""
    alloc: dict[str, float] = {}
    pods: dict[tuple[str, str], _PodAcc] = {}
    rates: dict[tuple[str, str | None, str | None], float] = {}
    for node, snap in latest.items():
        for h in snap.holders:
            if not h.active or pod_gone(h.namespace, h.pod):
                continue
            alloc[h.namespace] = alloc.get(h.namespace, 0.0) + h.fraction
            acc = pods.setdefault((h.namespace, h.pod), _PodAcc(model=h.gpu_model or "unknown"))
            acc.gpus += h.fraction
            if h.utilization is not None:
                acc.used += h.fraction * h.utilization
                acc.measured += h.fraction
            rate_key = (node, h.gpu_model, h.mig_profile)
            hourly = rates.get(rate_key)
            if hourly is None:  # one price per node, model and profile this tick
                hourly = rates[rate_key] = hourly_rate(node=node, model=h.gpu_model, mig_profile=h.mig_profile,
                                                       kube=kube, pricing=pricing, now=now, booked=booked or {})
            acc.hourly += h.fraction * hourly
    gauges: dict[tuple[str, str], PodGauge] = {}
    for key, a in pods.items():
        util = a.used / a.measured if a.measured > 0 else None
        if util is not None and util < idle_threshold:
            since = idle_since.setdefault(key, now)
        elif util is not None:
            idle_since.pop(key, None)
            since = now
        else:
            since = idle_since.get(key, now)
        ns, pod = key
        info = kube.pod(ns, pod)
        gauges[key] = PodGauge(info.workload if info else pod, a.gpus, a.model, util, max(0.0, now - since),
                               a.hourly)
    for key in list(idle_since):
        if key not in gauges:
            del idle_since[key]
    folded_pods, folded = fold_overflow(gauges, max_pods_per_namespace)
    return HeldNow(alloc, folded_pods, folded)


def fold_overflow(pods: dict[tuple[str, str], PodGauge], limit: int) -> tuple[
        dict[tuple[str, str], PodGauge], dict[str, int]]:
    """Bound label cardinality: per namespace keep the ``limit`` most expensive pods as their own series
    and fold the rest into one ``__overflow__`` pod (GPUs and cost summed, idle time the longest)."""
    by_ns: dict[str, list[tuple[str, PodGauge]]] = {}
    for (ns, pod), g in pods.items():
        by_ns.setdefault(ns, []).append((pod, g))
    out: dict[tuple[str, str], PodGauge] = {}
    folded: dict[str, int] = {}
    for ns, items in by_ns.items():
        if len(items) <= limit:
            out.update({(ns, pod): g for pod, g in items})
            continue
        items.sort(key=_most_expensive_first)
        out.update({(ns, pod): g for pod, g in items[: limit - 1]})
        rest = [g for _pod, g in items[limit - 1:]]
        folded[ns] = len(rest)
        out[(ns, OVERFLOW)] = PodGauge(OVERFLOW, sum(g.gpus for g in rest), "mixed", None,
                                       max(g.idle_seconds for g in rest), sum(g.hourly_cost for g in rest))
    return out, folded


def _most_expensive_first(item: tuple[str, PodGauge]) -> float:
    _pod, gauge = item
    return -gauge.hourly_cost
