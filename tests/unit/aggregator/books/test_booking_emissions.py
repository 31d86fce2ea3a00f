"""CO2e booked from measured joules, by hand: per usage row (the holder's joules), per capacity row (nobody
held the GPU), per namespace total; energy not measured has unknown CO2e and its GPU-seconds counted on the
rows; exactly once across a restart on both backends; a schema-12 ledger migrated on both backends."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from exporter.aggregator.books.booking import Books, Prepared
from exporter.aggregator.books.priced_rows import carbon_of
from exporter.aggregator.ledger.schema import TABLES_V12
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger, LedgerState
from exporter.model.books import CapacityKey, NamespaceKey
from exporter.model.pricing.document import Pricing, parse_pricing
from exporter.model.pricing.labels import CapacityType
from exporter.model.pricing.resolve import CarbonFactor, GpuRate, PriceSource
from exporter.model.usage import UnallocatedCounter, UsageSnapshot
from tests.ledger_versions import back_to, usage_as_of
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute
from tests.unit.aggregator.books.pricing_books import A100, H100, T0, cluster, snap

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

EMITTING = parse_pricing("""
default_price: 1
on_prem: [{model: "NVIDIA A100-SXM4-80GB", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}]
emissions: {grid_g_per_kwh: 400, pue: 1.2, pools: {green: 25}}
""", "p.yaml")
SILENT = parse_pricing("default_price: 1\n", "p.yaml")
HOUR = int(T0)


def node_at(node: str, seq: int, ts: float, *, held: float, energy_j: float, idle_s: float = 0.0,
            idle_j: float = 0.0, unmeasured_s: float = 0.0, model: str = H100) -> UsageSnapshot:
    """A 2-GPU node: one GPU held ``held`` s drawing ``energy_j``, the other idle ``idle_s`` s drawing ``idle_j``;
    ``unmeasured_s`` GPU-seconds whose energy was not measured (all cumulative)."""
    s = snap(node, seq, ts, held=held, gpus=2, model=model, energy_j=energy_j)
    return replace(s, unallocated=[UnallocatedCounter(gpu_model=model, seconds=idle_s, energy_j=idle_j)],
                   unmeasured_energy_s=unmeasured_s)


def book_hour(node: str, *, later: UsageSnapshot, pricing: Pricing = EMITTING,
              labels: dict[str, str] | None = None) -> tuple[Books, Prepared]:
    """Book ``node`` at T0 (nothing yet) then ``later``; the second tick's prepared write."""
    books, k = Books(LedgerState()), cluster(**{node: labels or {}})
    books.apply(books.prepare([node_at(node, 1, T0, held=0.0, energy_j=0.0)], k, pricing=pricing))
    return books, books.prepare([later], k, pricing=pricing)


def test_a_held_gpu_and_an_idle_one_emit_from_their_own_joules() -> None:
    """Rented H100s, 400 g/kWh, PUE 1.2. The held GPU drew 400 W for an hour: 1.44e6 J = 0.4 kWh x 1.2 x 400
    = 192 g on the holder's row and its namespace total; the idle one 100 W: 360,000 J = 0.1 kWh x 1.2 x 400 = 48 g
    on the unallocated row. Every GPU-second's CO2e is known (3600 s each); none unmeasured."""
    assert pytest.approx(192) == 1.44e6 / 3.6e6 * 1.2 * 400
    assert pytest.approx(48) == 360_000 / 3.6e6 * 1.2 * 400
    _books, p = book_hour("n", later=node_at("n", 2, T0 + 3600, held=3600.0, energy_j=1.44e6, idle_s=3600.0,
                                              idle_j=360_000.0))
    (row,) = p.write.usage.values()
    assert row.co2e_g == pytest.approx(192) and row.co2e_s == 3600.0 and row.unmeasured_energy_s == 0.0
    assert p.write.totals[NamespaceKey("ns", "USD")].co2e_g == pytest.approx(192)
    idle = p.write.unallocated[CapacityKey(HOUR, "n", "", H100, "USD")]
    assert idle.co2e_g == pytest.approx(48) and idle.co2e_s == 3600.0


def test_owned_gpus_use_their_own_pue_and_a_pool_its_own_intensity() -> None:
    """An owned A100 (on_prem pue 1.5) drew 198,000 J: 0.055 kWh x 1.5 x 400 = 33 g. An H100 in pool green
    (25 g/kWh) drew 1.44e6 J: 0.4 kWh x 1.2 x 25 = 12 g."""
    assert pytest.approx(33) == 198_000 / 3.6e6 * 1.5 * 400
    assert pytest.approx(12) == 1.44e6 / 3.6e6 * 1.2 * 25
    _b, owned = book_hour("dc", later=node_at("dc", 2, T0 + 3600, held=3600.0, energy_j=198_000.0, model=A100))
    assert next(iter(owned.write.usage.values())).co2e_g == pytest.approx(33)
    _b, green = book_hour("g", later=node_at("g", 2, T0 + 3600, held=3600.0, energy_j=1.44e6),
                          labels={"gpu.platform/pool": "green"})
    assert next(iter(green.write.usage.values())).co2e_g == pytest.approx(12)


def test_shared_gpu_holders_emit_by_their_fraction_of_the_joules() -> None:
    """Two holders of one GPU at fraction 0.5 each: the agent splits the 1.44e6 J by fraction (720,000 J each);
    each row emits 0.2 kWh x 1.2 x 400 = 96 g, the two summing to the device's 192 g."""
    def two(seq: int, ts: float, *, held: float, joules: float) -> UsageSnapshot:
        s = node_at("s", seq, ts, held=held, energy_j=joules)
        h = s.holders[0]
        return replace(s, holders=[replace(h, fraction=0.5), replace(h, pod="p-other", fraction=0.5)])
    books, k = Books(LedgerState()), cluster(s={})
    books.apply(books.prepare([two(1, T0, held=0.0, joules=0.0)], k, pricing=EMITTING))
    p = books.prepare([two(2, T0 + 3600, held=1800.0, joules=720_000.0)], k, pricing=EMITTING)
    grams = sorted(r.co2e_g for r in p.write.usage.values())
    assert grams == [pytest.approx(96), pytest.approx(96)]
    assert sum(grams) == pytest.approx(192)


def test_unmeasured_energy_has_unknown_co2e_and_its_seconds_on_the_row() -> None:
    """DCGM did not measure the held GPU for the hour (0 J, 3600 s counted by the agent): its row has no known
    CO2e (co2e_s 0) and 3600 s of energy not measured; the idle GPU's 48 g are still known."""
    _b, p = book_hour("n", later=node_at("n", 2, T0 + 3600, held=3600.0, energy_j=0.0, idle_s=3600.0,
                                          idle_j=360_000.0, unmeasured_s=3600.0))
    (row,) = p.write.usage.values()
    assert (row.co2e_g, row.co2e_s, row.unmeasured_energy_s) == (Decimal(0), Decimal(0), Decimal(3600))
    total = p.write.totals[NamespaceKey("ns", "USD")]
    assert (total.co2e_s, total.unmeasured_energy_s) == (Decimal(0), Decimal(3600))
    idle = p.write.unallocated[CapacityKey(HOUR, "n", "", H100, "USD")]
    assert idle.co2e_g == pytest.approx(48) and idle.unmeasured_energy_s == 0.0


def test_without_an_emissions_section_no_co2e_is_known_but_unmeasured_energy_is_counted() -> None:
    """No ``emissions:``: co2e_g and co2e_s stay 0 on every row (reported as unknown, not as 0 g); the 3600 s of
    energy not measured are still booked."""
    _b, p = book_hour("n", pricing=SILENT, later=node_at("n", 2, T0 + 3600, held=3600.0, energy_j=0.0,
                                                          idle_s=3600.0, idle_j=360_000.0, unmeasured_s=3600.0))
    (row,) = p.write.usage.values()
    assert (row.co2e_g, row.co2e_s, row.unmeasured_energy_s) == (Decimal(0), Decimal(0), Decimal(3600))
    idle = p.write.unallocated[CapacityKey(HOUR, "n", "", H100, "USD")]
    assert (idle.co2e_g, idle.co2e_s) == (Decimal(0), Decimal(0))


async def test_co2e_is_booked_exactly_once_across_a_restart(ledger_target: LedgerTarget) -> None:
    """Two half-hours of 400 W (720,000 J each = 96 g). After the first commit the aggregator restarts from the
    ledger; the second half-hour is prepared but the process dies before committing; the restarted books see
    the first snapshot again (stale: nothing) and the second once: 96 + 96 = 192 g in the rows and totals."""
    k = cluster(n={})
    snaps = [node_at("n", 1, T0, held=0.0, energy_j=0.0), node_at("n", 2, T0 + 1800, held=1800.0, energy_j=720_000.0),
             node_at("n", 3, T0 + 3600, held=3600.0, energy_j=1.44e6)]

    async def restarted() -> tuple[Ledger, Books]:
        ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
        await ledger.open()
        return ledger, Books(await ledger.load_state())

    ledger, books = await restarted()
    for s in snaps[:2]:
        p = books.prepare([s], k, pricing=EMITTING)
        await ledger.commit(p.write)
        books.apply(p)
    books.prepare([snaps[2]], k, pricing=EMITTING)  # prepared, never committed: the process died here
    await ledger.close()
    ledger, books = await restarted()
    try:
        for s in snaps[1:]:  # the agent resends what it was not acked for, and then the next
            p = books.prepare([s], k, pricing=EMITTING)
            await ledger.commit(p.write)
            books.apply(p)
        (grams,) = await ledger.query("SELECT SUM(co2e_g) FROM usage")
        state = await ledger.load_state()
    finally:
        await ledger.close()
    assert float(grams[0]) == pytest.approx(96 + 96)
    assert state.totals[NamespaceKey("ns", "USD")].co2e_g == pytest.approx(192)
    assert state.totals[NamespaceKey("ns", "USD")].co2e_s == pytest.approx(3600)


async def test_schema_12_ledger_migrates_to_13(ledger_target: LedgerTarget) -> None:
    """A ledger a schema-12 build wrote (no emissions columns) opens at 13 on both backends: its rows keep their
    amounts with CO2e unknown (0 g over 0 known seconds) and 0 s unmeasured; rows booked after it carry CO2e."""
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    await ledger.close()
    raw_execute(ledger_target, *back_to(12, backend=ledger_target.backend),
                *usage_as_of(TABLES_V12, backend=ledger_target.backend, hour=HOUR),
                "INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
                "priority_class, currency, claim, sharing, allocated_s, used_s, unmeasured_s, idle_s, cost, idle_cost, "
                f"energy_j, list_cost) VALUES ('default', {HOUR}, 'ns', 'p-n', 'p-n', 'n', '', '{H100}', '', '', "
                "'USD', '', '', 3600, 0, 0, 3600, 1.0, 1.0, 0, 1.0)",
                "INSERT INTO totals (cluster, namespace, currency, allocated_s, used_s, unmeasured_s, cost, idle_cost, "
                "list_cost, energy_j) VALUES ('default', 'ns', 'USD', 3600, 0, 0, 1.0, 1.0, 1.0, 0)")
    again = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await again.open()
    try:
        assert await again.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert SCHEMA_VERSION >= 13
        rows = await again.query("SELECT allocated_s, energy_j, co2e_g, co2e_s, unmeasured_energy_s FROM usage")
        assert [tuple(float(v) for v in r) for r in rows] == [(3600.0, 0.0, 0.0, 0.0, 0.0)]
        state = await again.load_state()
        books = Books(state)
        k = cluster(n={})
        books.marks.clear()
        for s in (node_at("n", 1, T0 + 3600, held=0.0, energy_j=0.0),
                  node_at("n", 2, T0 + 7200, held=3600.0, energy_j=1.44e6)):
            p = books.prepare([s], k, pricing=EMITTING)
            await again.commit(p.write)
            books.apply(p)
        after = await again.query(f"SELECT co2e_g FROM usage WHERE hour = {HOUR + 3600}")
    finally:
        await again.close()
    assert state.totals[NamespaceKey("ns", "USD")].co2e_s == 0.0
    assert [float(g) for (g,) in after] == [pytest.approx(192)]


def test_no_joules_is_no_known_co2e_whatever_nanoseconds_the_counters_differ_by() -> None:
    """A row that drew no measured joules has unknown CO2e, even where its booked seconds (positions along the
    allocated counter, 1199.900000095) exceed the unmeasured-energy seconds given to it (a float delta,
    1199.899999911) by a few nanoseconds: (0 g, 0 s known), never a known 0 g over 1.84e-7 s. With joules: 0.4 kWh
    x 1.2 x 400 g/kWh = 192 g, known for 3600 - 0 s."""
    rate = GpuRate(list_per_gpu_hour=1.0, effective_per_gpu_hour=1.0, source=PriceSource.MODEL,
                   capacity_type=CapacityType.ON_DEMAND, known=True, carbon=CarbonFactor(g_per_kwh=400, pue=1.2))
    assert carbon_of(rate, joules=Decimal(0), seconds=Decimal("1199.900000095"),
                     unmeasured_s=Decimal("1199.899999911")) == (Decimal(0), Decimal(0))
    assert carbon_of(rate, joules=Decimal(1_440_000), seconds=Decimal(3600), unmeasured_s=Decimal(0)) == (
        Decimal(192), Decimal(3600))
