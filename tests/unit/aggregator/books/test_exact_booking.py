"""Booking in fixed point: a counter's delta booked once, split over its hours so the rows sum exactly to it,
each row's money rounded once (half-even, 9 digits) from its booked seconds."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.books.booking import Books, Prepared
from exporter.aggregator.books.priced_rows import holder_totals, usage_amounts
from exporter.aggregator.books.rates import slices
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.books import CapacityAmounts, CounterMark, UsageAmounts
from exporter.model.pricing.document import parse_pricing
from exporter.model.pricing.labels import CapacityType
from exporter.model.pricing.resolve import EnergyTariff, GpuRate, PriceSource
from exporter.model.usage import GpuCapacity, UnallocatedCounter, UsageSnapshot

T0 = 1_800_000_000.0  # an hour boundary
H100 = "NVIDIA H100 80GB HBM3"


def _rate(per_hour: float, *, list_per_hour: float | None = None, energy: EnergyTariff | None = None) -> GpuRate:
    return GpuRate(list_per_gpu_hour=per_hour if list_per_hour is None else list_per_hour,
                   effective_per_gpu_hour=per_hour, source=PriceSource.MODEL, capacity_type=CapacityType.ON_DEMAND,
                   known=True, energy=energy)


def test_a_delta_across_an_hour_is_split_and_priced_per_row() -> None:
    # 100 s over [3590, 3690]: 10 s in hour 0, 90 s in hour 3600; at 2.50/h:
    # 10 / 3600 x 2.50 = 0.0069444444|4 -> 0.006944444; 90 / 3600 x 2.50 = 0.0625 exactly
    parts = slices(3590.0, 3690.0)
    rows = usage_amounts(CounterMark(allocated_s=100.0, used_s=40.0), parts=parts, rates=[_rate(2.5)] * 2)
    assert [r.allocated_s for r in rows] == [Decimal(10), Decimal(90)]
    assert [r.cost for r in rows] == [Decimal("0.006944444"), Decimal("0.062500000")]
    # used 40 split 4 / 36; idle = 100 - 40 = 60 split 6 / 54, idle cost 6 / 3600 x 2.50 = 0.0041666666|7
    assert [r.used_s for r in rows] == [Decimal(4), Decimal(36)]
    assert [r.idle_s for r in rows] == [Decimal(6), Decimal(54)]
    assert [r.idle_cost for r in rows] == [Decimal("0.004166667"), Decimal("0.037500000")]


def test_parts_that_do_not_divide_sum_exactly_to_the_delta() -> None:
    # 1 s over [2400, 9600]: shares 1/6, 1/2, 1/3 -> 0.1666666666|7, 0.5, 0.3333333333|3: rounded down to
    # 0.166666666 + 0.5 + 0.333333333 = 0.999999999, the unit left goes to the largest remainder (the first)
    parts = slices(2400.0, 9600.0)
    rows = usage_amounts(CounterMark(allocated_s=1.0), parts=parts, rates=[_rate(3.6)] * 3)
    assert [r.allocated_s for r in rows] == [Decimal("0.166666667"), Decimal("0.5"), Decimal("0.333333333")]
    total = sum(rows[1:], rows[0])
    assert total.allocated_s == Decimal("1.000000000")
    # 3.60/h is 0.001 a second: 0.000166667, 0.0005, 0.000333333 (each exact from its booked seconds)
    assert [r.cost for r in rows] == [Decimal("0.000166667"), Decimal("0.000500000"), Decimal("0.000333333")]
    _breakdown, ns = holder_totals(CounterMark(allocated_s=1.0), total)
    assert ns.allocated_s == Decimal("1.000000000") and ns.cost == Decimal("0.001000000")


def test_a_seventh_of_a_gpu_for_an_hour_at_2_50() -> None:
    # 3600 / 7 GPU-s = 514.2857142857|14 -> 514.285714286; x 2.50 / 3600 = 0.3571428571|43 -> 0.357142857
    (row,) = usage_amounts(CounterMark(allocated_s=3600 / 7), parts=slices(0.0, 3600.0), rates=[_rate(2.5)])
    assert row.allocated_s == Decimal("514.285714286")
    assert row.cost == Decimal("0.357142857")
    assert row == UsageAmounts(allocated_s=Decimal("514.285714286"), idle_s=Decimal("514.285714286"),
                               cost=Decimal("0.357142857"), idle_cost=Decimal("0.357142857"),
                               list_cost=Decimal("0.357142857"), energy_j=Decimal("0.000"))


def test_owned_hardware_energy_is_booked_to_the_millijoule_and_priced_once() -> None:
    # 1234.5678 J -> 1234.568 J (3 digits); 1234.568 / 3.6e6 kWh x 0.12 x 1.5 = 0.0000617284 -> 0.000061728;
    # plus 1 GPU-h at 0.50 = 0.500061728 (one rounding of the sum)
    tariff = EnergyTariff(price_kwh=0.12, pue=1.5)
    (row,) = usage_amounts(CounterMark(allocated_s=3600.0, used_s=3600.0, energy_j=1234.5678),
                           parts=slices(0.0, 3600.0), rates=[_rate(0.5, energy=tariff)])
    assert row.energy_j == Decimal("1234.568")
    assert row.cost == Decimal("0.500061728")
    assert row.list_cost == Decimal("0.500000000") and row.idle_cost == 0


def test_money_of_many_ticks_telescopes_to_the_price_of_their_total() -> None:
    # 3 ticks of 1 s at 1.00/h: each alone is 1/3600 = 0.0002777777|8 -> 0.000277778, three = 0.000833334;
    # booked between positions (0 -> 1 -> 2 -> 3 s): 0.000277778 + (0.000555556 - 0.000277778)
    # + (0.000833333 - 0.000555556) = 0.000833333 = book(3 / 3600), the price of the total rounded once
    costs = []
    for t in range(3):
        before, after = CounterMark(allocated_s=float(t)), CounterMark(allocated_s=float(t + 1))
        (row,) = usage_amounts(CounterMark(allocated_s=1.0), parts=slices(float(t), t + 1.0), rates=[_rate(1.0)],
                               span=(before if t else None, after))
        costs.append(row.cost)
    assert costs == [Decimal("0.000277778"), Decimal("0.000277778"), Decimal("0.000277777")]
    assert sum(costs) == Decimal("0.000833333")


def _free_gpu_ticks(*, tick: float, ticks: int, pricing_yaml: str) -> list[Prepared]:
    """One node whose one GPU nobody holds, its agent's unallocated counter advancing ``tick`` s a tick."""
    books, kube = Books(LedgerState()), KubeState()
    kube.nodes["n"] = {}
    pricing = parse_pricing(pricing_yaml, "p.yaml")
    out = []
    for seq in range(ticks + 1):
        snap = UsageSnapshot(node="n", epoch="e1", timestamp=T0 + seq * tick, seq=seq + 1, started_at=T0, holders=[],
                             unallocated=[UnallocatedCounter(gpu_model=H100, seconds=seq * tick)],
                             capacity=[GpuCapacity(gpu_uuid="GPU-0", gpu_model=H100)])
        p = books.prepare([snap], kube, pricing=pricing)
        books.apply(p)
        out.append(p)
    return out


def test_capacity_of_many_ticks_telescopes_to_the_price_of_its_total() -> None:
    """A free H100 at 1.00/h for two hours in 15 s ticks (480 ticks): each tick is 15 / 3600 x 1.00 =
    0.0041666666|67, which rounded per tick (0.004166667) would book 480 x 0.004166667 = 2.000000160. Booked as
    positions along the counter: each hour's row is exactly 3600 s and 1.000000000, the two 7200 s and 2.00."""
    prepared = _free_gpu_ticks(tick=15.0, ticks=480, pricing_yaml=f'default_price: 1\nmodels: {{"{H100}": 1.0}}\n')
    rows: dict[int, CapacityAmounts] = {}
    for p in prepared:
        for key, amount in p.write.unallocated.items():
            rows[key.hour] = rows[key.hour] + amount if key.hour in rows else amount
    assert sorted(rows) == [int(T0), int(T0) + 3600]
    assert [(r.seconds, r.cost, r.list_cost) for r in rows.values()] == [(Decimal(3600), Decimal(1), Decimal(1))] * 2
