"""Energy of capacity nobody held, and GPU-seconds whose energy nobody measured, by hand: booked in the
unallocated rows, priced only on owned hardware, counted per node, held to the power envelope, and kept
by the ledger (with a schema-5 ledger migrated on both backends)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from decimal import Decimal

import pytest

from exporter.aggregator.books.booking import Books
from exporter.aggregator.books.gauges import Gauges
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger, LedgerState
from exporter.aggregator.web.metrics import AggregatorCollector, MetricsInputs
from exporter.model.books import CapacityKey, CapacityTotalKey, CounterMark, NodeKey
from exporter.model.plausibility import MAX_GPU_WATTS, implausible
from exporter.model.pricing.document import Pricing, parse_pricing
from exporter.model.usage import UnallocatedCounter, UsageSnapshot
from tests.ledger_versions import back_to
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute
from tests.unit.aggregator.books.pricing_books import A100, COMMITTED, H100, T0, cluster, snap

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

OWNED = parse_pricing("""
default_price: 1
on_prem: [{model: "NVIDIA A100-SXM4-80GB", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}]
""", "p.yaml")
RENTED = Pricing(COMMITTED.doc.model_copy(update={"commitments": []}))  # H100 at 4.00


def with_idle(s: UsageSnapshot, *, seconds: float, energy_j: float, unmeasured_s: float = 0.0) -> UsageSnapshot:
    """``s`` plus one GPU nobody held: ``seconds`` of it and the ``energy_j`` it drew, so far."""
    model = s.holders[0].gpu_model or ""
    return replace(s, unallocated=[UnallocatedCounter(gpu_model=model, seconds=seconds, energy_j=energy_j)],
                   unmeasured_energy_s=unmeasured_s)


def two_snapshots(node: str, model: str, *, energy_j: float, unmeasured_s: float = 0.0) -> tuple[
        UsageSnapshot, UsageSnapshot]:
    """A 2-GPU node, one GPU held and one idle, at T0 and an hour later."""
    first = with_idle(snap(node, 1, T0, held=0.0, gpus=2, model=model), seconds=0.0, energy_j=0.0)
    later = with_idle(snap(node, 2, T0 + 3600, held=3600.0, gpus=2, model=model), seconds=3600.0, energy_j=energy_j,
                      unmeasured_s=unmeasured_s)
    return first, later


def test_unallocated_energy_is_priced_on_owned_hardware() -> None:
    """The idle owned A100 drew 198,000 J in the hour (55 W x 3600 s): 198000 / 3.6e6 = 0.055 kWh x 0.12 x
    1.5 = 0.0099. __unallocated__: capital 1 GPU-h x 17520 / (4 x 8760) = 0.50, plus 0.0099 = 0.5099;
    list 0.50 (no energy in the list price); the row keeps the joules."""
    books, k = Books(LedgerState()), cluster(dc={})
    first, later = two_snapshots("dc", A100, energy_j=55.0 * 3600)
    books.apply(books.prepare([first], k, pricing=OWNED))
    p = books.prepare([later], k, pricing=OWNED)
    row = p.write.unallocated[CapacityKey(int(T0), "dc", "", A100, "USD")]
    assert row.seconds == 3600 and row.energy_j == Decimal("198000.000")
    assert row.cost == Decimal("0.509900000")  # 0.50 + 0.0099, exactly
    assert row.list_cost == Decimal("0.50")
    assert p.write.unallocated_totals[CapacityTotalKey("dc", "", A100, "USD")].cost == Decimal("0.5099")


def test_unallocated_energy_costs_nothing_on_rented_gpus_but_is_kept() -> None:
    """The same joules on a rented H100 at 4.00: cost 1 GPU-h x 4.00 = 4.00, energy kept (198,000 J)."""
    books, k = Books(LedgerState()), cluster(n={})
    first, later = two_snapshots("n", H100, energy_j=198_000.0)
    books.apply(books.prepare([first], k, pricing=RENTED))
    p = books.prepare([later], k, pricing=RENTED)
    row = p.write.unallocated[CapacityKey(int(T0), "n", "", H100, "USD")]
    assert row.cost == 4 and row.energy_j == 198_000


def test_energy_without_new_idle_seconds_is_still_booked() -> None:
    """No idle second was added in this interval (unallocated stays at 3600 s: the other GPU's 15 s went to
    a pod that lived between ticks), yet 1000 J of energy was nobody's: the unallocated row books 0 s,
    1000 J and their cost 1000 / 3.6e6 x 0.12 x 1.5 = 0.00005."""
    books, k = Books(LedgerState()), cluster(dc={})
    first, later = two_snapshots("dc", A100, energy_j=0.0)
    books.apply(books.prepare([first], k, pricing=OWNED))
    books.apply(books.prepare([later], k, pricing=OWNED))
    again = with_idle(snap("dc", 3, T0 + 3615, held=3615.0, gpus=2, model=A100), seconds=3600.0, energy_j=1000.0)
    p = books.prepare([again], k, pricing=OWNED)
    (row,) = p.write.unallocated.values()
    assert row.seconds == 0 and row.energy_j == 1000
    assert row.cost == Decimal("0.000050000")  # 1000 / 3.6e6 kWh x 0.12 x 1.5 = 0.00005


def test_unmeasured_energy_seconds_per_node_and_the_series() -> None:
    """dc's agent could not measure one GPU for the hour: 3600 s, then 1800 s more: 5400 s on
    gpucost_unmeasured_energy_seconds_total{node="dc"}; the idle GPU's 198,000 J on
    gpucost_energy_joules_total{namespace="__unallocated__"}."""
    books, k = Books(LedgerState()), cluster(dc={})
    first, later = two_snapshots("dc", A100, energy_j=198_000.0, unmeasured_s=3600.0)
    books.apply(books.prepare([first], k, pricing=OWNED))
    p = books.prepare([later], k, pricing=OWNED)
    assert list(p.write.unmeasured_energy) == [NodeKey("dc")]
    assert p.write.unmeasured_energy[NodeKey("dc")].seconds == 3600.0
    books.apply(p)
    books.apply(books.prepare([with_idle(snap("dc", 3, T0 + 5400, held=5400.0, gpus=2, model=A100), seconds=5400.0,
                                         energy_j=198_000.0, unmeasured_s=5400.0)], k, pricing=OWNED))
    collector = AggregatorCollector(lambda: MetricsInputs(
        is_leader=True, books=books, gauges=Gauges(), kube=k, pricing=OWNED, now=T0 + 5400, kube_up=True,
        pricing_reload_errors=0, snapshots_rejected=Counter(), team_label="team", breakdown_series=False))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collector.collect() for s in f.samples}
    assert samples[("gpucost_unmeasured_energy_seconds_total", (("node", "dc"),))] == pytest.approx(3600 + 1800)
    assert samples[("gpucost_energy_joules_total", (("namespace", "__unallocated__"),))] == pytest.approx(198_000.0)


def test_energy_above_the_power_envelope_refuses_the_snapshot() -> None:
    """2 GPUs for an hour: at most 2 x 2000 W x (3600 x 1.001 + 1) s = 14,418,400 J. 14.4 MJ (2 kW each)
    is believed; 14.5 MJ is not, and the node's snapshot is refused whole (its marks stay)."""
    assert MAX_GPU_WATTS == 2000.0
    bound = 2 * 2000.0 * (3600 * 1.001 + 1)
    assert bound == pytest.approx(14_418_400.0)
    ok = [CounterMark(allocated_s=3600.0, energy_j=7.2e6), CounterMark(allocated_s=3600.0, energy_j=7.2e6)]
    assert implausible(ok, wall=3600.0, gpus=2) == ""
    hot = [CounterMark(allocated_s=3600.0, energy_j=7.2e6), CounterMark(allocated_s=3600.0, energy_j=7.3e6)]
    assert implausible(hot, wall=3600.0, gpus=2) == "energy_above_power_envelope"
    books, k = Books(LedgerState()), cluster(dc={})
    first, later = two_snapshots("dc", A100, energy_j=14.5e6)
    books.apply(books.prepare([first], k, pricing=OWNED))
    p = books.prepare([later], k, pricing=OWNED)
    assert p.rejected == {"dc": "energy_above_power_envelope"} and not p.write.unallocated


def test_unmeasured_energy_seconds_cannot_outrun_the_wall() -> None:
    """2 GPUs for an hour: 7200 GPU-seconds can go unmeasured (bound 2 x (3600 x 1.001 + 1) = 7209.2); 7300
    cannot. The unmeasured seconds overlap held and idle time, so they are not summed with them."""
    books, k = Books(LedgerState()), cluster(dc={})
    first, later = two_snapshots("dc", A100, energy_j=0.0, unmeasured_s=7200.0)
    books.apply(books.prepare([first], k, pricing=OWNED))
    assert books.prepare([later], k, pricing=OWNED).rejected == {}
    first, later = two_snapshots("dc2", A100, energy_j=0.0, unmeasured_s=7300.0)
    books.apply(books.prepare([first], k, pricing=OWNED))
    assert books.prepare([later], k, pricing=OWNED).rejected == {"dc2": "faster_than_wall_time"}


async def test_ledger_keeps_capacity_energy_and_unmeasured_seconds(ledger_target: LedgerTarget) -> None:
    """Booked, committed, reloaded on both backends: the unallocated row's 198,000 J and cost 0.5099, and
    dc's 3600 unmeasured seconds (what the counters are restored from)."""
    books, k = Books(LedgerState()), cluster(dc={})
    first, later = two_snapshots("dc", A100, energy_j=198_000.0, unmeasured_s=3600.0)
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    try:
        for s in (first, later):
            p = books.prepare([s], k, pricing=OWNED)
            await ledger.commit(p.write)
            books.apply(p)
        state = await ledger.load_state()
        rows = await ledger.query("SELECT seconds, cost, energy_j FROM unallocated")
    finally:
        await ledger.close()
    total = state.unallocated_totals[CapacityTotalKey("dc", "", A100, "USD")]
    assert total.seconds == 3600 and total.energy_j == 198_000
    assert total.cost == Decimal("0.5099")
    assert state.unmeasured_energy[NodeKey("dc")].seconds == 3600.0
    ((seconds, cost, joules),) = rows
    assert float(seconds) == 3600.0 and float(cost) == pytest.approx(0.5099)
    assert float(joules) == pytest.approx(198_000.0)


async def test_schema_7_ledger_migrates_to_8(ledger_target: LedgerTarget) -> None:
    """A ledger a schema-7 build wrote (no capacity energy, no unmeasured-energy table) opens at the current
    version on both backends: its rows are kept with 0 J (nothing was measured for them), the new table is empty."""
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    await ledger.close()
    raw_execute(ledger_target, *back_to(7, backend=ledger_target.backend),
                "INSERT INTO unallocated (cluster, hour, node, pool, gpu_model, currency, seconds, cost, list_cost) "
                "VALUES ('default', 3600, 'n1', 'p', 'M', 'USD', 7200, 8.0, 8.0)",
                "INSERT INTO unallocated_totals (cluster, node, pool, gpu_model, currency, seconds, cost, list_cost) "
                "VALUES ('default', 'n1', 'p', 'M', 'USD', 7200, 8.0, 8.0)")
    again = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await again.open()
    try:
        assert await again.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert SCHEMA_VERSION == 15
        rows = await again.query("SELECT seconds, cost, energy_j FROM unallocated")
        assert [tuple(float(v) for v in r) for r in rows] == [(7200.0, 8.0, 0.0)]
        assert await again.query("SELECT COUNT(*) FROM unmeasured_energy_totals") == [(0,)]
        state = await again.load_state()
    finally:
        await again.close()
    assert state.unallocated_totals[CapacityTotalKey("n1", "p", "M", "USD")].energy_j == 0.0
    assert state.unmeasured_energy == {}
