"""Fixed-point amounts of the export: every money and quantity value has at most 9 fractional digits.

FinOps tools recompute ``ListCost = ListUnitPrice x PricingQuantity`` and add up ``EffectiveCost`` against the
books, so the export writes what such a checker gets: quantities rounded half-even to 9 digits, unit prices as
the pricing file's (``price_point``), each cost the product of the two rounded half-even to 9 digits. The
arithmetic runs in a context wide enough to be exact (a product of two 9-digit amounts has 18 fractional
digits; the default 28 significant digits would round a large product twice).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import lru_cache

from exporter.aggregator.focus.format import money

NANO = Decimal("1e-9")
EXACT = Context(prec=80, rounding=ROUND_HALF_EVEN)  # exact for any sum or product of the ledger's amounts
SECONDS_PER_HOUR = Decimal(3600)


def nano(value: float | Decimal | int) -> Decimal:
    """A ledger value rounded half-even to 9 fractional digits: a no-op on an exact ledger's amounts, once
    (never twice) on a float ledger's."""
    return money(value).quantize(NANO, rounding=ROUND_HALF_EVEN, context=EXACT)


def exact_hours(seconds: Decimal) -> Decimal:
    """GPU-seconds as GPU-hours, unrounded (what a unit price is worked out against)."""
    return EXACT.divide(seconds, SECONDS_PER_HOUR)


def extended(price: Decimal, quantity: Decimal) -> Decimal:
    """``price x quantity`` rounded half-even to 9 digits: the cost a checker recomputes from the row."""
    return EXACT.multiply(price, quantity).quantize(NANO, rounding=ROUND_HALF_EVEN, context=EXACT)


PRICE_TOLERANCE = Decimal("9e-7")  # per GPU-hour: above a booked cost's rounding, below a 6-digit price's step
_PLACES = tuple(Decimal(1).scaleb(-n) for n in range(10))


@lru_cache(maxsize=65536)
def price_point(per_gpu_hour: Decimal) -> Decimal:
    """The shortest decimal (0 to 6 fractional digits) within ``PRICE_TOLERANCE`` of a price: the pricing file's
    own price whenever it has at most 6 decimals, recovered from a booked cost / GPU-hours. Each booking rounds
    its cost to 9 digits, so over a seventh of a GPU-hour 2.50 is booked 0.357142857 and cost / GPU-hours is
    2.4999999993; a price of more digits becomes its nearest 6-digit decimal, on the price list alike. Cached:
    an export meets the same quotients hour after hour (equal decimals give equal points: caching is exact)."""
    for quantum in _PLACES:
        point = per_gpu_hour.quantize(quantum, rounding=ROUND_HALF_EVEN, context=EXACT)
        if abs(EXACT.subtract(point, per_gpu_hour)) <= PRICE_TOLERANCE:
            return point
    return nano(per_gpu_hour)  # not reached: the nearest 6-digit decimal is within 5e-7


def unit_price(cost: Decimal, gpu_hours: Decimal) -> Decimal | None:
    """The price a ledger row was booked at (``price_point`` of cost / GPU-hours); None when it booked no time."""
    if gpu_hours <= 0:
        return None
    return price_point(EXACT.divide(cost, gpu_hours))


class CostCarry:
    """Rounds booked costs to 9 digits in export order, carrying each rounding into the next row.

    An exact ledger's costs already have 9 digits and pass through unchanged. A float ledger's (before exact
    amounts) would each lose up to half a nano-unit, and a month of rows would drift from the books; carried,
    each row stays within 1e-9 of its float and every prefix of the export sums to the exact sum of the
    ledger's values rounded once, which is what ``report`` shows."""

    __slots__ = ("_exact", "_written")

    def __init__(self) -> None:
        self._exact = Decimal(0)
        self._written = Decimal(0)

    def book(self, cost: Decimal) -> Decimal:
        """The row's EffectiveCost for a booked ``cost`` (exact, as read from the ledger)."""
        self._exact = EXACT.add(self._exact, cost)
        total = self._exact.quantize(NANO, rounding=ROUND_HALF_EVEN, context=EXACT)
        out = EXACT.subtract(total, self._written)
        self._written = total
        return out
