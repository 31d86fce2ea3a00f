"""Booking: deltas against high-water marks, resets, stale snapshots, pricing and breakdowns, by hand."""

from __future__ import annotations

from decimal import Decimal

import pytest

from exporter.aggregator.books.booking import Books, NodeGone
from exporter.aggregator.kube.state import KubeState, PodInfo
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.books import (
    BreakdownKey,
    BreakdownTotals,
    CapacityAmounts,
    CapacityKey,
    CapacityTotalKey,
    NamespaceKey,
    NamespaceTotals,
    UsageKey,
)
from exporter.model.exact import exact
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot

PRICING = parse_pricing('default_price: 1\nmodels: {"NVIDIA H100 80GB HBM3": 4.0}\npools: {spot: 0.5}\n', "p")
H100 = "NVIDIA H100 80GB HBM3"


def snap(epoch: str, seq: int, ts: float, alloc: float, used: float, unalloc: float = 0.0, *,
         started_at: float | None = None, unobserved: float = 0.0, gpus: int = 0) -> UsageSnapshot:
    return UsageSnapshot(node="n1", epoch=epoch, timestamp=ts, seq=seq, started_at=started_at, holders=[HolderCounters(
        namespace="ns", pod="p", container="c", device_id="GPU-1", gpu_uuid="GPU-1", gpu_model=H100, fraction=1.0,
        allocated_s=alloc, used_s=used, unmeasured_s=0.0)],
        unallocated=[UnallocatedCounter(gpu_model=H100, seconds=unalloc)],
        unobserved=[UnallocatedCounter(gpu_model=H100, seconds=unobserved)],
        capacity=[GpuCapacity(gpu_uuid=f"GPU-{i}", gpu_model=H100) for i in range(gpus)])


def kube() -> KubeState:
    k = KubeState()
    k.nodes["n1"] = {"gpu.platform/pool": "spot"}
    k.pods[("ns", "p")] = PodInfo("ns", "p", "u", "n1", "Running", 1.0, "train", "Job", "gpu-batch", {}, "", "", "")
    return k


def empty_books() -> Books:
    return Books(LedgerState())


def test_deltas_price_pool_and_breakdown() -> None:
    """Two snapshots 3600 s apart on a spot node (x0.5): 3600 GPU-s at 4.00 x 0.5 = 2.00, idle half."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 7200.0, 0.0, 0.0)], k, pricing=PRICING))
    p = books.prepare([snap("e1", 2, 10800.0, 3600.0, 1800.0, unalloc=7200.0)], k, pricing=PRICING)
    # the delta covers [7200, 10800]: exactly the hour starting at 7200
    row = p.write.usage[UsageKey(7200, "ns", "p", "train", "n1", "spot", H100, "", "gpu-batch", "USD")]
    assert (row.allocated_s, row.used_s, row.unmeasured_s, row.idle_s) == (
        Decimal(3600), Decimal(1800), Decimal(0), Decimal(1800))
    assert row.cost == 2 and row.idle_cost == 1
    assert p.write.breakdown[BreakdownKey("ns", "spot", "gpu-batch", "USD")] == BreakdownTotals(
        allocated_s=exact(3600.0), cost=exact(2.0))
    # list cost: 2 GPU-h x 4.00 list = 8.00 (the pool multiplier is a discount off the list price)
    assert p.write.unallocated[CapacityKey(7200, "n1", "spot", H100, "USD")] == CapacityAmounts(
        seconds=exact(7200.0), cost=exact(4.0), list_cost=exact(8.0))
    books.apply(p)
    # list cost 1 GPU-h x 4.00 = 4.00; no energy reported
    assert books.totals[NamespaceKey("ns", "USD")] == NamespaceTotals(
        allocated_s=exact(3600.0), used_s=exact(1800.0), unmeasured_s=exact(0.0), cost=exact(2.0),
            idle_cost=exact(1.0), list_cost=exact(4.0), energy_j=exact(0.0))
    assert books.breakdown[BreakdownKey("ns", "spot", "gpu-batch", "USD")] == BreakdownTotals(
        allocated_s=exact(3600.0), cost=exact(2.0))


def test_stale_and_repeated_snapshots_book_nothing() -> None:
    """A snapshot with a sequence number already booked (a repeat, or an out-of-order pull) is skipped."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 5, 100.0, 50.0, 10.0)], k, pricing=PRICING))
    for seq in (5, 4):
        p = books.prepare([snap("e1", seq, 100.0, 999.0, 10.0)], k, pricing=PRICING)
        assert p.stale == 1 and p.write.usage == {}


def test_new_epoch_is_a_reset_not_a_negative_delta() -> None:
    """Epoch e1 booked 500 s; the agent lost its state and reports 30 s in e2: 30 s are new, none negative."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 9, 100.0, 500.0, 100.0)], k, pricing=PRICING))
    p = books.prepare([snap("e2", 1, 130.0, 30.0, 3.0)], k, pricing=PRICING)
    (row,) = p.write.usage.values()
    assert row.allocated_s == 30.0 and p.resets == 1 and p.write.hwm_reset_nodes == ["n1"]
    books.apply(p)
    assert books.totals[NamespaceKey("ns", "USD")].allocated_s == 530.0


def test_missed_pulls_lose_nothing() -> None:
    """Pulls at seq 1 and seq 4 (2 and 3 missed): the single delta covers the whole gap."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 15.0, 15.0, 15.0)], k, pricing=PRICING))
    p = books.prepare([snap("e1", 4, 60.0, 60.0, 30.0)], k, pricing=PRICING)
    (row,) = p.write.usage.values()
    assert (row.allocated_s, row.used_s) == (Decimal(45), Decimal(15))


def test_a_delta_across_an_hour_boundary_is_split_by_wall_time() -> None:
    """Snapshots at 3540 s and 3660 s (60 s on each side of the 3600 s boundary): 120 GPU-s at 4.00 x 0.5
    split 60/60, 0.0667 each; the unallocated 240 GPU-s split the same way."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 3540.0, 0.0, 0.0)], k, pricing=PRICING))
    p = books.prepare([snap("e1", 2, 3660.0, 120.0, 60.0, unalloc=240.0)], k, pricing=PRICING)
    before = p.write.usage[UsageKey(0, "ns", "p", "train", "n1", "spot", H100, "", "gpu-batch", "USD")]
    after = p.write.usage[UsageKey(3600, "ns", "p", "train", "n1", "spot", H100, "", "gpu-batch", "USD")]
    assert before.allocated_s == 60 and after.allocated_s == 60
    assert before.cost == Decimal("0.033333333")  # 60 / 3600 x 2.00 = 0.0333333333|3, half-even to 9 digits
    assert p.write.unallocated[CapacityKey(0, "n1", "spot", H100, "USD")].seconds == 120
    assert p.write.unallocated[CapacityKey(3600, "n1", "spot", H100, "USD")].seconds == 120


def test_new_epoch_books_the_gap_nobody_observed() -> None:
    """Epoch e1 was booked up to t=100 on a 2-GPU node; e2 started at t=400 (the agent was down and lost
    its state). 300 s x 2 GPUs = 600 GPU-s are unobserved, priced like capacity: 600/3600 x 4.00 x 0.5."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 9, 100.0, 100.0, 0.0, 100.0, started_at=0.0, gpus=2)], k, pricing=PRICING))
    p = books.prepare([snap("e2", 1, 430.0, 30.0, 0.0, 30.0, started_at=400.0, gpus=2)], k, pricing=PRICING)
    gap = p.write.unobserved[CapacityKey(0, "n1", "spot", H100, "USD")]
    assert gap.seconds == 600 and gap.cost == Decimal("0.333333333")  # 600 / 3600 x 2.00
    books.apply(p)
    assert books.unobserved_totals[CapacityTotalKey("n1", "spot", H100, "USD")].seconds == 600
    # conservation over [0, 430] on 2 GPUs: allocated 100 + 30, unallocated 100 + 30, unobserved 600 = 860
    allocated = books.totals[NamespaceKey("ns", "USD")].allocated_s
    unallocated = books.unallocated_totals[CapacityTotalKey("n1", "spot", H100, "USD")].seconds
    assert allocated == pytest.approx(130.0) and unallocated == pytest.approx(130.0)
    assert allocated + unallocated + books.unobserved_totals[CapacityTotalKey("n1", "spot", H100, "USD")].seconds == (
        pytest.approx(2 * 430.0))


def test_agent_unobserved_counter_is_booked() -> None:
    """Time the agent itself could not observe (past its charge cap) arrives as a counter and is booked."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 100.0, 0.0, 0.0, started_at=100.0, gpus=1)], k, pricing=PRICING))
    p = books.prepare([snap("e1", 2, 400.0, 60.0, 0.0, 0.0, unobserved=240.0, gpus=1)], k, pricing=PRICING)
    assert p.write.unobserved[CapacityKey(0, "n1", "spot", H100, "USD")].seconds == pytest.approx(240.0)


@pytest.mark.parametrize(("alloc", "used", "reason"), [
    (1e9, 0.0, "faster_than_wall_time"),        # 1e9 GPU-s in 15 s on one GPU
    (15.0, 16.0, "used_above_allocated"),
])
def test_impossible_counters_are_refused_and_marks_stay(alloc: float, used: float, reason: str) -> None:
    """A 1-GPU node can add at most 1 x 15 s (+ slack) in 15 s; used can never exceed allocated. The
    snapshot is refused whole, nothing is booked and the marks do not move, so the next sane snapshot's
    delta is taken from the last good mark."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 100.0, 0.0, 0.0, started_at=100.0, gpus=1)], k, pricing=PRICING))
    p = books.prepare([snap("e1", 2, 115.0, alloc, used, gpus=1)], k, pricing=PRICING)
    assert p.rejected == {"n1": reason} and p.write.usage == {} and p.write.agents == {}
    books.apply(p)
    good = books.prepare([snap("e1", 3, 130.0, 30.0, 0.0, gpus=1)], k, pricing=PRICING)
    assert sum(r.allocated_s for r in good.write.usage.values()) == pytest.approx(30.0)


def test_counter_going_backwards_within_an_epoch_is_refused() -> None:
    """Within one epoch counters only grow; a lower value (an agent that resumed from an older state) is
    refused instead of being re-booked whole as a reset (which booked 1100 true GPU-s as 1600)."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 1000.0, 1000.0, 0.0, started_at=0.0, gpus=2)], k, pricing=PRICING))
    p = books.prepare([snap("e1", 2, 1100.0, 500.0, 0.0, gpus=2)], k, pricing=PRICING)
    assert p.rejected == {"n1": "counter_decreased"} and p.write.usage == {}


def test_deleted_node_closes_its_books_and_is_pruned() -> None:
    """A 2-GPU node last booked at t=100 is deleted at t=160: 60 s x 2 = 120 GPU-s unobserved, then its
    marks are forgotten (in the write, so the ledger prunes them in the same transaction)."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 100.0, 100.0, 0.0, 100.0, started_at=0.0, gpus=2)], k, pricing=PRICING))
    p = books.prepare([], k, pricing=PRICING, gone=[NodeGone("n1", 160.0, 2, H100)])
    assert p.write.unobserved[CapacityKey(0, "n1", "spot", H100, "USD")].seconds == pytest.approx(120.0)
    assert p.write.pruned_nodes == ["n1"]
    books.apply(p)
    assert "n1" not in books.marks


def test_one_counter_faster_than_the_node_is_refused_but_oversubscription_is_not() -> None:
    """On a 2-GPU node over 15 s: one counter may add at most 2 x 15 s (+ slack); the sum of all counters
    may exceed 2 x 15 = 30 (an oversubscribed device: holders pay what they were allocated) but not
    2 x 30 = 60 (+ slack)."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 100.0, 0.0, 0.0, 0.0, started_at=100.0, gpus=2)], k, pricing=PRICING))
    oversubscribed = books.prepare([snap("e1", 2, 115.0, 30.0, 0.0, 15.0, gpus=2)], k, pricing=PRICING)  # 45 > 30
    assert oversubscribed.rejected == {}
    one_too_fast = books.prepare([snap("e1", 2, 115.0, 40.0, 0.0, 0.0, gpus=2)], k, pricing=PRICING)
    assert one_too_fast.rejected == {"n1": "faster_than_wall_time"}
    sum_too_fast = books.prepare([snap("e1", 2, 115.0, 30.0, 0.0, 31.0, unobserved=31.0, gpus=2)], k, pricing=PRICING)
    assert sum_too_fast.rejected == {"n1": "faster_than_wall_time"}


def test_hour_split_refuses_a_non_finite_interval() -> None:
    """An infinite end would split into hours for ever: refused (the schema keeps such values out first)."""
    from exporter.model.books import hour_shares

    for start, end in ((0.0, float("inf")), (float("nan"), 10.0), (float("-inf"), 0.0)):
        with pytest.raises(ValueError, match="not finite"):
            hour_shares(start, end)
    assert hour_shares(3000.0, 4200.0) == [(0, 0.5), (3600, 0.5)]
