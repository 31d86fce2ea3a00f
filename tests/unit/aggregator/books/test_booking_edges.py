"""Booking's edges by hand: closing a deleted node's books (from this tick's snapshot, for the GPUs it showed,
else those its deletion reported); what a restart reloads and ``apply`` adds; the fleet commitments are
blended over; every counter's fields, the model a node's label names, a row's queue, MIG price and evidence."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.books.booking import Books, NodeGone, NodeMarks, NodeModel, NodePrice, Prepared
from exporter.aggregator.kube.state import KubeState, PodInfo
from exporter.aggregator.ledger.rows import FleetFacts
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.books import (
    AgentMark,
    BreakdownKey,
    BreakdownTotals,
    CapacityAmounts,
    CapacityKey,
    CapacityTotalKey,
    CommitmentTotalKey,
    CounterMark,
    NamespaceKey,
    NamespaceTotals,
    NodeKey,
    UnmeasuredEnergy,
)
from exporter.model.pricing.document import parse_pricing
from exporter.model.pricing.labels import CapacityType
from exporter.model.pricing.resolve import GpuRate, PriceSource
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot

T0 = 1_800_000_000.0  # an hour boundary
H100 = "NVIDIA H100 80GB HBM3"
PRICING = parse_pricing(f'default_price: 1\nmodels: {{"{H100}": 3.6}}\n', "p.yaml")


def _snap(seq: int, ts: float, *, gpus: int) -> UsageSnapshot:
    """Node n1 with ``gpus`` H100s in its inventory and nobody holding one."""
    return UsageSnapshot(node="n1", epoch="e1", timestamp=ts, seq=seq, started_at=T0,
                         capacity=[GpuCapacity(gpu_uuid=f"GPU-{i}", gpu_model=H100) for i in range(gpus)])


def _unobserved_seconds(books: Books, *, this_tick: float, gone: NodeGone) -> dict[str, Decimal]:
    """Book n1 at T0 + 100 (2 GPUs), then a tick with its snapshot at ``this_tick`` and its deletion."""
    kube = KubeState()
    books.apply(books.prepare([_snap(1, T0 + 100, gpus=2)], kube, pricing=PRICING))
    p = books.prepare([_snap(2, this_tick, gpus=2)], kube, pricing=PRICING, gone=[gone])
    assert p.pruned == ["n1"] and "n1" not in p.marks  # nothing of the node is left to apply
    return {key.gpu_model: amount.seconds for key, amount in p.write.unobserved.items()}


def test_a_node_booked_and_deleted_in_one_tick_is_unobserved_from_this_ticks_snapshot() -> None:
    """Its snapshot at T0 + 200 showed 2 GPUs; deleted at T0 + 260: 2 x 60 = 120 GPU-seconds, not from the
    previous tick's T0 + 100, nor for the 8 GPUs the deletion reported."""
    seconds = _unobserved_seconds(Books(LedgerState()), this_tick=T0 + 200,
                                  gone=NodeGone("n1", deleted_at=T0 + 260, gpus=8, gpu_model=H100))
    assert seconds == {H100: Decimal(120)}


def test_a_node_that_never_showed_gpus_closes_with_the_gpus_its_deletion_reported() -> None:
    """No inventory, no label: the 4 GPUs the deletion names, of its model (else "unknown"), for 60 s each."""
    for model, booked_as in ((H100, H100), ("", "unknown")):
        books, kube = Books(LedgerState()), KubeState()
        books.apply(books.prepare([_snap(1, T0 + 200, gpus=0)], kube, pricing=PRICING))
        p = books.prepare([], kube, pricing=PRICING, gone=[NodeGone("n1", deleted_at=T0 + 260, gpus=4,
                                                                    gpu_model=model)])
        assert {key: amount.seconds for key, amount in p.write.unobserved.items()} == {
            CapacityKey(int(T0), "n1", "", booked_as, "USD"): Decimal(240)}
        assert p.pruned == ["n1"]


def test_a_node_deleted_without_gpus_or_books_closes_with_nothing_booked() -> None:
    """No inventory and a deletion reporting 0 GPUs: nothing unobserved; a node never booked: not even pruned."""
    books, kube = Books(LedgerState()), KubeState()
    books.apply(books.prepare([_snap(1, T0 + 200, gpus=0)], kube, pricing=PRICING))
    p = books.prepare([], kube, pricing=PRICING, gone=[NodeGone("n1", deleted_at=T0 + 260, gpus=0, gpu_model="")])
    assert p.write.unobserved == {} and p.pruned == ["n1"]
    assert Books(LedgerState()).prepare([], kube, pricing=PRICING, gone=[
        NodeGone("n2", deleted_at=T0 + 260, gpus=4, gpu_model=H100)]).pruned == []


NS = NamespaceKey("ns", "USD")
CAP = CapacityTotalKey("n1", "", H100, "USD")
BREAKDOWN = BreakdownKey("ns", "", "", "USD")
COMMITMENT = CommitmentTotalKey("h100-1yr", H100, "USD")
NODE = NodeKey("n1")


def _state() -> LedgerState:
    """A ledger with one of everything booked already."""
    return LedgerState(agents={"n1": AgentMark("e1", 100.0, 3)}, hwm={"n1": {"k": CounterMark(allocated_s=5.0)}},
                       totals={NS: NamespaceTotals(allocated_s=Decimal(1))},
                       unallocated_totals={CAP: CapacityAmounts(seconds=Decimal(2))},
                       unobserved_totals={CAP: CapacityAmounts(seconds=Decimal(3))},
                       breakdown={BREAKDOWN: BreakdownTotals(allocated_s=Decimal(4))},
                       unused_commitment_totals={COMMITMENT: CapacityAmounts(seconds=Decimal(5))},
                       commitment_marks={"h100-1yr": 50.0}, node_billing={"n1": ("p5.48xlarge", "spot")},
                       unmeasured_energy={NODE: UnmeasuredEnergy(seconds=Decimal(6))})


def test_a_restart_resumes_every_table_from_the_ledger() -> None:
    books = Books(_state())
    assert books.marks == {"n1": NodeMarks(AgentMark("e1", 100.0, 3), {"k": CounterMark(allocated_s=5.0)})}
    assert (books.acked("n1"), books.acked("n2")) == (100.0, None)
    assert books.totals == {NS: NamespaceTotals(allocated_s=Decimal(1))}
    assert books.unallocated_totals == {CAP: CapacityAmounts(seconds=Decimal(2))}
    assert books.unobserved_totals == {CAP: CapacityAmounts(seconds=Decimal(3))}
    assert books.breakdown == {BREAKDOWN: BreakdownTotals(allocated_s=Decimal(4))}
    assert books.unused_commitment_totals == {COMMITMENT: CapacityAmounts(seconds=Decimal(5))}
    assert books.commitment_marks == {"h100-1yr": 50.0}
    assert books.node_billing == {"n1": ("p5.48xlarge", "spot")}
    assert books.unmeasured_energy == {NODE: UnmeasuredEnergy(seconds=Decimal(6))}
    # what only this process counts starts empty: resets, unpriced seconds, prices, the fleet rows seen
    assert (books.resets_total, dict(books.unpriced_seconds), books.node_prices) == (0, {}, {})
    assert (books.fleet_written, books.others, books.books_commitments) == ({}, {}, True)
    # an agent whose counters were all deleted (none left in the ledger) resumes with no marks
    assert Books(LedgerState(agents={"n2": AgentMark("e2", 7.0, 1)})).marks == {
        "n2": NodeMarks(AgentMark("e2", 7.0, 1), {})}


def test_apply_adds_every_table_of_a_tick_and_a_second_tick_again() -> None:
    """Each total grows by the tick's amount per apply; marks, billing and prices are replaced; a pruned node
    leaves marks and fleet rows even when the same tick wrote them."""
    books = Books(_state())
    rate = GpuRate(4.0, 4.0, PriceSource.MODEL, CapacityType.ON_DEMAND, known=True)
    p = Prepared(marks={"n1": NodeMarks(AgentMark("e1", 200.0, 4)), "n2": NodeMarks(AgentMark("e9", 9.0, 1))},
                 pruned=["n1"], node_prices={NodeModel("n2", H100): NodePrice(H100, rate, gpus=8)}, resets=1)
    p.unpriced["NVIDIA L4"] = 30.0
    w = p.write
    w.totals[NS] = NamespaceTotals(allocated_s=Decimal(10), cost=Decimal(1))
    w.unallocated_totals[CAP] = CapacityAmounts(seconds=Decimal(20))
    w.unobserved_totals[CAP] = CapacityAmounts(seconds=Decimal(30))
    w.breakdown[BREAKDOWN] = BreakdownTotals(allocated_s=Decimal(40))
    w.unused_commitment_totals[COMMITMENT] = CapacityAmounts(seconds=Decimal(50))
    w.unmeasured_energy[NODE] = UnmeasuredEnergy(seconds=Decimal(60))
    w.commitment_marks["h100-1yr"] = 150.0
    w.node_billing["n2"] = ("g5.xlarge", "on-demand")
    w.fleet.update({"n1": FleetFacts(((H100, 8),)), "n2": FleetFacts(((H100, 2),))})
    for tick in (1, 2):
        books.apply(p)
        assert books.totals == {NS: NamespaceTotals(allocated_s=Decimal(1 + 10 * tick), cost=Decimal(tick))}
        assert books.unallocated_totals == {CAP: CapacityAmounts(seconds=Decimal(2 + 20 * tick))}
        assert books.unobserved_totals == {CAP: CapacityAmounts(seconds=Decimal(3 + 30 * tick))}
        assert books.breakdown == {BREAKDOWN: BreakdownTotals(allocated_s=Decimal(4 + 40 * tick))}
        assert books.unused_commitment_totals == {COMMITMENT: CapacityAmounts(seconds=Decimal(5 + 50 * tick))}
        assert books.unmeasured_energy == {NODE: UnmeasuredEnergy(seconds=Decimal(6 + 60 * tick))}
        assert books.unpriced_seconds == {"NVIDIA L4": 30.0 * tick}
        assert books.resets_total == tick
    assert books.commitment_marks == {"h100-1yr": 150.0}
    assert books.node_billing == {"n1": ("p5.48xlarge", "spot"), "n2": ("g5.xlarge", "on-demand")}
    assert books.node_prices == {NodeModel("n2", H100): NodePrice(H100, rate, gpus=8)}
    assert books.node_prices is not p.node_prices  # a copy: the next tick's prices do not alter these
    assert set(books.marks) == {"n2"} and set(books.fleet_written) == {"n2"}


def test_pruning_a_node_the_books_never_marked_is_harmless() -> None:
    books = Books(LedgerState())
    books.apply(Prepared(pruned=["n7"]))
    assert books.marks == {} and books.fleet_written == {}


def _mig(profile: str, fraction: float, *, model: str | None, active: bool = True) -> HolderCounters:
    return HolderCounters(namespace="ns", pod=profile, container="c", device_id=profile, gpu_model=model,
                          mig_profile=profile or None, fraction=fraction, active=active, allocated_s=0.0,
                          used_s=0.0, unmeasured_s=0.0)


def test_the_fleet_counts_held_mig_instances_by_model_and_the_other_shards_nodes() -> None:
    """n1 has an H100 and an L4: an active 1g.10gb on the H100 counts for the H100 only, a 2g.20gb whose model
    the agent did not say counts for both, an inactive 3g.40gb and a whole-GPU holder for neither. n9 (booked by
    another shard) counts as last booked; n1's own row from that shard is older than this snapshot."""
    books = Books(LedgerState())
    books.others = {"n9": FleetFacts(((H100, 4),), ((H100, "1g.10gb", 1 / 7),)), "n1": FleetFacts(((H100, 8),))}
    snap = UsageSnapshot(node="n1", epoch="e1", timestamp=T0, holders=[
        _mig("1g.10gb", 1 / 7, model=H100), _mig("2g.20gb", 2 / 7, model=None),
        _mig("3g.40gb", 3 / 7, model=H100, active=False), _mig("", 1.0, model="NVIDIA L4")],
        capacity=[GpuCapacity(gpu_uuid="GPU-0", gpu_model=H100), GpuCapacity(gpu_uuid="GPU-1", gpu_model="NVIDIA L4")])
    fleet = books._fleet([snap], KubeState(), gone=[NodeGone("n5", deleted_at=T0, gpus=1, gpu_model=H100)])
    assert [(n.facts.name, n.facts.gpu_model, n.gpus, n.held_mig) for n in fleet] == [
        ("n1", H100, 1, {"1g.10gb": 1 / 7, "2g.20gb": 2 / 7}), ("n1", "NVIDIA L4", 1, {"2g.20gb": 2 / 7}),
        ("n9", H100, 4, {"1g.10gb": 1 / 7})]


def test_every_counter_of_a_snapshot_is_booked_under_the_model_its_node_is_labelled_with() -> None:
    """An agent that names no model (holder) or "unknown" (capacity): the node's product label names it. The
    holder's unmeasured seconds, the unobserved counter's joules and the node's 0.5 s without an energy reading
    (under a second, and still counted) are all booked."""
    kube = KubeState()
    kube.nodes["n1"] = {"nvidia.com/gpu.product": H100}
    holder = HolderCounters(namespace="ns", pod="p", container="c", device_id="GPU-0", fraction=1.0,
                            allocated_s=60.0, used_s=20.0, unmeasured_s=10.0)
    snap = UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 60, seq=1, started_at=T0, holders=[holder],
                         unallocated=[UnallocatedCounter(gpu_model="unknown", seconds=30.0)],
                         unobserved=[UnallocatedCounter(gpu_model=H100, seconds=20.0, energy_j=50.0)],
                         unmeasured_energy_s=0.5)
    w = Books(LedgerState()).prepare([snap], kube, pricing=PRICING).write
    ((usage_key, usage),) = w.usage.items()
    assert (usage_key.gpu_model, usage.allocated_s, usage.unmeasured_s, usage.idle_s) == (
        H100, Decimal(60), Decimal(10), Decimal(30))
    assert {k.gpu_model: a.seconds for k, a in w.unallocated.items()} == {H100: Decimal(30)}
    assert [a.energy_j for a in w.unobserved.values()] == [Decimal(50)]
    assert w.unmeasured_energy == {NodeKey("n1"): UnmeasuredEnergy(seconds=Decimal("0.5"))}


def test_a_labelled_gpu_count_bounds_a_node_without_inventory_and_widens_a_smaller_one() -> None:
    """A GPU-count label of 1 and no inventory: a holder 1000 s further after 60 s is refused (1 GPU x 60 s).
    A label of 8 over an inventory of 1 (GPUs the agent cannot see): 400 s in 60 s is within 8 x 60 s."""
    def held(seconds: float, *, inventory: int) -> UsageSnapshot:
        holder = HolderCounters(namespace="ns", pod="p", container="c", device_id="GPU-0", fraction=1.0,
                                allocated_s=seconds, used_s=0.0, unmeasured_s=0.0)
        return UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 60, seq=1, started_at=T0, holders=[holder],
                             capacity=[GpuCapacity(gpu_uuid=f"GPU-{i}", gpu_model=H100) for i in range(inventory)])

    kube = KubeState()
    kube.nodes["n1"] = {"nvidia.com/gpu.count": "1"}
    assert Books(LedgerState()).prepare([held(1000.0, inventory=0)], kube, pricing=PRICING).rejected == {
        "n1": "faster_than_wall_time"}
    kube.nodes["n1"] = {"nvidia.com/gpu.count": "8"}
    assert Books(LedgerState()).prepare([held(400.0, inventory=1)], kube, pricing=PRICING).rejected == {}


A100 = "NVIDIA A100-SXM4-80GB"


def test_a_holders_row_carries_its_queue_its_mig_price_and_its_evidence() -> None:
    """ns/a, queued in KAI's "research", holds a listed 1g.10gb (0.45 an instance-hour = 3.15 a GPU-hour, not
    the A100's 4.00) for 700 GPU-s in one hour: 700 x 3.15 / 3600 = 0.6125. Each holder's use is in the
    right-sizing evidence; an unknown pod's row and breakdown have no priority class."""
    pricing = parse_pricing(f'default_price: 1\nmodels: {{"{A100}": 4.0}}\n'
                            f'mig_profiles: {{"{A100}": {{"1g.10gb": 0.45}}}}\n', "p.yaml")
    kube = KubeState()
    kube.pods[("ns", "a")] = PodInfo("ns", "a", "u", "n1", "Running", 1.0, "train", "Job", "high",
                                     {"kai.scheduler/queue": "research"}, "", "", "")
    mig = HolderCounters(namespace="ns", pod="a", container="c", device_id="MIG-0", gpu_model=A100,
                         mig_profile="1g.10gb", fraction=1 / 7, allocated_s=700.0, used_s=350.0, unmeasured_s=0.0)
    stranger = HolderCounters(namespace="ns2", pod="b", container="c", device_id="GPU-1", gpu_model=A100,
                              fraction=1.0, allocated_s=60.0, used_s=0.0, unmeasured_s=0.0)
    w = Books(LedgerState()).prepare([UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 3600, seq=1,
                                                    started_at=T0, holders=[mig, stranger])], kube,
                                     pricing=pricing).write
    rows = {k.pod: (k, a) for k, a in w.usage.items()}
    key, row = rows["a"]
    assert (key.mig_profile, key.priority_class, key.scheduler, key.queue) == ("1g.10gb", "high", "kai", "research")
    assert row.cost == Decimal("0.6125")
    assert rows["b"][0].priority_class == ""
    assert set(w.breakdown) == {BreakdownKey("ns", "", "high", "USD"), BreakdownKey("ns2", "", "", "USD")}
    assert {k.pod for k in w.evidence} == {"a", "b"}  # each holder's measured use, idle included


def test_unpriced_seconds_add_up_over_the_hours_of_a_delta() -> None:
    """An L4 (no price) held 7200 s over [T0 + 1800, T0 + 9000]: 1800 + 3600 + 1800 = 7200 unpriced seconds."""
    holder = HolderCounters(namespace="ns", pod="p", container="c", device_id="GPU-0", gpu_model="NVIDIA L4",
                            fraction=1.0, allocated_s=7200.0, used_s=0.0, unmeasured_s=0.0)
    p = Books(LedgerState()).prepare([UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 9000, seq=1,
                                                    started_at=T0 + 1800, holders=[holder])], KubeState(),
                                     pricing=PRICING)
    assert p.unpriced == {"NVIDIA L4": 7200.0}
