"""Booking: deltas against high-water marks, resets, stale snapshots, pricing and breakdowns, by hand."""

from __future__ import annotations

import pytest

from exporter.aggregator.booking import Books, hour_of
from exporter.aggregator.kubestate import KubeState, PodInfo
from exporter.aggregator.ledger import LedgerState
from exporter.model.pricing import parse_pricing
from exporter.model.usage import HolderCounters, UnallocatedCounter, UsageSnapshot

PRICING = parse_pricing('default_price: 1\nmodels: {"NVIDIA H100 80GB HBM3": 4.0}\npools: {spot: 0.5}\n', "p")
H100 = "NVIDIA H100 80GB HBM3"


def snap(epoch: str, seq: int, ts: float, alloc: float, used: float, unalloc: float = 0.0) -> UsageSnapshot:
    return UsageSnapshot(node="n1", epoch=epoch, timestamp=ts, seq=seq, holders=[HolderCounters(
        namespace="ns", pod="p", container="c", device_id="GPU-1", gpu_uuid="GPU-1", gpu_model=H100, fraction=1.0,
        allocated_s=alloc, used_s=used, unmeasured_s=0.0)],
        unallocated=[UnallocatedCounter(gpu_model=H100, seconds=unalloc)])


def kube() -> KubeState:
    k = KubeState()
    k.nodes["n1"] = {"gpu.platform/pool": "spot"}
    k.pods[("ns", "p")] = PodInfo("ns", "p", "u", "n1", "Running", 1.0, "train", "Job", "gpu-batch", {}, "", "", "")
    return k


def empty_books() -> Books:
    return Books(LedgerState({}, {}, {}, {}, {}))


def test_deltas_price_pool_and_breakdown() -> None:
    """Two snapshots 3600 s apart on a spot node (x0.5): 3600 GPU-s at 4.00 x 0.5 = 2.00, idle half."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 7200.0, 0.0, 0.0)], k, PRICING))
    p = books.prepare([snap("e1", 2, 10800.0, 3600.0, 1800.0, unalloc=7200.0)], k, PRICING)
    row_key = (hour_of(10800.0), "ns", "p", "train", "n1", "spot", H100, "", "gpu-batch", "USD")
    allocated, used, unmeasured, idle, cost, idle_cost, _energy = p.write.usage[row_key]
    assert (allocated, used, unmeasured, idle) == (3600.0, 1800.0, 0.0, 1800.0)
    assert cost == pytest.approx(2.0) and idle_cost == pytest.approx(1.0)
    assert p.write.breakdown[("ns", "spot", "gpu-batch", "USD")] == pytest.approx([3600.0, 2.0])
    assert p.write.unallocated[(hour_of(10800.0), "n1", "spot", H100, "USD")] == pytest.approx([7200.0, 4.0])
    books.apply(p)
    assert books.totals[("ns", "USD")] == pytest.approx([3600.0, 1800.0, 0.0, 2.0, 1.0])
    assert books.breakdown[("ns", "spot", "gpu-batch", "USD")] == pytest.approx([3600.0, 2.0])


def test_stale_and_repeated_snapshots_book_nothing() -> None:
    """A snapshot with a sequence number already booked (a repeat, or an out-of-order pull) is skipped."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 5, 100.0, 50.0, 10.0)], k, PRICING))
    for seq in (5, 4):
        p = books.prepare([snap("e1", seq, 100.0, 999.0, 10.0)], k, PRICING)
        assert p.stale == 1 and p.write.usage == {}


def test_new_epoch_is_a_reset_not_a_negative_delta() -> None:
    """Epoch e1 booked 500 s; the agent lost its state and reports 30 s in e2: 30 s are new, none negative."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 9, 100.0, 500.0, 100.0)], k, PRICING))
    p = books.prepare([snap("e2", 1, 130.0, 30.0, 3.0)], k, PRICING)
    (row,) = p.write.usage.values()
    assert row[0] == 30.0 and p.resets == 1 and p.write.hwm_reset_nodes == ["n1"]
    books.apply(p)
    assert books.totals[("ns", "USD")][0] == 530.0


def test_missed_pulls_lose_nothing() -> None:
    """Pulls at seq 1 and seq 4 (2 and 3 missed): the single delta covers the whole gap."""
    books, k = empty_books(), kube()
    books.apply(books.prepare([snap("e1", 1, 15.0, 15.0, 15.0)], k, PRICING))
    p = books.prepare([snap("e1", 4, 60.0, 60.0, 30.0)], k, PRICING)
    (row,) = p.write.usage.values()
    assert (row[0], row[1]) == (45.0, 15.0)
