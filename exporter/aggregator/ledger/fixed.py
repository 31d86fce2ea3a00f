"""Fixed-point amounts at the SQLite boundary: decimals go in as integer units, come out as decimals again.

SQLite has no exact decimal type, so schema 13 keeps amounts as INTEGER counts of their smallest unit
(nano-units; energy in millijoules). Writers convert by column (``to_db``); every read is decoded by the
result column's name (``cost``, ``SUM(cost)``, ``COALESCE(SUM(seconds), 0)``), so the ledger's readers see
the same ``Decimal`` values on SQLite as PostgreSQL's NUMERIC gives them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from functools import lru_cache
from typing import Any

from exporter.aggregator.ledger.backend import LedgerError
from exporter.aggregator.ledger.schema import FIXED_COLUMNS
from exporter.model.exact import arrived, exact, from_units

INT64_MAX = 2**63 - 1
#: A result column read as one fixed-point column: bare, or inside SUM / MIN / MAX / COALESCE(…, 0).
_ONE_COLUMN = re.compile(r"^(?:(?:sum|min|max|coalesce)\()*\s*(?:\w+\.)?(\w+)\s*(?:\)|,\s*0\s*\))*$", re.IGNORECASE)


def to_db(value: Decimal | float, *, column: str, places: int) -> int:
    """A booked decimal (a float by its repr) as SQLite's integer units; past int64 is a ``LedgerError`` naming
    the column (use PostgreSQL for books that large)."""
    scaled = (value if type(value) is Decimal else exact(value)).scaleb(places)
    units = int(scaled)  # a booked value has no more digits than ``places``: exact (the hot path of every tick)
    if units != scaled:  # more digits than the column keeps: round half-even once, here
        units = int(scaled.to_integral_value(rounding=ROUND_HALF_EVEN))
    if not -INT64_MAX <= units <= INT64_MAX:
        raise LedgerError(f"{column} = {value} exceeds a SQLite ledger's range (use PostgreSQL)")
    return units


def units_of_real(value: float | int | None, places: int) -> int | None:
    """Schema 12 -> 13 on SQLite: a REAL as integer units, half-even from its shortest repr."""
    if value is None:
        return None
    exact = arrived(value) if isinstance(value, float) else Decimal(value)
    return int(exact.scaleb(places).to_integral_value(rounding=ROUND_HALF_EVEN))


@lru_cache(maxsize=512)
def _places_of(names: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """(position, fractional digits) of each result column that is one fixed-point column."""
    out = []
    for i, name in enumerate(names):
        m = _ONE_COLUMN.match(name)
        if m is not None and m[1] in FIXED_COLUMNS:
            out.append((i, FIXED_COLUMNS[m[1]]))
    return tuple(out)


def decoder(description: Sequence[Sequence[Any]] | None) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """A function turning a row's integer units back into decimals, for a result with these columns; None
    when no column is an amount."""
    if not description:
        return None
    at = _places_of(tuple(str(d[0]) for d in description))
    if not at:
        return None

    def decode(row: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(row)
        for i, places in at:
            v = out[i]
            if isinstance(v, int):
                out[i] = from_units(v, places=places)
        return tuple(out)

    return decode
