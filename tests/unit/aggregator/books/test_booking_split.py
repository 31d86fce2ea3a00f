"""Split GPU-seconds (a busy shared GPU's time split by fraction for want of measured per-pod use): booked like
the other cumulative counters, exactly once, refused when they outrun the allocation, and counted per namespace.
Every figure is worked by hand in the test's docstring."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState, PodInfo
from exporter.aggregator.ledger.store import Ledger, LedgerState
from exporter.aggregator.web.metrics import namespace_counters
from exporter.model.books import SPLIT_UNKNOWN, CounterMark, NamespaceKey, UsageKey
from exporter.model.plausibility import counter_advance, implausible
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UsageSnapshot
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

PRICING = parse_pricing('default_price: 1\nmodels: {"NVIDIA L4": 0.8}\n', "p")
L4 = "NVIDIA L4"


def holder(ns: str, *, alloc: float, used: float, split: float | None) -> HolderCounters:
    """One pod's half of a time-sliced L4 (replica ``::0`` for ns a, ``::1`` for the others); ``split`` None:
    an older agent that does not send the field."""
    device = f"GPU-1::{0 if ns == 'a' else 1}"
    if split is None:
        return HolderCounters(namespace=ns, pod="p", container="c", device_id=device, gpu_uuid="GPU-1", gpu_model=L4,
                              fraction=0.5, allocated_s=alloc, used_s=used, unmeasured_s=0.0, sharing="time-slicing")
    return HolderCounters(namespace=ns, pod="p", container="c", device_id=device, gpu_uuid="GPU-1", gpu_model=L4,
                          fraction=0.5, allocated_s=alloc, used_s=used, unmeasured_s=0.0, sharing="time-slicing",
                          split_s=split)


def snap(seq: int, ts: float, *holders: HolderCounters, epoch: str = "e1",
         started_at: float | None = None) -> UsageSnapshot:
    return UsageSnapshot(node="n1", epoch=epoch, timestamp=ts, seq=seq, started_at=started_at, holders=list(holders),
                         capacity=[GpuCapacity(gpu_uuid="GPU-1", gpu_model=L4)])


def kube() -> KubeState:
    k = KubeState()
    k.nodes["n1"] = {}
    for ns in ("a", "b"):
        k.pods[(ns, "p")] = PodInfo(ns, "p", "u", "n1", "Running", 0.5, "wl", "Deployment", "", {}, "", "", "")
    return k


def key(ns: str, hour: int) -> UsageKey:
    return UsageKey(hour, ns, "p", "wl", "n1", "", L4, "", "", "USD", "", "time-slicing")


def test_split_seconds_book_per_hour_and_namespace() -> None:
    """A time-sliced L4, a and b at 0.5 each. From 9000 to 12600 s (3600 s, half in the hour at 7200, half in
    the hour at 10800) each holds 1800 GPU-s; per-pod use was missing for 1200 s of it, so 0.5 x 1200 = 600 GPU-s
    each were split by fraction. Each hour gets half: 300 GPU-s split, 900 allocated. Namespace totals and the
    counter: 600 s each; split is part of allocated, so idle = 1800 - used (a 1000 -> 800, b 400 -> 1400)."""
    books, k = Books(LedgerState()), kube()
    books.apply(books.prepare([snap(1, 9000.0, holder("a", alloc=0.0, used=0.0, split=0.0),
                                    holder("b", alloc=0.0, used=0.0, split=0.0))], k, pricing=PRICING))
    p = books.prepare([snap(2, 12600.0, holder("a", alloc=1800.0, used=1000.0, split=600.0),
                            holder("b", alloc=1800.0, used=400.0, split=600.0))], k, pricing=PRICING)
    assert p.rejected == {}
    for ns in ("a", "b"):
        for hour in (7200, 10800):
            row = p.write.usage[key(ns, hour)]
            assert (row.allocated_s, row.split_s) == (Decimal(900), Decimal(300))
    assert p.write.usage[key("a", 7200)].idle_s == 400.0 and p.write.usage[key("b", 7200)].idle_s == 700.0
    books.apply(p)
    for ns in ("a", "b"):
        assert books.totals[NamespaceKey(ns, "USD")].split_s == 600.0
    (family,) = [f for f in namespace_counters(books) if f.name == "gpucost_split_gpu_seconds"]
    assert {s.labels["namespace"]: s.value for s in family.samples if s.name.endswith("_total")} == {
        "a": 600.0, "b": 600.0}


def test_an_agent_without_split_books_none() -> None:
    """An older agent sends no split_s: 0 then 1800 s held, 0 split booked (and nothing refused)."""
    books, k = Books(LedgerState()), kube()
    books.apply(books.prepare([snap(1, 7200.0, holder("a", alloc=0.0, used=0.0, split=None))], k, pricing=PRICING))
    p = books.prepare([snap(2, 9000.0, holder("a", alloc=1800.0, used=900.0, split=None))], k, pricing=PRICING)
    assert p.rejected == {} and p.write.usage[key("a", 7200)].split_s == 0.0
    assert p.write.usage[key("a", 7200)].allocated_s == 1800.0


def test_split_above_allocated_is_refused_and_the_marks_kept() -> None:
    """From 100 to 130 s a holds 0.5 x 30 = 15 GPU-s but claims 16 split: refused (split_above_allocated), nothing
    written. At 160 s the sane counters (30 held, 12 split since the mark at 100 s) book 30 and 12: nothing lost."""
    books, k = Books(LedgerState()), kube()
    books.apply(books.prepare([snap(1, 100.0, holder("a", alloc=0.0, used=0.0, split=0.0))], k, pricing=PRICING))
    p = books.prepare([snap(2, 130.0, holder("a", alloc=15.0, used=5.0, split=16.0))], k, pricing=PRICING)
    assert p.rejected == {"n1": "split_above_allocated"} and p.write.usage == {} and p.write.hwm == []
    books.apply(p)
    p = books.prepare([snap(3, 160.0, holder("a", alloc=30.0, used=10.0, split=12.0))], k, pricing=PRICING)
    row = p.write.usage[key("a", 0)]
    assert p.rejected == {} and (row.allocated_s, row.split_s) == (Decimal(30), Decimal(12))


def test_a_decreasing_split_counter_is_a_counter_decrease() -> None:
    """Split 12 then 11 within one epoch (everything else advancing) cannot be: the snapshot is refused."""
    books, k = Books(LedgerState()), kube()
    books.apply(books.prepare([snap(1, 100.0, holder("a", alloc=15.0, used=5.0, split=12.0))], k, pricing=PRICING))
    p = books.prepare([snap(2, 130.0, holder("a", alloc=30.0, used=10.0, split=11.0))], k, pricing=PRICING)
    assert p.rejected == {"n1": "counter_decreased"}


def test_plausibility_of_split_by_hand() -> None:
    """The bound is the allocated delta (plus 1e-6): 15 split of 15 held passes, 15.00001 does not; a mark
    from before split was booked (``SPLIT_UNKNOWN``) advances no split, whatever the agent's cumulative value."""
    assert implausible([CounterMark(allocated_s=15.0, split_s=15.0)], wall=None, gpus=0) == ""
    assert implausible([CounterMark(allocated_s=15.0, split_s=15.00001)], wall=None, gpus=0) == "split_above_allocated"
    prev = CounterMark(allocated_s=100.0, split_s=SPLIT_UNKNOWN)
    assert counter_advance(prev, CounterMark(allocated_s=115.0, split_s=5000.0)) == CounterMark(allocated_s=15.0)
    assert counter_advance(CounterMark(allocated_s=100.0, split_s=40.0),
                           CounterMark(allocated_s=115.0, split_s=50.0)) == CounterMark(allocated_s=15.0, split_s=10.0)


async def test_split_is_booked_once_across_missed_pulls_restarts_and_epochs(ledger_target: LedgerTarget) -> None:
    """a on half an L4. e1 seq 1 at 100 s: 50 held, 20 split (first sight: the whole counters). Pulls 2 and 3
    are missed; seq 4 at 160 s: 80 held, 44 split -> 30 and 24. The aggregator restarts (books reloaded from
    the ledger) and pulls seq 4 again: stale, nothing. The agent lost its state: e2 seq 1 at 190 s, started at
    160 s, 15 held, 15 split -> the whole 15 and 15. Booked: 50 + 30 + 15 = 95 held, 20 + 24 + 15 = 59 split,
    in the usage rows (report: 59 / 3600 GPU-h) and the totals alike."""
    k = kube()
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    try:
        books = Books(await ledger.load_state())
        for s in (snap(1, 100.0, holder("a", alloc=50.0, used=10.0, split=20.0)),
                  snap(4, 160.0, holder("a", alloc=80.0, used=20.0, split=44.0))):
            p = books.prepare([s], k, pricing=PRICING)
            await ledger.commit(p.write)
            books.apply(p)
    finally:
        await ledger.close()
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    try:
        books = Books(await ledger.load_state())
        again = books.prepare([snap(4, 160.0, holder("a", alloc=80.0, used=20.0, split=44.0))], k, pricing=PRICING)
        assert again.stale == 1 and again.write.usage == {}
        p = books.prepare([snap(1, 190.0, holder("a", alloc=15.0, used=15.0, split=15.0), epoch="e2",
                                started_at=160.0)], k, pricing=PRICING)
        assert p.resets == 1
        await ledger.commit(p.write)
        books.apply(p)
        (row,) = [r for r in await ledger.run_report("namespace", since=None, until=None) if r["namespace"] == "a"]
        state = await ledger.load_state()
    finally:
        await ledger.close()
    assert row["split_gpu_hours"] == Decimal("0.016388889")  # 59 / 3600 = 0.0163888..., half-even to 9 digits
    assert row["allocated_gpu_hours"] == Decimal("0.026388889")  # 95 / 3600 = 0.0263888...
    assert state.totals[NamespaceKey("a", "USD")].split_s == 59.0
    assert state.totals[NamespaceKey("a", "USD")].allocated_s == 95.0
