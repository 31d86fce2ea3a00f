"""Turn agents' cumulative counters into priced, hourly ledger rows: exactly once, every second in one bucket.

Deltas are taken against the high-water marks last committed for each node. A new agent epoch is a reset (the whole
current value is new), never a negative delta; a missed pull loses nothing because the next delta covers the gap; an
out-of-order or repeated snapshot books nothing. The marks advance in memory only after the ledger transaction that
contains them has committed.

Conservation: a delta covers the wall interval between the two snapshots it joins and is spread over the hours of
that interval by their share of it, so each node's allocated + unallocated + unobserved GPU-seconds in every hour
equal its GPUs x that hour's seconds. Time nobody observed (between an epoch's last booked snapshot and the next
epoch's start, or until the node was deleted) is booked as ``unobserved`` capacity, never dropped. A snapshot that
could not be true (a counter advancing faster than the node's GPUs x wall time, used above allocated, a counter
going backwards within an epoch) is refused whole, for that node only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial

from exporter.aggregator.books.commitments import book_unused
from exporter.aggregator.books.evidence import book_evidence
from exporter.aggregator.books.free_devices import book_devices
from exporter.aggregator.books.node_prices import NodeModel, NodePrice, node_prices
from exporter.aggregator.books.priced_rows import (
    UNKNOWN,
    add,
    book_capacity,
    book_unobserved,
    gpus_by_model,
    holder_totals,
    node_facts,
    priced_capacity,
    unmeasured_by_row,
    usage_amounts,
)
from exporter.aggregator.books.rates import FleetNode, Slice, TickRates, fleet_node, slices
from exporter.aggregator.kube.queues import NO_QUEUE
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.rows import FleetFacts
from exporter.aggregator.ledger.store import LedgerState, NodeCounterMark, QuotaEvent, TickWrite
from exporter.model.books import (
    AgentMark,
    BreakdownKey,
    CapacityTotalKey,
    CounterMark,
    NamespaceKey,
    NodeKey,
    UnmeasuredEnergy,
    UsageAmounts,
    UsageKey,
    hour_of,
)
from exporter.model.exact import arrived, book
from exporter.model.plausibility import counter_advance, counter_position, implausible
from exporter.model.pricing.document import Pricing
from exporter.model.usage import UsageSnapshot

__all__ = ["Books", "NodeGone", "NodeModel", "NodePrice", "Prepared", "hour_of"]

UNALLOCATED_PREFIX = "__unallocated__/"
UNOBSERVED_PREFIX = "__unobserved__/"
UNMEASURED_ENERGY = "__unmeasured_energy__"  # the hwm key of the node's unmeasured-energy GPU-seconds


@dataclass(slots=True)
class NodeMarks:
    """Where one node's books stand, and the GPUs it was last seen with (for gaps nobody observed)."""

    mark: AgentMark
    counters: dict[str, CounterMark] = field(default_factory=dict)
    gpus_by_model: dict[str, int] = field(default_factory=dict)
    held_mig: tuple[tuple[str, str, float], ...] = ()  # (model, profile, fraction) of MIG instances held


@dataclass(frozen=True, slots=True)
class NodeGone:
    """A node deleted from the API: its books close at ``deleted_at`` and its marks are pruned."""

    node: str
    deleted_at: float
    gpus: int
    gpu_model: str


@dataclass(slots=True)
class Prepared:
    """One tick's bookings, not yet committed."""

    write: TickWrite = field(default_factory=TickWrite)
    marks: dict[str, NodeMarks] = field(default_factory=dict)
    ns_delta: dict[str, UsageAmounts] = field(default_factory=dict)
    workload_delta: dict[tuple[str, str], UsageAmounts] = field(default_factory=dict)
    unpriced: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    rejected: dict[str, str] = field(default_factory=dict)  # node -> reason
    pruned: list[str] = field(default_factory=list)
    node_prices: dict[NodeModel, NodePrice] = field(default_factory=dict)
    resets: int = 0
    stale: int = 0


class Books:
    """High-water marks and running totals, mirrored from the ledger."""

    def __init__(self, state: LedgerState) -> None:
        self.marks: dict[str, NodeMarks] = {
            node: NodeMarks(mark, dict(state.hwm.get(node, {}))) for node, mark in state.agents.items()}
        self.totals = dict(state.totals)
        self.unallocated_totals = dict(state.unallocated_totals)
        self.unobserved_totals = dict(state.unobserved_totals)
        self.breakdown = dict(state.breakdown)
        self.unused_commitment_totals = dict(state.unused_commitment_totals)
        self.commitment_marks = dict(state.commitment_marks)
        self.node_billing = dict(state.node_billing)
        self.unmeasured_energy = dict(state.unmeasured_energy)
        self.node_prices: dict[NodeModel, NodePrice] = {}
        self.unpriced_seconds: dict[str, float] = defaultdict(float)
        self.resets_total = 0
        self.fleet_written: dict[str, FleetFacts] = {}  # what the ledger's fleet rows say of this book's nodes
        self.others: dict[str, FleetFacts] = {}  # nodes other aggregators book (shards), from the ledger
        self.books_commitments = True  # unused commitments: booked by one aggregator of the cluster only

    def acked(self, node: str) -> float | None:
        """The agent timestamp of the node's last committed snapshot, sent back as its ack; None: nothing booked yet."""
        m = self.marks.get(node)
        return m.mark.booked_ts if m else None

    # -- one tick ------------------------------------------------------------------------------------
    def prepare(self, snapshots: list[UsageSnapshot], kube: KubeState, *, pricing: Pricing,
                gone: list[NodeGone] | None = None, now: float | None = None) -> Prepared:
        """Book one tick. ``now`` (the aggregator's clock; else the newest snapshot) ends the commitments'
        unused time booked this tick."""
        out = Prepared()
        gone = gone or []
        rates = TickRates(pricing, self._fleet(snapshots, kube, gone=gone))
        for snap in snapshots:
            _NodeBooking(self, out, kube=kube, rates=rates, snap=snap).run()
        for g in gone:
            self._close_node(out, g, kube=kube, rates=rates)
        w = out.write
        for uid, new in kube.new_quota_rejections.items():
            seen = kube.quota_event_counts.get(uid, new)
            w.quota_events.append(QuotaEvent(uid, seen.namespace, seen.fired, kube.quota_event_seen.get(uid, 0.0)))
        end = now if now is not None else max((s.timestamp for s in snapshots), default=None)
        if end is not None:
            starts = [m.mark.booked_ts for m in self.marks.values()] + list(w.books_since.values())
            if self.books_commitments:
                book_unused(w, rates=rates, marks=self.commitment_marks, first=min(starts, default=end), now=end)
            out.node_prices = node_prices(rates.fleet, rates=rates, at=end)
        return out

    def _fleet(self, snapshots: list[UsageSnapshot], kube: KubeState, *, gone: list[NodeGone]) -> list[FleetNode]:
        """Every node the books know, with the GPUs of its latest snapshot (this tick's when it has one)."""
        latest = {node: (m.gpus_by_model, m.held_mig) for node, m in self.marks.items()}
        for snap in snapshots:
            latest[snap.node] = (gpus_by_model(snap, kube), tuple(
                (h.gpu_model or "", h.mig_profile, h.fraction) for h in snap.holders if h.active and h.mig_profile))
        for node, facts in self.others.items():  # the rest of the cluster (shards), as last booked
            latest.setdefault(node, (dict(facts.gpus_by_model), facts.held_mig))
        for g in gone:
            latest.pop(g.node, None)
        fleet = []
        for node, (by_model, held) in sorted(latest.items()):
            for model, gpus in sorted(by_model.items()):
                fleet.append(fleet_node(node_facts(kube, node, model=model), gpus,
                                        held_mig=((p, f) for m, p, f in held if m in ("", model))))
        return fleet

    def _close_node(self, out: Prepared, gone: NodeGone, *, kube: KubeState, rates: TickRates) -> None:
        """Book the time since the node's last snapshot as unobserved, then forget its marks."""
        nm = out.marks.get(gone.node) or self.marks.get(gone.node)
        if nm is None:
            return
        gpus = nm.gpus_by_model or ({gone.gpu_model or UNKNOWN: gone.gpus} if gone.gpus else {})
        book_unobserved(out.write, node=gone.node, kube=kube, rates=rates, gpus_by_model=gpus,
                        start=nm.mark.booked_ts, end=gone.deleted_at)
        out.write.pruned_nodes.append(gone.node)
        out.pruned.append(gone.node)
        out.marks.pop(gone.node, None)

    def apply(self, prepared: Prepared) -> None:
        """Advance the in-memory marks and totals; call only after the ledger committed."""
        self.marks.update(prepared.marks)
        self.fleet_written.update(prepared.write.fleet)
        for node in prepared.pruned:
            self.marks.pop(node, None)
            self.fleet_written.pop(node, None)
        w = prepared.write
        for k, v in w.totals.items():
            add(self.totals, k, amount=v)
        for ck, cv in w.unallocated_totals.items():
            add(self.unallocated_totals, ck, amount=cv)
        for ok, ov in w.unobserved_totals.items():
            add(self.unobserved_totals, ok, amount=ov)
        for bk, bv in w.breakdown.items():
            add(self.breakdown, bk, amount=bv)
        for uk, uv in w.unused_commitment_totals.items():
            add(self.unused_commitment_totals, uk, amount=uv)
        for nk, nv in w.unmeasured_energy.items():
            add(self.unmeasured_energy, nk, amount=nv)
        self.commitment_marks.update(w.commitment_marks)
        self.node_billing.update(w.node_billing)
        self.node_prices = dict(prepared.node_prices)
        for model, s in prepared.unpriced.items():
            self.unpriced_seconds[model] += s
        self.resets_total += prepared.resets


@dataclass(slots=True)
class _NodeBooking:
    """One snapshot of one node: check it could be true, then book its deltas (or refuse it whole)."""

    books: Books
    out: Prepared
    kube: KubeState
    rates: TickRates
    snap: UsageSnapshot

    def run(self) -> None:
        snap, out = self.snap, self.out
        node = snap.node
        old = out.marks.get(node) or self.books.marks.get(node)
        same_epoch = old is not None and old.mark.epoch == snap.epoch
        if old is not None and same_epoch and snap.seq <= old.mark.seq:
            out.stale += 1
            return
        prev = old.counters if (old is not None and same_epoch) else {}
        start: float | None = None  # where this snapshot's deltas begin; None = unknown (an agent without started_at)
        if old is not None and same_epoch:
            start = old.mark.booked_ts
        elif snap.started_at is not None:
            start = snap.started_at
        counters = self._counters()
        deltas: dict[str, CounterMark] = {}
        for key, cur in counters.items():
            booked = prev.get(key)
            if booked == cur:
                continue
            d = counter_advance(booked, cur)
            if d is None:
                out.rejected[node] = "counter_decreased"
                return
            deltas[key], counters[key] = d, counter_position(booked, cur)  # a mark never goes back
        gpus = gpus_by_model(snap, self.kube)
        reason = self._implausible(deltas, start=start, gpus=sum(gpus.values()))
        if reason:
            out.rejected[node] = reason
            return
        w = out.write
        if old is not None and not same_epoch:
            out.resets += 1
            w.hwm_reset_nodes.append(node)
            if snap.started_at is not None:  # between the old epoch's last booking and this one's start
                book_unobserved(w, node=node, kube=self.kube, rates=self.rates,
                                gpus_by_model=gpus or (old.gpus_by_model if old else {}),
                                start=old.mark.booked_ts, end=snap.started_at)
        parts = slices(snap.timestamp if start is None else start, snap.timestamp)
        self._book(deltas, parts=parts, before=prev, after=counters)  # the counters' positions: see usage_amounts
        book_devices(w, self.kube, node=node, models=gpus, hours=(p.hour for p in parts), at=snap.timestamp)
        for key, cur in counters.items():
            if key in deltas:
                w.hwm.append(NodeCounterMark(node, key, cur))
        if same_epoch:  # counters the agent dropped after our ack: forget their marks too
            w.hwm_deleted.extend((node, key) for key in prev if key not in counters)
        mark = AgentMark(snap.epoch, snap.timestamp, snap.seq)
        w.agents[node] = mark
        if old is None:
            w.books_since[node] = snap.timestamp if start is None else start
        held = tuple((h.gpu_model or "", h.mig_profile, h.fraction) for h in snap.holders if h.active and h.mig_profile)
        out.marks[node] = marks = NodeMarks(mark, counters, gpus or (old.gpus_by_model if old else {}), held)
        fleet = FleetFacts(tuple(sorted(marks.gpus_by_model.items())), held)
        if self.books.fleet_written.get(node) != fleet:
            w.fleet[node] = fleet
        billing = self.kube.nodes.get(node)
        if billing is not None:
            facts = node_facts(self.kube, node, model="")
            known = (facts.instance_type or "", str(facts.capacity_type))
            if self.books.node_billing.get(node) != known:
                w.node_billing[node] = known

    def _counters(self) -> dict[str, CounterMark]:
        snap = self.snap
        out = {h.key(): CounterMark(allocated_s=h.allocated_s, used_s=h.used_s, unmeasured_s=h.unmeasured_s,
                                        energy_j=h.energy_j, split_s=h.split_s) for h in snap.holders}
        for u in snap.unallocated:
            out[UNALLOCATED_PREFIX + u.gpu_model] = CounterMark(allocated_s=u.seconds, energy_j=u.energy_j)
        for u in snap.unobserved:
            out[UNOBSERVED_PREFIX + u.gpu_model] = CounterMark(allocated_s=u.seconds, energy_j=u.energy_j)
        if snap.unmeasured_energy_s > 0:
            out[UNMEASURED_ENERGY] = CounterMark(allocated_s=snap.unmeasured_energy_s)
        return out

    def _implausible(self, deltas: dict[str, CounterMark], *, start: float | None, gpus: int) -> str:
        """The capacity checks over every counter but the unmeasured-energy one, which is checked alone (its
        GPU-seconds overlap the others')."""
        wall = None if start is None else self.snap.timestamp - start
        gap = deltas.get(UNMEASURED_ENERGY)
        return implausible([d for k, d in deltas.items() if k != UNMEASURED_ENERGY], wall=wall,
                           gpus=max(gpus, self.kube.gpus_of_node(self.snap.node)),
                           unmeasured_energy_s=gap.allocated_s if gap else 0.0)

    def _book(self, deltas: dict[str, CounterMark], *, parts: list[Slice], before: dict[str, CounterMark],
              after: dict[str, CounterMark]) -> None:
        snap, out, kube, rates = self.snap, self.out, self.kube, self.rates
        w = out.write
        node, currency = snap.node, rates.pricing.currency
        pool = kube.pool_of(node)
        node_model = kube.model_of_node(node)
        gap, dark = deltas.get(UNMEASURED_ENERGY), unmeasured_by_row(deltas, gap_key=UNMEASURED_ENERGY)
        for h in snap.holders:
            d = deltas.get(key := h.key())
            info = kube.pod(h.namespace, h.pod)
            workload = info.workload if info else h.pod
            model = h.gpu_model or node_model or UNKNOWN
            book_evidence(w.evidence, h, d=d, parts=parts, workload=workload, node=node, model=model)
            if d is None or (d.allocated_s <= 0 and d.energy_j <= 0):
                continue
            priority, queue = (info.priority_class, kube.queue_of(info)) if info else ("", NO_QUEUE)
            facts = rates.facts_of(node, model, make=partial(node_facts, kube, node, model=model))
            rates_of_parts = [rates.rate(facts, mig_profile=h.mig_profile, at=part.start) for part in parts]
            for part, rate in zip(parts, rates_of_parts, strict=True):
                if not rate.known:
                    out.unpriced[model] += d.allocated_s * part.share
            total: UsageAmounts | None = None  # the holder's parts summed (one part: that part, no new object)
            booked = usage_amounts(d, parts=parts, rates=rates_of_parts, span=(before.get(key), after.get(key)),
                                   unmeasured_energy_s=dark.get(key, 0.0))
            for part, amount in zip(parts, booked, strict=True):
                add(w.usage, UsageKey(part.hour, h.namespace, h.pod, workload, node, pool, model, h.mig_profile or "",
                                       priority, currency, h.claim, h.sharing, *queue), amount=amount)
                total = amount if total is None else total + amount
            if total is None:
                continue
            breakdown, ns_totals = holder_totals(d, total)
            add(w.breakdown, BreakdownKey(h.namespace, pool, priority, currency), amount=breakdown)
            add(w.totals, NamespaceKey(h.namespace, currency), amount=ns_totals)
            add(out.ns_delta, h.namespace, amount=total)
            add(out.workload_delta, (h.namespace, workload), amount=total)
        for unobserved, counters, prefix in ((False, snap.unallocated, UNALLOCATED_PREFIX),
                                             (True, snap.unobserved, UNOBSERVED_PREFIX)):
            for u in counters:
                if (d := deltas.get(ck := prefix + u.gpu_model)) is None or (d.allocated_s <= 0 and d.energy_j <= 0):
                    continue
                model = u.gpu_model if u.gpu_model != UNKNOWN else (node_model or UNKNOWN)
                book_capacity(w, unobserved=unobserved, key=CapacityTotalKey(node, pool, model, currency),
                              hourly=priced_capacity(rates, node_facts(kube, node, model=model), seconds=d.allocated_s,
                                                     energy_j=d.energy_j, parts=parts, unmeasured_energy_s=dark.get(
                                                         ck, 0.0), span=(before.get(ck), after.get(ck))))
        if gap is not None and gap.allocated_s > 0:
            add(w.unmeasured_energy, NodeKey(node), amount=UnmeasuredEnergy(seconds=book(arrived(gap.allocated_s))))
