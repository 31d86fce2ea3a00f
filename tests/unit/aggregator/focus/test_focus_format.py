"""FOCUS value formats, as the spec and its validator read them."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from exporter.aggregator.focus.format import Scalar, decimal_text, json_object, money, month_bounds, utc_text
from exporter.aggregator.focus.rows import allocation_ratios


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("2"), "2.0"), (Decimal("2.000"), "2.0"), (Decimal("0"), "0.0"), (Decimal("0.00"), "0.0"),
    (Decimal("1E+2"), "100.0"), (Decimal("0.25"), "0.25"), (Decimal("1e-7"), "0.0000001"),
    (money(1e16), "10000000000000000.0"), (money(0.1), "0.1"), (money(8.000000000000002), "8.000000000000002"),
])
def test_decimals_always_have_a_point_and_no_exponent(value: Decimal, text: str) -> None:
    assert decimal_text(value) == text


def test_money_rejects_what_is_not_a_number() -> None:
    with pytest.raises(ValueError, match="finite"):
        money(float("nan"))


def test_utc_times_whole_seconds_with_z() -> None:
    ts = datetime(2026, 11, 3, 14, 0, 0, tzinfo=UTC).timestamp()
    assert utc_text(ts) == "2026-11-03T14:00:00Z"
    assert utc_text(ts + 0.9) == "2026-11-03T14:00:00Z"


def test_billing_period_is_the_calendar_month_and_december_rolls_over() -> None:
    start, end = month_bounds(datetime(2026, 12, 31, 23, tzinfo=UTC).timestamp())
    assert (utc_text(start), utc_text(end)) == ("2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z")


def test_json_objects_write_decimals_from_decimal() -> None:
    assert json_object({"a": Decimal("0.250"), "b": "x\"y", "c": None, "d": [{"e": Decimal(6)}]}) == (
        '{"a":0.25,"b":"x\\"y","c":null,"d":[{"e":6.0}]}')


def test_ratios_sum_to_exactly_one() -> None:
    """Three equal shares: 1/3 each rounds down to 0.333333333 (9 digits, as every amount); the largest absorbs
    1e-9 so the sum is 1."""
    ratios = allocation_ratios([Decimal(1)] * 3, [Decimal(1)] * 3)
    assert sum(ratios) == 1 and ratios[0] == Decimal("0.333333334")


def test_one_price_gives_the_exact_shares_of_gpu_seconds() -> None:
    """One price for the whole node-hour: a pod held 1 of 8 GPUs and its booked
    cost is 0.500000001 of 4.000000000 (9-digit rounding of each row): its share is 450 / 3600 = 0.125 exactly,
    not 0.500000001 / 4.000000000 = 0.12500000025 (float-looking noise in AllocatedRatio)."""
    costs = [Decimal("0.500000001"), Decimal("3.499999999")]
    seconds = [Decimal(3600), Decimal(25200)]  # 1 GPU and 7 GPUs for an hour: 3600 / 28800 = 0.125
    assert allocation_ratios(costs, seconds) == [Decimal("0.125"), Decimal("0.875")]
    # two prices (a MIG price beside a whole GPU's): the shares of cost, 1 / 4 and 3 / 4, not of seconds
    assert allocation_ratios([Decimal(1), Decimal(3)], [Decimal(3600), Decimal(3600)]) == [
        Decimal("0.25"), Decimal("0.75")]


def test_the_largest_share_absorbs_the_rounding() -> None:
    """Six equal shares and one that cost nothing: the nothing stays exactly 0 (it used to be handed the
    rounding, -2E-12 then); the remainder goes to the largest share, which is never left below the others (to the
    nearest, 6 x 0.166666667 = 1.000000002 would leave it at 0.166666665: rounded down instead)."""
    ratios = allocation_ratios([Decimal(1)] * 6 + [Decimal(0)], [Decimal(1)] * 7)
    assert ratios == [Decimal("0.166666670")] + [Decimal("0.166666666")] * 5 + [Decimal(0)]
    # 1/6 and 4/6 to the nearest 9 digits sum to 1.000000001: the largest gives the 1e-9 back
    assert allocation_ratios([Decimal(1), Decimal(1), Decimal(4)], [Decimal(1)] * 3) == [
        Decimal("0.166666667"), Decimal("0.166666667"), Decimal("0.666666666")]


def test_ratios_by_cost_are_the_nearest_9_digit_shares() -> None:
    """Two prices in one node-hour (a listed MIG profile beside a whole GPU's share): the shares of cost, each to
    the nearest 9 digits: 0.999999998 of 7.999999998 is 0.12499999977..., read 0.125, not 0.124999999."""
    assert allocation_ratios([Decimal("0.999999998"), Decimal(7)], [Decimal(3600), Decimal(3600)]) == [
        Decimal("0.125"), Decimal("0.875")]


_AMOUNTS = st.decimals(min_value=0, max_value=10**6, places=6, allow_nan=False, allow_infinity=False)


@given(st.lists(st.tuples(_AMOUNTS, _AMOUNTS), min_size=1, max_size=60))
@example([(Decimal(1), Decimal(1))] * 6 + [(Decimal(0), Decimal(1))])
@example([(Decimal(0), Decimal(0))] * 7)
@example([(Decimal(c), Decimal(0)) for c in ("0.001", "999999.986882", "999999.986893")])  # a tie: the larger basis
def test_ratios_are_shares_between_0_and_1_in_the_order_of_their_basis(shares: list[tuple[Decimal, Decimal]]) -> None:
    """Whatever the costs and seconds (never negative): every ratio within [0, 1], exactly 1 in all, a larger
    basis never with a smaller ratio, and a share that cost nothing at 0 when others cost something."""
    costs, seconds = [c for c, _ in shares], [s for _, s in shares]
    ratios = allocation_ratios(costs, seconds)
    assert len(ratios) == len(shares)
    assert sum(ratios) == 1
    assert all(0 <= r <= 1 for r in ratios)
    basis = costs if sum(costs) > 0 else seconds if sum(seconds) > 0 else [Decimal(1)] * len(shares)
    order = sorted(range(len(shares)), key=lambda i: (basis[i], ratios[i]))
    assert [ratios[i] for i in order] == sorted(ratios)
    assert all(r == 0 for b, r in zip(basis, ratios, strict=True) if b == 0)


def test_ratios_fall_back_to_seconds_then_equal_shares() -> None:
    """Free GPUs (price 0): 3600 s and 10800 s -> 0.25 / 0.75. Nothing at all: 0.5 / 0.5."""
    assert allocation_ratios([Decimal(0)] * 2, [Decimal(3600), Decimal(10800)]) == [Decimal("0.25"), Decimal("0.75")]
    assert allocation_ratios([Decimal(0)] * 2, [Decimal(0)] * 2) == [Decimal("0.5"), Decimal("0.5")]


def test_allocation_details_is_the_json_object_of_that_shape() -> None:
    """Written directly for speed; it must stay the text ``json_object`` gives the same elements."""
    from exporter.aggregator.focus.format import allocation_details

    for ratio, qty in ((Decimal("0.25"), Decimal("2")), (Decimal("0E-12"), Decimal("0.000277777778")),
                       (Decimal("1"), Decimal("7200.5"))):
        element: dict[str, Scalar] = {"AllocatedRatio": ratio, "UsageUnit": "GPU-Hours", "UsageQuantity": qty}
        expected = json_object({"Elements": [element]})
        assert allocation_details(ratio, "GPU-Hours", quantity=qty) == expected
    assert allocation_details(Decimal("0.25"), "GPU-Hours", quantity=Decimal("2")) == (
        '{"Elements":[{"AllocatedRatio":0.25,"UsageUnit":"GPU-Hours","UsageQuantity":2.0}]}')


def test_cached_decimal_text_of_equal_values_is_the_same() -> None:
    """decimal_text is cached by value: equal decimals written differently must give one text."""
    assert decimal_text(Decimal("2.50")) == decimal_text(Decimal("2.5")) == "2.5"
    assert decimal_text(Decimal("4")) == decimal_text(Decimal("4.000")) == "4.0"
    assert decimal_text(Decimal("0E-12")) == decimal_text(Decimal("-0.0")) == "0.0"
