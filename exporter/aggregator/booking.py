"""Turn agents' cumulative counters into priced, hourly ledger rows: exactly once.

Deltas are taken against the high-water marks last committed for each agent. A new agent epoch is a
reset (the whole current value is new), never a negative delta; a missed pull loses nothing because
the next delta covers the gap; an out-of-order or repeated snapshot books nothing. The marks advance
in memory only after the ledger transaction that contains them has committed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from exporter.aggregator.kubestate import KubeState
from exporter.aggregator.ledger import LedgerState, TickWrite
from exporter.model.accounting import Usage, cost_of, counter_delta
from exporter.model.pricing import Pricing
from exporter.model.usage import UsageSnapshot

UNALLOCATED_PREFIX = "__unallocated__/"
UNKNOWN = "unknown"


@dataclass(slots=True)
class AgentMarks:
    epoch: str
    booked_ts: float
    seq: int
    values: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)


@dataclass(slots=True)
class Prepared:
    """One tick's bookings, not yet committed."""

    write: TickWrite = field(default_factory=TickWrite)
    marks: dict[str, AgentMarks] = field(default_factory=dict)
    ns_delta: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0, 0.0]))
    workload_delta: dict[tuple[str, str], list[float]] = field(
        default_factory=lambda: defaultdict(lambda: [0.0, 0.0, 0.0]))
    unpriced: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    resets: int = 0
    stale: int = 0


@dataclass(slots=True)
class _NodeMarks:
    """One snapshot's walk over a node's counters: deltas against the marks, and the marks moved."""

    node: str
    prev: dict[str, tuple[float, float, float, float]]
    values: dict[str, tuple[float, float, float, float]]
    hwm_out: list[tuple[str, str, float, float, float, float]]
    seen: set[str] = field(default_factory=set)

    def advance(self, key: str, cur: tuple[float, float, float, float]) -> Usage | None:
        """The delta since this counter's mark, or None when it did not move."""
        self.seen.add(key)
        prev = self.prev.get(key)
        if prev == cur:
            return None
        delta, _reset = counter_delta(Usage(*prev) if prev else None, Usage(*cur), True)
        self.values[key] = cur
        self.hwm_out.append((self.node, key, *cur))
        return delta


def hour_of(ts: float) -> int:
    return int(ts // 3600) * 3600


class Books:
    """High-water marks and running totals, mirrored from the ledger."""

    def __init__(self, state: LedgerState) -> None:
        self.marks: dict[str, AgentMarks] = {
            node: AgentMarks(epoch, ts, seq, dict(state.hwm.get(node, {})))
            for node, (epoch, ts, seq) in state.agents.items()}
        self.totals: dict[tuple[str, str], list[float]] = {k: list(v) for k, v in state.totals.items()}
        self.unallocated_totals: dict[tuple[str, str, str, str], list[float]] = {
            k: list(v) for k, v in state.unallocated_totals.items()}
        self.unpriced_seconds: dict[str, float] = defaultdict(float)
        self.breakdown: dict[tuple[str, str, str, str], list[float]] = {k: list(v) for k, v in state.breakdown.items()}
        self.resets_total = 0

    def acked(self, node: str) -> float | None:
        m = self.marks.get(node)
        return m.booked_ts if m else None

    def prepare(self, snapshots: list[UsageSnapshot], kube: KubeState, pricing: Pricing) -> Prepared:
        out = Prepared()
        w = out.write
        currency = pricing.currency
        for snap in snapshots:
            node = snap.node
            old = self.marks.get(node)
            same_epoch = old is not None and old.epoch == snap.epoch
            if same_epoch and old is not None and snap.seq <= old.seq:
                out.stale += 1
                continue
            if old is not None and not same_epoch:
                out.resets += 1
                w.hwm_reset_nodes.append(node)
            prev_values = old.values if (same_epoch and old is not None) else {}
            values = dict(prev_values)
            hour = hour_of(snap.timestamp)
            pool = kube.pool_of(node)
            node_model = kube.model_of_node(node)
            marks = _NodeMarks(node, prev_values, values, w.hwm)
            for h in snap.holders:
                delta = marks.advance(h.key(), (h.allocated_s, h.used_s, h.unmeasured_s, h.energy_j))
                if delta is None or (delta.allocated <= 0 and delta.energy_j <= 0):
                    continue
                info = kube.pod(h.namespace, h.pod)
                workload = info.workload if info else h.pod
                priority = info.priority_class if info else ""
                model = h.gpu_model or node_model or UNKNOWN
                price = pricing.price(model, h.mig_profile, pool)
                if not price.known:
                    out.unpriced[model] += delta.allocated
                idle = delta.idle
                cost = cost_of(delta.allocated, price.per_gpu_hour)
                idle_cost = cost_of(idle, price.per_gpu_hour)
                rk = (hour, h.namespace, h.pod, workload, node, pool, model, h.mig_profile or "", priority, currency)
                row = w.usage.setdefault(rk, [0.0] * 7)
                for i, v in enumerate((delta.allocated, delta.used, delta.unmeasured, idle, cost, idle_cost,
                                       delta.energy_j)):
                    row[i] += v
                brk = w.breakdown.setdefault((h.namespace, pool, priority, currency), [0.0, 0.0])
                brk[0] += delta.allocated
                brk[1] += cost
                tot = w.totals.setdefault((h.namespace, currency), [0.0] * 5)
                for i, v in enumerate((delta.allocated, delta.used, delta.unmeasured, cost, idle_cost)):
                    tot[i] += v
                nd = out.ns_delta[h.namespace]
                wd = out.workload_delta[(h.namespace, workload)]
                for acc in (nd, wd):
                    acc[0] += delta.allocated
                    acc[1] += delta.used
                    acc[2] += delta.unmeasured
            for u in snap.unallocated:
                delta = marks.advance(UNALLOCATED_PREFIX + u.gpu_model, (u.seconds, 0.0, 0.0, 0.0))
                if delta is None or delta.allocated <= 0:
                    continue
                model = u.gpu_model if u.gpu_model != UNKNOWN else (node_model or UNKNOWN)
                price = pricing.price(model, None, pool)
                uk = (hour, node, pool, model, currency)
                ucost = cost_of(delta.allocated, price.per_gpu_hour)
                urow = w.unallocated.setdefault(uk, [0.0, 0.0])
                urow[0] += delta.allocated
                urow[1] += ucost
                trow = w.unallocated_totals.setdefault((node, pool, model, currency), [0.0, 0.0])
                trow[0] += delta.allocated
                trow[1] += ucost
            for key in list(values):
                if key not in marks.seen:  # the agent dropped it after our ack: forget the mark too
                    del values[key]
                    if same_epoch:
                        w.hwm_deleted.append((node, key))
            w.agents.append((node, snap.epoch, snap.timestamp, snap.seq))
            out.marks[node] = AgentMarks(snap.epoch, snap.timestamp, snap.seq, values)
        for uid, (ns, count) in kube.new_quota_rejections.items():
            w.quota_events.append((uid, ns, kube.quota_event_counts.get(uid, (ns, count))[1]))
        return out

    def apply(self, prepared: Prepared) -> None:
        """Advance the in-memory marks and totals; call only after the ledger committed."""
        self.marks.update(prepared.marks)
        for k, v in prepared.write.totals.items():
            tot = self.totals.setdefault(k, [0.0] * 5)
            for i in range(5):
                tot[i] += v[i]
        for k2, (secs, ucost) in prepared.write.unallocated_totals.items():
            acc = self.unallocated_totals.setdefault(k2, [0.0, 0.0])
            acc[0] += secs
            acc[1] += ucost
        for bk, (secs, bcost) in prepared.write.breakdown.items():
            acc2 = self.breakdown.setdefault(bk, [0.0, 0.0])
            acc2[0] += secs
            acc2[1] += bcost
        for model, s in prepared.unpriced.items():
            self.unpriced_seconds[model] += s
        self.resets_total += prepared.resets
