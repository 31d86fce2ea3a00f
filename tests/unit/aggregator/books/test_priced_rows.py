"""Capacity rows by hand: seconds, joules and unmeasured-energy seconds split over three hours so each sums
exactly, money booked as positions along the agent's counter (so it telescopes), CO2e per row; time nobody
observed; and a holder's running totals."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.books.priced_rows import (
    book_unobserved,
    booked_parts,
    gpus_by_model,
    holder_totals,
    priced_capacity,
    usage_amounts,
)
from exporter.aggregator.books.rates import TickRates, slices
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import TickWrite
from exporter.model.books import CapacityAmounts, CapacityKey, CounterMark, NamespaceTotals, UsageAmounts
from exporter.model.pricing.document import parse_pricing
from exporter.model.pricing.labels import NodeFacts
from exporter.model.usage import GpuCapacity, UsageSnapshot

H100 = "NVIDIA H100 80GB HBM3"
# 1.00 a GPU-hour; 400 g/kWh at a PUE of 1.2 is 480 g per 3.6e6 J
PRICING = parse_pricing(f'default_price: 1\nmodels: {{"{H100}": 1.0}}\nemissions: {{grid_g_per_kwh: 400, pue: 1.2}}\n',
                        "p.yaml")
FACTS = NodeFacts("n1", H100)
THREE_HOURS = slices(3590.0, 7210.0)  # 10 s, 3600 s and 10 s of 3620 s


def _rates() -> TickRates:
    return TickRates(PRICING, [])


def test_capacity_over_three_hours_splits_every_amount_and_telescopes_its_money() -> None:
    """The counter goes from 1000.5 s, 5000 J to 1100.5 s, 5123.4567 J; 30 s of it had no energy reading."""
    rows = priced_capacity(_rates(), FACTS, seconds=100.0, energy_j=123.4567, unmeasured_energy_s=30.0,
                           parts=THREE_HOURS, span=(CounterMark(allocated_s=1000.5, energy_j=5000.0),
                                                    CounterMark(allocated_s=1100.5, energy_j=5123.4567)))
    assert [hour for hour, _ in rows] == [0, 3600, 7200]
    amounts = [a for _, a in rows]
    # 100 s x (10, 3600, 10) / 3620: 0.27624309|39, 99.44751381|22, 0.27624309|39; floored they leave one unit,
    # which goes to the largest remainder (the first, on a tie with the last)
    assert [a.seconds for a in amounts] == [Decimal("0.276243094"), Decimal("99.447513812"),
                                            Decimal("0.276243094")]
    # 5123.4567 J booked to the millijoule is 5123.457 (5000.000 before): 123.457 J, i.e. 123457 mJ x 10/3620 =
    # 341.04|1 mJ at each end and 122774.91|7 in the middle, whose remainder takes the unit left
    assert [a.energy_j for a in amounts] == [Decimal("0.341"), Decimal("122.775"), Decimal("0.341")]
    # 30 s x 10/3620 = 0.08287292|82 at each end, 29.83425414|36 in the middle (+1 unit)
    assert [a.unmeasured_energy_s for a in amounts] == [Decimal("0.082872928"), Decimal("29.834254144"),
                                                        Decimal("0.082872928")]
    # money at 1.00/h between positions 1000.5 and 1100.5: 1100.5/3600 = 0.305694444|4 -> 0.305694444, less
    # 1000.5/3600 = 0.277916666|7 -> 0.277916667: 0.027777777, however the rows round in between
    assert sum((a.cost for a in amounts), Decimal(0)) == Decimal("0.027777777")
    assert sum((a.list_cost for a in amounts), Decimal(0)) == Decimal("0.027777777")
    # CO2e: 122.775 J x 480 / 3.6e6 = 0.01637 g; 0.341 J x 480 / 3.6e6 = 0.0000454666|7 g
    assert [a.co2e_g for a in amounts] == [Decimal("0.000045467"), Decimal("0.016370000"), Decimal("0.000045467")]
    # the seconds whose CO2e is known: the row's seconds less its unmeasured ones
    assert amounts[1].co2e_s == Decimal("99.447513812") - Decimal("29.834254144")


def test_a_span_without_its_end_books_from_its_start_by_the_delta() -> None:
    """Before 1000 s, 100 J; a delta of 50 s and 20 J: positions 1000 -> 1050. At 3.60/h (0.001 a second)
    1.050 - 1.000 = 0.05."""
    pricing = parse_pricing(f'default_price: 1\nmodels: {{"{H100}": 3.6}}\n', "p.yaml")
    ((hour, row),) = priced_capacity(TickRates(pricing, []), FACTS, seconds=50.0, energy_j=20.0,
                                     parts=slices(3600.0, 3650.0),
                                     span=(CounterMark(allocated_s=1000.0, energy_j=100.0), None))
    assert hour == 3600
    assert row == CapacityAmounts(seconds=Decimal("50.000000000"), cost=Decimal("0.050000000"),
                                  list_cost=Decimal("0.050000000"), energy_j=Decimal("20.000"))


def test_the_counters_positions_decide_the_seconds_not_the_delta() -> None:
    """The delta says 50 s, the counter went from 1000 s to 1060 s: 60 s are booked (positions, so that many
    ticks add up to the counter's own total)."""
    ((_, row),) = priced_capacity(_rates(), FACTS, seconds=50.0, parts=slices(3600.0, 3650.0),
                                  span=(CounterMark(allocated_s=1000.0), CounterMark(allocated_s=1060.0)))
    assert row.seconds == Decimal("60.000000000")


def test_capacity_without_a_counter_is_booked_as_given_with_nothing_else_assumed() -> None:
    """No span, no energy, no unmeasured seconds given: the seconds and nothing more. With energy: that energy."""
    ((_, bare),) = priced_capacity(_rates(), FACTS, seconds=3600.0, parts=slices(0.0, 3600.0))
    assert bare == CapacityAmounts(seconds=Decimal("3600.000000000"), cost=Decimal("1.000000000"),
                                   list_cost=Decimal("1.000000000"))
    ((_, measured),) = priced_capacity(_rates(), FACTS, seconds=3600.0, energy_j=5000.0, parts=slices(0.0, 3600.0))
    assert measured.energy_j == Decimal("5000.000")


def test_time_nobody_observed_is_booked_per_model_with_gpus_and_all_of_it_unmeasured() -> None:
    """Half a second on a node of 1 H100 (and a model listed with 0 GPUs, which books nothing): 0.5 s, no joules,
    all 0.5 s of it without an energy reading, 0.5 / 3600 x 1.00 = 0.000138888|9."""
    w = TickWrite()
    book_unobserved(w, node="n1", kube=KubeState(), rates=_rates(), gpus_by_model={"NVIDIA L4": 0, H100: 1},
                    start=3600.0, end=3600.5)
    assert w.unobserved == {CapacityKey(3600, "n1", "", H100, "USD"): CapacityAmounts(
        seconds=Decimal("0.500000000"), cost=Decimal("0.000138889"), list_cost=Decimal("0.000138889"),
        unmeasured_energy_s=Decimal("0.500000000"))}


def test_no_time_nobody_observed_books_nothing() -> None:
    w = TickWrite()
    book_unobserved(w, node="n1", kube=KubeState(), rates=_rates(), gpus_by_model={H100: 1}, start=3600.0,
                    end=3600.0)
    assert w.unobserved == {} and w.unobserved_totals == {}


def test_a_delta_is_booked_once_to_its_places_then_split() -> None:
    """0.1234567891 to 9 digits is 0.123456789; 1.2346 to 3 is 1.235, split in halves 0.618 + 0.617 (the unit
    left to the first), and alone it stays 1.235."""
    assert booked_parts(0.1234567891, [Decimal(1)]) == [Decimal("0.123456789")]
    assert booked_parts(1.2346, [Decimal(1), Decimal(1)], places=3) == [Decimal("0.618"), Decimal("0.617")]
    assert booked_parts(1.2346, [Decimal(1)], places=3) == [Decimal("1.235")]


def test_a_holders_totals_carry_every_field_of_its_rows() -> None:
    total = UsageAmounts(allocated_s=Decimal(10), used_s=Decimal(4), unmeasured_s=Decimal(3), idle_s=Decimal(3),
                         cost=Decimal(2), idle_cost=Decimal("0.6"), energy_j=Decimal(500), list_cost=Decimal(5),
                         split_s=Decimal(1), co2e_g=Decimal("0.07"), co2e_s=Decimal(8),
                         unmeasured_energy_s=Decimal(2))
    breakdown, ns = holder_totals(CounterMark(allocated_s=10.0), total)
    assert (breakdown.allocated_s, breakdown.cost) == (Decimal(10), Decimal(2))
    assert ns == NamespaceTotals(allocated_s=Decimal(10), used_s=Decimal(4), unmeasured_s=Decimal(3),
                                 cost=Decimal(2), idle_cost=Decimal("0.6"), list_cost=Decimal(5),
                                 energy_j=Decimal(500), split_s=Decimal(1), co2e_g=Decimal("0.07"),
                                 co2e_s=Decimal(8), unmeasured_energy_s=Decimal(2))


def test_a_holders_idle_time_and_its_money_are_positions_along_its_counters() -> None:
    """Counters from 1000.1 s allocated, 200.2 used, 100.3 unmeasured (idle position 1000.1 - 200.2 - 100.3 =
    699.6) by 100, 40 and 10 s: idle 100 - 40 - 10 = 50 s, from 699.6 to 749.6. At 1.00/h: 749.6/3600 =
    0.208222222|2 less 699.6/3600 = 0.194333333|3 is 0.013888889 (from 900.2 or 1100.0 it would be 0.013888888).
    Cost: 1100.1/3600 = 0.305583333|3 less 1000.1/3600 = 0.277805555|6 = 0.027777777. Joules: 5123.4567 booked
    to the millijoule less 5000.0004 booked to it, 5123.457 - 5000.000 = 123.457."""
    before = CounterMark(allocated_s=1000.1, used_s=200.2, unmeasured_s=100.3, energy_j=5000.0004)
    after = CounterMark(allocated_s=1100.1, used_s=240.2, unmeasured_s=110.3, energy_j=5123.4567)
    d = CounterMark(allocated_s=100.0, used_s=40.0, unmeasured_s=10.0, energy_j=123.4563)
    (row,) = usage_amounts(d, parts=slices(3600.0, 3700.0), rates=[PRICING.rate(FACTS, at=3600.0)],
                           span=(before, after))
    assert (row.allocated_s, row.used_s, row.unmeasured_s, row.idle_s) == (Decimal(100), Decimal(40),
                                                                           Decimal(10), Decimal(50))
    assert row.idle_cost == Decimal("0.013888889")
    assert row.cost == row.list_cost == Decimal("0.027777777")
    assert row.energy_j == Decimal("123.457")


def test_a_holders_span_without_its_end_books_from_its_start_by_the_delta() -> None:
    """Before 1000 s (all used); a delta of 50 s: positions 1000 -> 1050, at 3.60/h 1.050 - 1.000 = 0.05."""
    pricing = parse_pricing(f'default_price: 1\nmodels: {{"{H100}": 3.6}}\n', "p.yaml")
    (row,) = usage_amounts(CounterMark(allocated_s=50.0, used_s=50.0), parts=slices(3600.0, 3650.0),
                           rates=[pricing.rate(FACTS, at=3600.0)],
                           span=(CounterMark(allocated_s=1000.0, used_s=1000.0), None))
    assert (row.allocated_s, row.used_s, row.idle_s, row.cost) == (Decimal(50), Decimal(50), Decimal(0),
                                                                   Decimal("0.05"))


def test_a_holders_counter_positions_decide_its_seconds_not_the_delta() -> None:
    (row,) = usage_amounts(CounterMark(allocated_s=50.0), parts=slices(3600.0, 3650.0),
                           rates=[PRICING.rate(FACTS, at=3600.0)],
                           span=(CounterMark(allocated_s=1000.0), CounterMark(allocated_s=1060.0)))
    assert row.allocated_s == Decimal(60)


def test_a_holders_rows_over_three_hours_telescope_and_split_joules_to_the_millijoule() -> None:
    """From 1000 s allocated (idle position 1000, nothing used yet) by 100 s, 40 used, 10 unmeasured: idle 50 s
    from 1000 to 1050. At 1.00/h the idle rows sum to 1050/3600 = 0.291666666|7 less 1000/3600 = 0.277777777|8,
    0.013888889, and the cost rows to 1100/3600 = 0.305555555|6 less it, 0.027777778. Joules 123.457 split as
    for capacity: 0.341, 122.775, 0.341."""
    before = CounterMark(allocated_s=1000.0, energy_j=5000.0)
    after = CounterMark(allocated_s=1100.0, used_s=40.0, unmeasured_s=10.0, energy_j=5123.4567)
    rows = usage_amounts(CounterMark(allocated_s=100.0, used_s=40.0, unmeasured_s=10.0, energy_j=123.4567),
                         parts=THREE_HOURS, rates=[PRICING.rate(FACTS, at=3600.0)] * 3, span=(before, after))
    assert sum((r.idle_s for r in rows), Decimal(0)) == Decimal(50)
    assert sum((r.idle_cost for r in rows), Decimal(0)) == Decimal("0.013888889")
    assert sum((r.cost for r in rows), Decimal(0)) == Decimal("0.027777778")
    assert [r.energy_j for r in rows] == [Decimal("0.341"), Decimal("122.775"), Decimal("0.341")]


def test_a_nodes_gpus_are_its_inventory_else_its_labels() -> None:
    """Inventory first (2 H100s, whatever the labels say); without one the GPU-count label, of the labelled
    model, else of the model "unknown"; neither: none."""
    kube = KubeState()
    kube.nodes["n1"] = {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": H100}
    kube.nodes["n2"] = {"nvidia.com/gpu.count": "4"}
    two = UsageSnapshot(node="n1", epoch="e1", timestamp=0.0,
                        capacity=[GpuCapacity(gpu_uuid=f"GPU-{i}", gpu_model=H100) for i in range(2)])
    assert gpus_by_model(two, kube) == {H100: 2}
    assert gpus_by_model(UsageSnapshot(node="n1", epoch="e1", timestamp=0.0), kube) == {H100: 8}
    assert gpus_by_model(UsageSnapshot(node="n2", epoch="e1", timestamp=0.0), kube) == {"unknown": 4}
    assert gpus_by_model(UsageSnapshot(node="n3", epoch="e1", timestamp=0.0), kube) == {}


def test_capacity_joules_in_one_hour_are_positions_booked_to_the_millijoule() -> None:
    """5000.0004 J -> 5000.000 and 5123.4567 J -> 5123.457: 123.457 J (neither 123.4567 nor 123.4563)."""
    ((_, row),) = priced_capacity(_rates(), FACTS, seconds=60.0, energy_j=123.4563, parts=slices(3600.0, 3660.0),
                                  span=(CounterMark(allocated_s=0.0, energy_j=5000.0004),
                                        CounterMark(allocated_s=60.0, energy_j=5123.4567)))
    assert row.energy_j == Decimal("123.457") and str(row.energy_j) == "123.457"
