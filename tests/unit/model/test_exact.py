"""Booking arithmetic in fixed point: one half-even rounding where an amount is made, exact parts of a whole."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest

from exporter.model.exact import EXACT, arrived, book, div, exact, from_units, mul, split, text, to_units


def test_half_a_gpu_hour_at_2_50_is_exactly_1_25() -> None:
    # 0.5 GPU-h x 2.50 = 1.25, written to 9 digits
    assert book(mul(Decimal("0.5"), Decimal("2.50"))) == Decimal("1.250000000")
    assert text(book(mul(Decimal("0.5"), Decimal("2.50")))) == "1.250000000"


def test_a_seventh_of_a_gpu_for_an_hour_at_2_50() -> None:
    # 2.50 / 7 = 0.357142857|142857...: the 10th digit is 1, so it rounds down to 0.357142857
    assert book(div(Decimal("2.50"), Decimal(7))) == Decimal("0.357142857")
    # 6/7 of it: 2.142857142|857...: the 10th digit is 8, up
    assert book(div(mul(Decimal("2.50"), Decimal(6)), Decimal(7))) == Decimal("2.142857143")


def test_ties_round_half_even() -> None:
    assert book(Decimal("0.0000000005")) == Decimal("0.000000000")  # 0 is even: down
    assert book(Decimal("0.0000000015")) == Decimal("0.000000002")  # 1 is odd: up to 2
    assert book(Decimal("0.0000000025")) == Decimal("0.000000002")  # 2 is even: down
    assert book(Decimal("1.0005"), places=3) == Decimal("1.000")
    assert book(Decimal("1.0015"), places=3) == Decimal("1.002")


def test_arrived_floats_keep_the_digits_they_were_written_with() -> None:
    assert arrived(0.1) == Decimal("0.1")  # not 0.1000000000000000055511151231257827...
    assert Decimal(0.1) != Decimal("0.1")  # noqa: RUF032 (the float is the point)
    assert arrived(15.0) == Decimal("15.0")


def test_a_week_of_ticks_sums_exactly() -> None:
    # 7 days x 24 h x 240 ticks of 15 s = 40320 ticks; x 0.1 = 4032.0 exactly
    ticks = 7 * 24 * 3600 // 15
    assert ticks == 40320
    assert sum((book(arrived(0.1)) for _ in range(ticks)), Decimal(0)) == Decimal("4032.000000000")
    assert sum(0.1 for _ in range(ticks)) != 4032.0  # what float would have said


def test_split_parts_sum_to_the_whole() -> None:
    # 1.000000000 in thirds: 333333333.33 units each, 1 unit left over, to the first (ties: the earlier)
    parts = split(Decimal("1.000000000"), [Decimal(1), Decimal(1), Decimal(1)])
    assert parts == [Decimal("0.333333334"), Decimal("0.333333333"), Decimal("0.333333333")]
    assert sum(parts) == Decimal("1.000000000")
    # 2.50 over weights 1:2 -> 0.8333333333 and 1.6666666666: the larger remainder (the second) takes the unit
    two = split(Decimal("2.500000000"), [Decimal(1), Decimal(2)])
    assert two == [Decimal("0.833333333"), Decimal("1.666666667")]
    assert split(Decimal("1.000000000"), [Decimal(0), Decimal(0)]) == [Decimal("1.000000000"), Decimal(0)]


def test_units_round_trip_and_refuse_unbooked_values() -> None:
    assert to_units(Decimal("1.5")) == 1_500_000_000
    assert from_units(1_500_000_000) == Decimal("1.500000000")
    assert to_units(Decimal("2.125"), places=3) == 2125
    with pytest.raises(ValueError, match="more than 9"):
        to_units(Decimal("0.0000000001"))


def test_text_never_has_an_exponent() -> None:
    assert text(book(Decimal("1e-9"))) == "0.000000001"
    assert text(book(Decimal(0))) == "0.000000000"


def test_split_gives_left_over_units_by_remainder_not_by_size() -> None:
    """7 units in halves: 3.5 each, floors 3 + 3, the one left to the earlier part. 10 units by 6.3 : 3.7:
    floors 6 + 3, the unit left goes to the larger remainder (0.7), not to the larger part."""
    assert split(Decimal("0.000000007"), [Decimal(1), Decimal(1)]) == [Decimal("4E-9"), Decimal("3E-9")]
    assert split(Decimal("0.000000010"), [Decimal("6.3"), Decimal("3.7")]) == [Decimal("6E-9"), Decimal("4E-9")]


def test_split_is_exact_at_the_widest_amounts_the_ledger_holds() -> None:
    """10^19 + 1e-9 (29 digits; the ledger holds 38) in thirds: 10^28 + 1 units, 3333333333333333333333333333.67
    each, which 28 significant digits would round up to ...334 three times: one unit more than the total."""
    total = Decimal("10000000000000000000.000000001")
    parts = split(total, [Decimal(1)] * 3)
    third = Decimal("3333333333333333333.333333333")
    assert parts == [third + Decimal("1E-9"), third + Decimal("1E-9"), third]
    with localcontext(EXACT):
        assert sum(parts) == total


def test_book_and_exact_keep_every_digit_of_wide_amounts() -> None:
    """Booking a 30-digit amount rounds at the ninth decimal only; ``exact`` takes floats by their repr and
    leaves Decimals and ints as they are."""
    assert book(Decimal("10000000000000000000.0000000005")) == Decimal("10000000000000000000.000000000")
    assert book(Decimal("10000000000000000000.0000000015")) == Decimal("10000000000000000000.000000002")
    assert exact(0.1) == Decimal("0.1")
    wide = Decimal("0.12345678901234567890")
    assert exact(wide) == wide and str(exact(wide)) == "0.12345678901234567890"
    assert exact(3) == Decimal(3)
