"""Exact amounts: money and quantities as fixed-point decimals, rounded once where they are made.

Binary floats cannot hold 0.1, so a week of ticks summed in float drifts off the invoice; booked values are
``Decimal`` rounded half-even to 9 fractional digits (energy: 3, DCGM's own millijoule resolution) when they
are made, and every sum after that is exact, in memory and in the ledger alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext

PLACES = 9  # nano-units: seconds, GPU-hours and money
ENERGY_PLACES = 3  # millijoules
NANO = Decimal("1e-9")
MILLI = Decimal("1e-3")
ZERO = Decimal(0)
#: Wide enough that no product of the booking path is rounded before ``book`` rounds it (38 digits is
#: PostgreSQL's NUMERIC(38,9) and more than any amount the ledger can hold).
EXACT = Context(prec=60, rounding=ROUND_HALF_EVEN)


def book(x: Decimal | int, *, places: int = PLACES) -> Decimal:
    """``x`` rounded half-even to ``places`` fractional digits: the one rounding a booked value gets."""
    return Decimal(x).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN, context=EXACT)


def arrived(f: float) -> Decimal:
    """A float from the wire (an agent's counter) as the decimal it was written as: ``0.1`` is 0.1, not
    0.1000000000000000055511151231257827."""
    return Decimal(repr(float(f)))


def exact(x: float | Decimal | int) -> Decimal:
    """Any number as a Decimal: floats by their shortest repr (``arrived``), others unchanged."""
    return arrived(x) if isinstance(x, float) else Decimal(x)


def mul(*factors: Decimal) -> Decimal:
    """The exact product (within ``EXACT``'s 60 digits) of ``factors``."""
    out = Decimal(1)
    for f in factors:
        out = EXACT.multiply(out, f)
    return out


def div(a: Decimal, b: Decimal) -> Decimal:
    """``a / b`` to 60 significant digits, for ``book`` to round once."""
    return EXACT.divide(a, b)


def split(total: Decimal, weights: Sequence[Decimal], *, places: int = PLACES) -> list[Decimal]:
    """``total`` (already booked to ``places``) divided in proportion to ``weights`` so that the parts, each
    to ``places`` digits, sum exactly to ``total``: each part is rounded down, and the units left over go one
    each to the parts with the largest remainders (ties: the earlier part)."""
    whole = sum(weights, ZERO)
    if not weights:
        return []
    if whole == 0:
        return [total, *([ZERO] * (len(weights) - 1))]
    unit = Decimal(1).scaleb(-places)
    with localcontext(EXACT):  # 60 digits: the default 28 round a wider total's units, losing one from the sum
        units = int((total / unit).to_integral_value())
        raw = [units * w / whole for w in weights]
    floors = [int(r.to_integral_value(rounding="ROUND_FLOOR")) for r in raw]
    left = units - sum(floors)
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - floors[i]), i))
    for i in order[:left]:
        floors[i] += 1
    return [Decimal(n).scaleb(-places) for n in floors]


def to_units(x: Decimal, *, places: int = PLACES) -> int:
    """``x`` as an integer count of its smallest unit (what SQLite stores); ``x`` must already be booked."""
    scaled = x.scaleb(places)
    n = int(scaled)
    if n != scaled:
        raise ValueError(f"{x} has more than {places} fractional digits")
    return n


def from_units(n: int, *, places: int = PLACES) -> Decimal:
    """An integer count of the smallest unit back as a Decimal with ``places`` fractional digits."""
    return Decimal(int(n)).scaleb(-places)


def text(x: Decimal) -> str:
    """Plain decimal text, never an exponent, at most the digits it holds (``1E-9`` is ``0.000000001``)."""
    return f"{x:f}"
