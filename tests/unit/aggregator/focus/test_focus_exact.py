"""FOCUS amounts exact to the 9th digit (ARCHITECTURE.md "Exact amounts"), on the row builder itself: golden rows
with the arithmetic written out, and a property over random fleets booked either as an exact ledger books them
(Decimals of 9 digits) or as a float ledger did (binary floats, unrounded)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.aggregator.focus.amounts import CostCarry, price_point
from exporter.aggregator.focus.columns import ColumnType, columns_for
from exporter.aggregator.focus.export import focus_hours, query_of
from exporter.aggregator.focus.format import Scalar, decimal_text, money
from exporter.aggregator.focus.ledger_source import (
    CapacityRecord,
    CommitmentRecord,
    UsageRecord,
    Window,
    inspect_ledger,
    read_usage,
)
from exporter.aggregator.focus.rows import FocusSettings, Row, hour_rows
from exporter.aggregator.ledger.report import Query
from exporter.aggregator.ledger.schema import TABLES_V12
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.aggregator.ledger.store import Ledger
from tests.ledger_versions import back_to, usage_as_of
from tests.unit.aggregator.focus.focus_helpers import CLUSTER, UsageRow, write_ledger

HOUR = 1_793_714_400  # 2026-11-03T14:00:00Z
A100 = "NVIDIA A100-SXM4-80GB"
S = FocusSettings(cluster="prod-eu1")
NANO = Decimal("1e-9")
AMOUNT_COLUMNS = tuple(c.name for c in columns_for("1.3") if c.type is ColumnType.DECIMAL)


def usage(*, seconds: float | Decimal, cost: float | Decimal, node: str = "a100-1", pod: str = "p",
          mig: str = "", list_cost: float | Decimal | None = None) -> UsageRecord:
    """A holder's hour as the ledger reader hands it: amounts through ``money``, the reader's boundary."""
    zero = Decimal(0)
    return UsageRecord(HOUR, "ns", pod, "w", node, "pool", A100, mig, "", "USD", allocated_s=money(seconds),
                       used_s=money(seconds), unmeasured_s=zero, idle_s=zero, cost=money(cost),
                       list_cost=money(cost if list_cost is None else list_cost), idle_cost=zero, energy_j=zero,
                       co2e_g=zero, co2e_s=zero)


def capacity(*, seconds: float | Decimal, cost: float | Decimal, node: str = "a100-1",
             state: str = "Unallocated") -> CapacityRecord:
    return CapacityRecord(state, HOUR, node, "pool", A100, "USD", money(seconds), money(cost), money(cost),
                          Decimal(0), Decimal(0))


def nano(x: Decimal) -> Decimal:
    with localcontext(prec=80):
        return x.quantize(NANO, rounding=ROUND_HALF_EVEN)


def text(row: Row, column: str) -> str:
    value = row[column]
    assert isinstance(value, Decimal), (column, value)
    return decimal_text(value)


def test_half_a_gpu_hour_at_2_50_is_1_25_not_float_noise() -> None:
    """120 ticks of 15 s on one GPU at 2.50/h, summed in float as a float ledger books them: each tick
    2.50 x 15 / 3600 = 0.0104166..., the sum 1.2500000000000002 (noise). Exported: 0.5 GPU-h, price 2.5,
    EffectiveCost = ListCost = ContractedCost = 2.5 x 0.5 = 1.25 exactly."""
    booked = 0.0
    for _ in range(120):
        booked += 2.5 * 15 / 3600
    assert repr(booked) == "1.2500000000000002"  # the noise the ledger hands over
    for cost in (booked, Decimal("1.250000000")):  # a float ledger's, an exact ledger's
        (row,) = hour_rows([usage(seconds=1800.0, cost=cost)], [], s=S)
        assert text(row, "EffectiveCost") == text(row, "BilledCost") == "1.25"
        assert text(row, "PricingQuantity") == "0.5" and text(row, "ListUnitPrice") == "2.5"
        assert text(row, "ListCost") == text(row, "ContractedCost") == "1.25"


def test_a_seventh_of_a_gpu_for_an_hour_at_2_50() -> None:
    """A 1g.10gb MIG slice (1/7 GPU) for an hour at 2.50: GPU-hours 1/7 = 0.142857142857... -> half-even to 9
    digits 0.142857143 (the 10th digit, 8, rounds up). The price recovered from the booked cost is 2.5 (an exact
    ledger books 2.5 / 7 = 0.357142857, and 0.357142857 / (1/7) = 2.499999999, within 9e-7 of 2.5).
    ListCost = 2.5 x 0.142857143 = 0.3571428575 -> half-even to 9 digits: the 9th digit 7 is odd, the rest
    exactly 5, so up: 0.357142858. EffectiveCost is the booked 0.357142857: it differs from ContractedCost
    0.357142858 by the quantity's rounding (2.5 x (0.142857143 - 1/7) = 3.6e-10, to the nano-unit)."""
    for seconds, cost in ((3600 / 7, 2.5 / 7), (Decimal("514.285714286"), Decimal("0.357142857"))):
        (row,) = hour_rows([usage(seconds=seconds, cost=cost, mig="1g.10gb")], [], s=S)
        assert text(row, "PricingQuantity") == text(row, "ConsumedQuantity") == "0.142857143"
        assert text(row, "ListUnitPrice") == text(row, "ContractedUnitPrice") == "2.5"
        assert text(row, "ListCost") == text(row, "ContractedCost") == "0.357142858"
        assert text(row, "EffectiveCost") == "0.357142857"
        assert text(row, "x_AllocatedGpuSeconds") == "514.285714286"  # 3600 / 7 = 514.2857142857..., 9 digits
        assert row["SkuPriceId"] == "gpu-nvidia-a100-sxm4-80gb-mig-1g.10gb-pool-pool-usd-2.5"
        assert str(row["AllocatedMethodDetails"]).endswith('"UsageQuantity":0.142857143}]}')


def test_per_tick_rounding_does_not_move_the_unit_price() -> None:
    """An exact ledger books each 15 s tick of an H100 at 4.00 as 4 x 15 / 3600 = 0.0166666666... ->
    0.016666667, so 240 ticks are 240 x 0.016666667 = 4.00000008 for 3600 s: the price is still 4.0 (8e-8 is
    within 9e-7), ListCost = ContractedCost = 4.0 x 1.0 = 4.0, EffectiveCost the booked 4.00000008."""
    booked = Decimal("0.016666667") * 240
    assert booked == Decimal("4.00000008")
    (row,) = hour_rows([usage(seconds=Decimal(3600), cost=booked)], [], s=S)
    assert text(row, "ListUnitPrice") == text(row, "ContractedUnitPrice") == "4.0"
    assert text(row, "ListCost") == text(row, "ContractedCost") == "4.0"
    assert text(row, "EffectiveCost") == "4.00000008"


def test_price_points_keep_six_digits_and_snap_booking_noise() -> None:
    """2.4999999993 -> 2.5 (7e-10 away); 4.096575 (55-cent style instance price / 8) stays; 4.096571 stays
    too (its 5-digit neighbour 4.09657 is 1e-6 away, beyond 9e-7); 55.04 / 7 = 7.862857142857... -> its
    nearest 6-digit decimal 7.862857 (1.4e-7 away), on the price list and in the export alike."""
    assert price_point(Decimal("2.4999999993")) == Decimal("2.5")
    assert price_point(Decimal("4.096575")) == Decimal("4.096575")
    assert price_point(Decimal("4.096571")) == Decimal("4.096571")
    with localcontext(prec=40):
        assert price_point(Decimal("55.04") / 7) == Decimal("7.862857")
    assert price_point(Decimal(0)) == 0


def test_float_rounding_is_carried_so_the_sum_stays_the_books() -> None:
    """Three nodes' unallocated charges of 4e-10 each (a float ledger's): rounded alone each is 0 and the
    export would sum to 0; carried in export order the running sums 4e-10, 8e-10, 1.2e-9 round to 0, 1e-9,
    1e-9, so the rows are 0, 0.000000001, 0 and sum to 1.2e-9 rounded = 0.000000001."""
    tiny = 4e-10
    rows = hour_rows([], [capacity(seconds=1.0, cost=tiny, node=n) for n in ("n1", "n2", "n3")], s=S)
    assert [text(r, "EffectiveCost") for r in rows] == ["0.0", "0.000000001", "0.0"]
    carry = CostCarry()
    assert [carry.book(Decimal(x)) for x in ("0.4", "0.0000000004", "0.0000000004")] == [
        Decimal("0.4"), Decimal(0), Decimal("1E-9")]  # 0.4000000004 -> 0.4; 0.4000000008 -> 0.400000001


# --- property: random fleets ------------------------------------------------------------------------------------

FRACTIONS = (Fraction(1), Fraction(1, 7), Fraction(2, 7), Fraction(3, 7), Fraction(1, 8), Fraction(1, 2),
             Fraction(1, 3), Fraction(3, 8))
PRICES = st.decimals(min_value=Decimal("0.01"), max_value=Decimal(100), places=12, allow_nan=False,
                     allow_infinity=False)


@dataclass(frozen=True)
class Held:
    """One holder: a GPU fraction for some seconds of the hour."""

    fraction: Fraction
    seconds: int


@dataclass(frozen=True)
class Node:
    """One node's hour: its price, its holders, its idle and unobserved GPU-seconds."""

    price: Decimal
    held: tuple[Held, ...]
    idle_s: int
    unobserved_s: int


NODES = st.builds(Node, PRICES, st.lists(st.builds(Held, st.sampled_from(FRACTIONS), st.integers(1, 3600)),
                                         max_size=6).map(tuple),
                  st.integers(0, 8 * 3600), st.integers(0, 3600))


def booked(exact: Fraction, *, form: str) -> float | Decimal:
    """An amount as the ledger holds it: an exact ledger's half-even to 9 digits; a float ledger's float."""
    if form == "float":
        return float(exact)
    return nano(Decimal(exact.numerator) / Decimal(exact.denominator))


def fleet(nodes: list[Node], *, form: str, commitment_s: int,
          commit_price: Decimal) -> tuple[list[UsageRecord], list[CapacityRecord], list[CommitmentRecord]]:
    used: list[UsageRecord] = []
    free: list[CapacityRecord] = []
    for i, n in enumerate(nodes):
        price = Fraction(n.price)
        for j, h in enumerate(n.held):
            gpu_s = h.fraction * h.seconds
            used.append(usage(seconds=booked(gpu_s, form=form), cost=booked(gpu_s * price / 3600, form=form),
                              node=f"n{i}", pod=f"p{j}", mig="" if h.fraction.denominator < 7 else "1g.10gb"))
        for state, secs in (("Unallocated", n.idle_s), ("Unobserved", n.unobserved_s)):
            if secs:
                free.append(capacity(seconds=booked(Fraction(secs), form=form),
                                     cost=booked(secs * price / 3600, form=form), node=f"n{i}", state=state))
    unused = []
    if commitment_s:
        cost = booked(commitment_s * Fraction(commit_price) / 3600, form=form)
        unused.append(CommitmentRecord(HOUR, "h100-1yr", A100, "USD", money(booked(Fraction(commitment_s),
                                                                                   form=form)),
                                       money(cost), Decimal(0)))
    return used, free, unused


def fractional_digits(value: Decimal) -> int:
    return max(0, -value.normalize().as_tuple().exponent)  # type: ignore[operator]


@settings(max_examples=150, deadline=None)
@given(st.lists(NODES, min_size=1, max_size=4), st.sampled_from(("decimal", "float")), st.integers(0, 4 * 3600),
       PRICES)
def test_every_row_is_exact_to_the_ninth_digit(nodes: list[Node], form: str, commitment_s: int,
                                               commit_price: Decimal) -> None:
    """Whatever the fleet, MIG fractions and many-digit prices: every amount has at most 9 fractional digits and
    no exponent; ListCost and ContractedCost are the unit price x PricingQuantity recomputed here and rounded
    half-even to 9 digits, digit for digit; Σ EffectiveCost is Σ of the booked costs exactly (an exact
    ledger's), or that sum of the floats' decimals rounded once (a float ledger's); ratios sum to 1."""
    used, free, unused = fleet(nodes, form=form, commitment_s=commitment_s, commit_price=commit_price)
    rows = hour_rows(used, free, s=S, unused=unused)
    assert len(rows) == len(used) + len(free) + len(unused)
    for r in rows:
        for column in AMOUNT_COLUMNS:
            value: Scalar = r.get(column)
            if value is None:
                continue
            assert isinstance(value, Decimal) and fractional_digits(value) <= 9, (column, value)
            assert "E" not in decimal_text(value).upper(), (column, value)
        if r["ListUnitPrice"] is None:
            continue
        qty = r["PricingQuantity"]
        assert isinstance(qty, Decimal)
        for cost, price in (("ListCost", "ListUnitPrice"), ("ContractedCost", "ContractedUnitPrice")):
            unit = r[price]
            assert isinstance(unit, Decimal)
            with localcontext(prec=80):
                assert r[cost] == nano(unit * qty), (cost, unit, qty, r[cost])
    costs: list[Decimal] = [x.cost for x in used] + [x.cost for x in free] + [x.cost for x in unused]
    effective = [r["EffectiveCost"] for r in rows]
    assert all(isinstance(x, Decimal) for x in effective)
    with localcontext(prec=80):
        books = sum(costs, Decimal(0))
        exported = sum((x for x in effective if isinstance(x, Decimal)), Decimal(0))
    assert exported == (books if form == "decimal" else nano(books)), (exported, books)
    ratios: dict[str, Decimal] = {}
    for r in rows:
        if r["AllocatedMethodDetails"] is not None:
            ratio = Decimal(str(r["AllocatedMethodDetails"]).split('"AllocatedRatio":')[1].split(",")[0])
            ratios[str(r["ResourceId"])] = ratios.get(str(r["ResourceId"]), Decimal(0)) + ratio
    assert all(v == 1 for v in ratios.values()), ratios


def test_the_reader_takes_decimals_as_they_are_and_refuses_integer_units(tmp_path: Path) -> None:
    """A real SQLite ledger (integer nano-units, decoded by its reader) read three ways: floats (a schema-13
    build's 0.357142857) become their shortest decimal; decimals past a float's digits (100000000.357142857, 18
    digits) stay exactly what they are, never through a float; integer units (357142857 nano-units, a reader
    that forgot to decode them) are refused rather than exported a billion times too large."""
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="a100-1", namespace="ns", pod="p", allocated_s=3600 / 7,
                                 used_s=0.0, idle_s=3600 / 7, cost=2.5 / 7, idle_cost=2.5 / 7)], [])
    conn = sqlite3.connect(path)
    decoded: Query = lambda sql, p: decoded_rows(conn.execute(sql, tuple(p)))  # noqa: E731

    def converted(to: Callable[[Decimal], object]) -> Query:
        return lambda sql, p: [tuple(to(v) if isinstance(v, Decimal) else v for v in r) for r in decoded(sql, p)]

    layout = inspect_ledger(decoded, cluster=CLUSTER)
    (floats,) = read_usage(converted(float), layout, hour=HOUR)
    assert floats.cost == Decimal("0.357142857") and floats.allocated_s == Decimal("514.285714286")
    big = Decimal(10**8)  # 100000000.357142857 has 18 significant digits: no float holds it
    (exact,) = read_usage(converted(lambda v: big + v), layout, hour=HOUR)
    assert exact.cost == Decimal("100000000.357142857") and type(exact.cost) is Decimal
    with pytest.raises(ValueError, match="integer units"):
        read_usage(converted(lambda v: int(v.scaleb(9))), layout, hour=HOUR)
    conn.close()


def test_a_ledger_from_before_emissions_exports_with_co2e_unknown(tmp_path: Path) -> None:
    """A schema-12 ledger (REAL amounts, no CO2e columns) still exports: its one row (1 GPU-h at 2.50 = 2.5) has
    an empty x_Co2eKg, not an error about integer units nor a known 0."""
    path = tmp_path / "old.db"

    async def fresh() -> None:
        ledger = Ledger(str(path))
        await ledger.open()
        await ledger.close()

    asyncio.run(fresh())
    conn = sqlite3.connect(path)
    for stmt in [*back_to(12), *usage_as_of(TABLES_V12, backend="sqlite", hour=HOUR),
                 "INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
                 "priority_class, currency, claim, sharing, allocated_s, used_s, unmeasured_s, idle_s, cost, "
                 f"idle_cost, energy_j, list_cost) VALUES ('{CLUSTER}', {HOUR}, 'ns', 'p', 'w', 'a100-1', 'pool', "
                 f"'{A100}', '', '', 'USD', '', '', 3600.0, 3600.0, 0, 0, 2.5, 0, 0, 2.5)"]:
        conn.execute(stmt)
    conn.commit()
    rows = [r for hour in focus_hours(query_of(conn), FocusSettings(cluster=CLUSTER), window=Window(None, None))
            for r in hour if r.get("x_PodName") == "p"]
    conn.close()
    assert [(r["EffectiveCost"], r["x_Co2eKg"]) for r in rows] == [(Decimal("2.5"), None)]
