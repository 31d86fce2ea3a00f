"""What one node's ticks write besides its priced rows, by hand: where its books start, which marks advance
or are forgotten, its fleet and billing rows only when they change, per-namespace and per-workload deltas,
unpriced seconds, stale repeats, a new epoch, and the quota events seen."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.books.booking import Books, Prepared
from exporter.aggregator.kube.state import KubeState, PodInfo
from exporter.aggregator.ledger.devices import DeviceKey
from exporter.aggregator.ledger.rows import FleetFacts, QuotaEvent
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.books import AgentMark, EventCount
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot

T0 = 1_800_000_000.0  # an hour boundary
H100, L4 = "NVIDIA H100 80GB HBM3", "NVIDIA L4"
PRICING = parse_pricing(f'default_price: 1\nmodels: {{"{H100}": 3.6}}\n', "p.yaml")  # L4 unpriced
KEY_A, KEY_B = "ns/a/c/GPU-0", "ns2/b/c/GPU-1"


def _holder(namespace: str, pod: str, device: str, model: str, *, held: float, used: float,
            mig_profile: str | None = None) -> HolderCounters:
    return HolderCounters(namespace=namespace, pod=pod, container="c", device_id=device, gpu_uuid=device,
                          gpu_model=model, mig_profile=mig_profile, fraction=1.0, allocated_s=held, used_s=used,
                          unmeasured_s=0.0)


def _snap(seq: int, ts: float, *holders: HolderCounters, epoch: str = "e1", started_at: float = T0) -> UsageSnapshot:
    """n1: one H100 and one L4."""
    return UsageSnapshot(node="n1", epoch=epoch, timestamp=ts, seq=seq, started_at=started_at, holders=list(holders),
                         capacity=[GpuCapacity(gpu_uuid="GPU-0", gpu_model=H100),
                                   GpuCapacity(gpu_uuid="GPU-1", gpu_model=L4)])


def _kube() -> KubeState:
    k = KubeState()
    k.nodes["n1"] = {"node.kubernetes.io/instance-type": "p5.48xlarge", "karpenter.sh/capacity-type": "spot"}
    k.pods[("ns", "a")] = PodInfo("ns", "a", "u", "n1", "Running", 1.0, "train", "Job", "high", {}, "", "", "")
    return k


def _first_tick(books: Books, kube: KubeState) -> Prepared:
    """a (ns, Job train) holds the H100 60 s, using 30; b (ns2, no pod known) the unpriced L4 60 s."""
    return books.prepare([_snap(1, T0 + 60, _holder("ns", "a", "GPU-0", H100, held=60.0, used=30.0),
                                _holder("ns2", "b", "GPU-1", L4, held=60.0, used=60.0))], kube, pricing=PRICING)


def test_a_nodes_first_tick_starts_its_books_and_writes_its_marks_fleet_and_billing() -> None:
    p = _first_tick(Books(LedgerState()), _kube())
    w = p.write
    assert w.books_since == {"n1": T0}  # the agent's epoch start, not the snapshot's time
    assert w.agents == {"n1": AgentMark("e1", T0 + 60, 1)}
    assert sorted(m.key for m in w.hwm) == [KEY_A, KEY_B] and {m.node for m in w.hwm} == {"n1"}
    assert w.fleet == {"n1": FleetFacts(((H100, 1), (L4, 1)), ())}
    assert w.node_billing == {"n1": ("p5.48xlarge", "spot")}
    assert (w.hwm_reset_nodes, w.hwm_deleted, p.resets, p.stale) == ([], [], 0, 0)
    # deltas by namespace and by workload (a pod nobody knows is its own workload)
    assert {ns: a.allocated_s for ns, a in p.ns_delta.items()} == {"ns": Decimal(60), "ns2": Decimal(60)}
    assert {k: (a.allocated_s, a.used_s) for k, a in p.workload_delta.items()} == {
        ("ns", "train"): (Decimal(60), Decimal(30)), ("ns2", "b"): (Decimal(60), Decimal(60))}
    assert p.unpriced == {L4: 60.0}  # the L4's seconds, priced at the default: reported as unpriced


def test_an_unchanged_counter_keeps_its_mark_and_a_dropped_one_is_forgotten() -> None:
    """Tick 2: a's counters did not move, b's are gone (the agent dropped them after our ack): no mark written,
    b's deleted; the books already started, the fleet and billing did not change: none of them written."""
    books, kube = Books(LedgerState()), _kube()
    books.apply(_first_tick(books, kube))
    p = books.prepare([_snap(2, T0 + 120, _holder("ns", "a", "GPU-0", H100, held=60.0, used=30.0))], kube,
                      pricing=PRICING)
    w = p.write
    assert (w.hwm, w.hwm_deleted) == ([], [("n1", KEY_B)])
    assert w.agents == {"n1": AgentMark("e1", T0 + 120, 2)}
    assert (w.books_since, w.fleet, w.node_billing, w.usage) == ({}, {}, {}, {})
    assert p.ns_delta == {} and p.unpriced == {}


def test_a_repeated_snapshot_is_counted_stale_and_writes_nothing() -> None:
    books, kube = Books(LedgerState()), _kube()
    books.apply(_first_tick(books, kube))
    p = _first_tick(books, kube)
    assert p.stale == 1 and p.write.agents == {} and p.write.hwm == [] and p.marks == {}


def test_a_new_epoch_is_a_reset_with_the_time_between_unobserved_and_no_mark_deleted() -> None:
    """Epoch e2 started at T0 + 150 (the last booking was at T0 + 60): 90 s of each of the node's 2 GPUs
    nobody observed; a's new counter (30 s) is all new; b's old mark is replaced by the reset, not deleted."""
    books, kube = Books(LedgerState()), _kube()
    books.apply(_first_tick(books, kube))
    p = books.prepare([_snap(1, T0 + 180, _holder("ns", "a", "GPU-0", H100, held=30.0, used=0.0), epoch="e2",
                             started_at=T0 + 150)], kube, pricing=PRICING)
    w = p.write
    assert (p.resets, w.hwm_reset_nodes, w.hwm_deleted) == (1, ["n1"], [])
    assert {k.gpu_model: a.seconds for k, a in w.unobserved.items()} == {H100: Decimal(90), L4: Decimal(90)}
    assert {ns: a.allocated_s for ns, a in p.ns_delta.items()} == {"ns": Decimal(30)}
    assert w.books_since == {}


def test_held_mig_instances_are_part_of_the_nodes_fleet_row() -> None:
    """Each with the model its agent named, or "" (any of the node's models) when it named none."""
    p = Books(LedgerState()).prepare([_snap(1, T0 + 60, _holder("ns", "a", "GPU-0", H100, held=60.0, used=0.0,
                                                                  mig_profile="3g.40gb"),
                                            _holder("ns", "b", "GPU-1", "", held=0.0, used=0.0,
                                                    mig_profile="1g.10gb"))], _kube(), pricing=PRICING)
    assert p.write.fleet == {"n1": FleetFacts(((H100, 1), (L4, 1)), ((H100, "3g.40gb", 1.0), ("", "1g.10gb", 1.0)))}


def test_quota_rejections_seen_this_tick_are_written_with_their_latest_count() -> None:
    """Event u1 fired 2 more times this tick (5 in all, last grown at 99): its row says 5 and 99; u2, new but
    already pruned from the counts, is written as this tick saw it."""
    kube = _kube()
    kube.new_quota_rejections = {"u1": EventCount("ns", 2), "u2": EventCount("ns2", 1)}
    kube.quota_event_counts = {"u1": EventCount("ns", 5)}
    kube.quota_event_seen = {"u1": 99.0}
    p = Books(LedgerState()).prepare([], kube, pricing=PRICING)
    assert p.write.quota_events == [QuotaEvent("u1", "ns", 5, 99.0), QuotaEvent("u2", "ns2", 1, 0.0)]


def test_two_snapshots_of_a_node_in_one_tick_book_the_second_against_the_first() -> None:
    """Seq 1 (60 s held) then seq 2 (90 s) in one tick: 60 + 30 = 90 s booked; seq 2 again, and a repeat of the
    other node's, are two stale snapshots."""
    a60, a90 = (_holder("ns", "a", "GPU-0", H100, held=held, used=0.0) for held in (60.0, 90.0))
    other = UsageSnapshot(node="n2", epoch="e1", timestamp=T0 + 60, seq=1, started_at=T0)
    books, kube = Books(LedgerState()), _kube()
    books.apply(books.prepare([other], kube, pricing=PRICING))
    p = books.prepare([_snap(1, T0 + 60, a60), _snap(2, T0 + 120, a90), _snap(2, T0 + 120, a90), other], kube,
                      pricing=PRICING)
    assert {ns: a.allocated_s for ns, a in p.ns_delta.items()} == {"ns": Decimal(90)}
    assert p.stale == 2


def test_a_new_epoch_in_a_later_hour_books_its_deltas_from_its_own_start() -> None:
    """Last booked at T0 + 60; epoch e2 started at T0 + 3700 and says 20 s at T0 + 3720: the 20 s are booked in
    hour T0 + 3600 only (from the epoch's start, not from the old epoch's last booking), and the 3640 s of each
    GPU between the two are unobserved (3540 in hour T0, 100 in hour T0 + 3600)."""
    books, kube = Books(LedgerState()), _kube()
    books.apply(_first_tick(books, kube))
    p = books.prepare([_snap(1, T0 + 3720, _holder("ns", "a", "GPU-0", H100, held=20.0, used=0.0), epoch="e2",
                             started_at=T0 + 3700)], kube, pricing=PRICING)
    assert {(k.hour, a.allocated_s) for k, a in p.write.usage.items()} == {(int(T0) + 3600, Decimal(20))}
    assert sorted((k.hour, k.gpu_model, a.seconds) for k, a in p.write.unobserved.items()) == [
        (int(T0), H100, Decimal(3540)), (int(T0), L4, Decimal(3540)),
        (int(T0) + 3600, H100, Decimal(100)), (int(T0) + 3600, L4, Decimal(100))]


COMMITTED = parse_pricing(f"""
default_price: 1
models: {{"{H100}": 4.0}}
commitments:
  - {{name: h100-1yr, model: "{H100}", gpus: 12, hourly: 2.10,
     start: "2027-01-01T00:00:00Z", end: "2028-01-01T00:00:00Z"}}
""", "p.yaml")


def test_unused_commitment_time_ends_at_the_aggregators_clock_else_the_newest_snapshot() -> None:
    """n1's books start at T0 with 1 eligible H100 of the 12 committed: 11/12 unused. Up to ``now`` = T0 + 600:
    12 x 600 x 11/12 = 6600 GPU-s; without ``now``, up to the snapshot's T0 + 300: 3300."""
    kube = _kube()
    kube.nodes["n1"] = {}  # on demand: eligible
    for now, until, unused in ((T0 + 600, T0 + 600, Decimal(6600)), (None, T0 + 300, Decimal(3300))):
        p = Books(LedgerState()).prepare([_snap(1, T0 + 300)], kube, pricing=COMMITTED, now=now)
        assert p.write.commitment_marks == {"h100-1yr": until}
        assert sum((a.seconds for a in p.write.unused_commitment.values()), Decimal(0)) == unused


def test_a_tick_with_no_books_at_all_books_no_unused_commitment() -> None:
    """Nothing booked yet and no snapshot: the commitments' time starts with the first books, not before."""
    p = Books(LedgerState()).prepare([], _kube(), pricing=COMMITTED, now=T0 + 600)
    assert p.write.unused_commitment == {}


def test_the_devices_a_node_advertised_are_booked_in_every_hour_its_snapshot_covers() -> None:
    """Seven 1g.10gb instances advertised on an H100 node whose snapshot covers [T0, T0 + 3660]: 7 in each of
    hours T0 and T0 + 3600."""
    kube = _kube()
    kube.node_devices["n1"] = {"nvidia.com/mig-1g.10gb": 7}
    snap = UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 3660, seq=1, started_at=T0,
                         capacity=[GpuCapacity(gpu_uuid="GPU-0", gpu_model=H100)])
    p = Books(LedgerState()).prepare([snap], kube, pricing=PRICING)
    assert p.write.node_devices == {DeviceKey(hour, "n1", H100, "1g.10gb", 0): 7 for hour in (int(T0), int(T0) + 3600)}


def test_an_agent_that_does_not_say_when_its_epoch_began_starts_its_books_at_its_first_snapshot() -> None:
    snap = UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 60, seq=1)
    assert Books(LedgerState()).prepare([snap], _kube(), pricing=PRICING).write.books_since == {"n1": T0 + 60}


def test_a_new_epoch_books_the_gap_for_the_gpus_it_shows_else_those_last_seen() -> None:
    """n1 showed an H100 and an L4. Epoch e2 shows only the H100: the 90 s gap is booked for it alone. Epoch e3
    of n2 shows no inventory: its gap is booked for the GPUs n2 last showed. Two resets in one tick."""
    books, kube = Books(LedgerState()), _kube()
    books.apply(_first_tick(books, kube))
    books.apply(books.prepare([UsageSnapshot(node="n2", epoch="e1", timestamp=T0 + 60, seq=1, started_at=T0,
                                             capacity=[GpuCapacity(gpu_uuid="GPU-9", gpu_model=L4)])], kube,
                              pricing=PRICING))
    p = books.prepare([UsageSnapshot(node="n1", epoch="e2", timestamp=T0 + 180, seq=1, started_at=T0 + 150,
                                     capacity=[GpuCapacity(gpu_uuid="GPU-0", gpu_model=H100)]),
                       UsageSnapshot(node="n2", epoch="e3", timestamp=T0 + 180, seq=1, started_at=T0 + 150)], kube,
                      pricing=PRICING)
    assert sorted((k.node, k.gpu_model, a.seconds) for k, a in p.write.unobserved.items()) == [
        ("n1", H100, Decimal(90)), ("n2", L4, Decimal(90))]
    assert p.resets == 2


def test_billing_is_written_for_nodes_the_api_has_with_what_their_labels_say() -> None:
    """A node without an instance-type or capacity label bills as ("", on-demand); a node the API does not have
    writes no billing row."""
    kube = KubeState()
    kube.nodes["n1"] = {}
    p = Books(LedgerState()).prepare([_snap(1, T0 + 60), UsageSnapshot(node="n2", epoch="e1", timestamp=T0 + 60)],
                                     kube, pricing=PRICING)
    assert p.write.node_billing == {"n1": ("", "on-demand")}


def test_a_snapshot_without_inventory_keeps_the_gpus_and_its_held_mig_last_seen() -> None:
    """Tick 2 (same epoch) shows no inventory: the GPUs of tick 1 stand, the fleet row is not rewritten. Tick 3
    shows only the H100: the fleet row is rewritten. The MIG instance held in tick 1 stays in the fleet the
    next tick builds from the marks."""
    books, kube = Books(LedgerState()), _kube()
    mig = _holder("ns", "a", "GPU-0", H100, held=60.0, used=0.0, mig_profile="3g.40gb")
    books.apply(books.prepare([_snap(1, T0 + 60, mig)], kube, pricing=PRICING))
    assert [(n.facts.gpu_model, n.held_mig) for n in books._fleet([], kube, gone=[])] == [
        (H100, {"3g.40gb": 1.0}), (L4, {})]
    bare = UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 120, seq=2, started_at=T0, holders=[mig])
    p = books.prepare([bare], kube, pricing=PRICING)
    assert p.write.fleet == {} and p.marks["n1"].gpus_by_model == {H100: 1, L4: 1}
    books.apply(p)
    h100_only = UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 180, seq=3, started_at=T0, holders=[mig],
                              capacity=[GpuCapacity(gpu_uuid="GPU-0", gpu_model=H100)])
    p = books.prepare([h100_only], kube, pricing=PRICING)
    assert p.write.fleet == {"n1": FleetFacts(((H100, 1),), ((H100, "3g.40gb", 1.0),))}


def _one_holder(seq: int, ts: float, *, held: float, energy_j: float = 0.0, unallocated: float = 0.0,
                unallocated_j: float = 0.0) -> UsageSnapshot:
    """n1 with ns/a (an H100, known pod) at ``held`` seconds and ``unallocated`` idle seconds so far."""
    holder = HolderCounters(namespace="ns", pod="a", container="c", device_id="GPU-0", gpu_model=H100, fraction=1.0,
                            allocated_s=held, used_s=held, unmeasured_s=0.0, energy_j=energy_j)
    return UsageSnapshot(node="n1", epoch="e1", timestamp=ts, seq=seq, started_at=T0, holders=[holder],
                         unallocated=[UnallocatedCounter(gpu_model=H100, seconds=unallocated, energy_j=unallocated_j)],
                         capacity=[GpuCapacity(gpu_uuid="GPU-0", gpu_model=H100)])


def test_a_delta_of_nothing_books_no_row_and_half_a_second_or_joule_does() -> None:
    """Counters back by less than rounding are no change: no row. Half a second held, and 0.5 J on idle
    capacity without an idle second more, are booked."""
    for held, idle_j, usage, idle in ((60.0 - 1e-7, 0.0, [], []),
                                      (60.5, 0.5, [Decimal("0.5")], [(Decimal(0), Decimal("0.5"))])):
        books, kube = Books(LedgerState()), _kube()
        books.apply(books.prepare([_one_holder(1, T0 + 60, held=60.0, unallocated=30.0)], kube, pricing=PRICING))
        p = books.prepare([_one_holder(2, T0 + 120, held=held, unallocated=30.0 - 1e-7 if held < 60 else 30.0,
                                       unallocated_j=idle_j)], kube, pricing=PRICING)
        assert [a.allocated_s for a in p.write.usage.values()] == usage
        assert [(a.seconds, a.energy_j) for a in p.write.unallocated.values()] == idle


def test_a_holder_with_only_energy_is_booked_and_one_without_a_delta_skips_only_itself() -> None:
    """b's counters did not move; a drew 2 J without a held second more: a's row has the joules."""
    books, kube = Books(LedgerState()), _kube()
    b = _holder("ns2", "b", "GPU-1", L4, held=60.0, used=60.0)
    books.apply(books.prepare([_snap(1, T0 + 60, b, _holder("ns", "a", "GPU-0", H100, held=60.0, used=0.0))], kube,
                              pricing=PRICING))
    a = HolderCounters(namespace="ns", pod="a", container="c", device_id="GPU-0", gpu_uuid="GPU-0", gpu_model=H100,
                       fraction=1.0, allocated_s=60.0, used_s=0.0, unmeasured_s=0.0, energy_j=2.0)
    p = books.prepare([_snap(2, T0 + 120, b, a)], kube, pricing=PRICING)
    assert [(k.pod, r.allocated_s, r.energy_j) for k, r in p.write.usage.items()] == [("a", Decimal(0), Decimal(2))]


def test_a_holders_money_telescopes_along_its_counter_across_ticks() -> None:
    """1 s more each tick at 1.00/h: 1/3600 = 0.000277777|8 a tick alone; booked as positions the three ticks
    cost book(3/3600) = 0.000833333, not 3 x 0.000277778."""
    pricing = parse_pricing(f'default_price: 1\nmodels: {{"{H100}": 1.0}}\n', "p.yaml")
    books, kube, cost = Books(LedgerState()), _kube(), Decimal(0)
    for seq in (1, 2, 3):
        p = books.prepare([_one_holder(seq, T0 + seq, held=float(seq))], kube, pricing=pricing)
        cost += sum((r.cost for r in p.write.usage.values()), Decimal(0))
        books.apply(p)
    assert cost == Decimal("0.000833333")


def test_small_deltas_of_every_counter_are_booked_and_one_still_counter_skips_only_itself() -> None:
    """Tick 2: a holder 0.5 J further without a second, an unallocated H100 0.5 s further without a joule, the
    L4's unallocated counter still and listed first, and 0.5 s more without an energy reading (the node's
    0.5 s gap, given to the unallocated row with no joules): each is booked."""
    def tick(seq: int, *, joules: float, h100_idle: float, dark: float) -> UsageSnapshot:
        holder = HolderCounters(namespace="ns", pod="a", container="c", device_id="GPU-0", gpu_model=H100,
                                fraction=1.0, allocated_s=60.0, used_s=60.0, unmeasured_s=0.0, energy_j=joules)
        return UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 60 * seq, seq=seq, started_at=T0,
                             holders=[holder], unmeasured_energy_s=dark,
                             unallocated=[UnallocatedCounter(gpu_model=L4, seconds=60.0),
                                          UnallocatedCounter(gpu_model=H100, seconds=h100_idle)])

    books, kube = Books(LedgerState()), _kube()
    books.apply(books.prepare([tick(1, joules=100.0, h100_idle=10.0, dark=1.0)], kube, pricing=PRICING))
    w = books.prepare([tick(2, joules=100.5, h100_idle=10.5, dark=1.5)], kube, pricing=PRICING).write
    assert [(r.allocated_s, r.energy_j) for r in w.usage.values()] == [(Decimal(0), Decimal("0.5"))]
    assert {k.gpu_model: (a.seconds, a.unmeasured_energy_s) for k, a in w.unallocated.items()} == {
        H100: (Decimal("0.5"), Decimal("0.5"))}
    assert [u.seconds for u in w.unmeasured_energy.values()] == [Decimal("0.5")]


def test_a_node_whose_unmeasured_seconds_did_not_grow_writes_none() -> None:
    """The gap counter back by less than rounding: no change, no unmeasured-energy row (not even a zero)."""
    books, kube = Books(LedgerState()), _kube()
    for seq, dark in ((1, 1.0), (2, 1.0 - 1e-7)):
        p = books.prepare([UsageSnapshot(node="n1", epoch="e1", timestamp=T0 + 60 * seq, seq=seq, started_at=T0,
                                         unmeasured_energy_s=dark)], kube, pricing=PRICING)
        books.apply(p)
    assert p.write.unmeasured_energy == {}


def test_a_counter_back_by_less_than_rounding_keeps_its_mark_so_nothing_is_booked_twice() -> None:
    """60 s, then 59.9999999 (back by 1e-7, within the tolerance: no change), then 60.5: the holder's books are
    60 + 0 + 0.5 = 60.5 s exactly, and 60.5 s x 3.60/h / 3600 = 0.0605; had the mark followed the counter back to
    59.9999999, the last tick would book 0.5000001 s again."""
    books, kube = Books(LedgerState()), _kube()
    seconds, cost = Decimal(0), Decimal(0)
    for seq, held in ((1, 60.0), (2, 60.0 - 1e-7), (3, 60.5)):
        p = books.prepare([_one_holder(seq, T0 + 60 * seq, held=held)], kube, pricing=PRICING)
        seconds += sum((r.allocated_s for r in p.write.usage.values()), Decimal(0))
        cost += sum((r.cost for r in p.write.usage.values()), Decimal(0))
        books.apply(p)
    assert seconds == Decimal("60.5")
    assert cost == Decimal("0.0605")
