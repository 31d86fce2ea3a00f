"""How amounts are written in JSON and CSV: plain decimal text, exactly 9 fractional digits, never an exponent,
the same zero everywhere (``0.000000000``); floats made exact decimals first (no float noise past 9 digits)."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from exporter.model.exact import book, text


def plain(v: Decimal) -> str:
    """An amount as written in JSON and CSV: plain decimal text with exactly 9 fractional digits, so every
    amount, zero included (``0.000000000``), reads alike whether it was booked or summed from nothing."""
    return text(book(v))


def exact_numbers(obj: Any) -> Any:
    """``obj`` (dicts and lists of them) with every float as an exact decimal to 9 digits, as amounts are
    written: ``0.125000000012`` and ``1e-05`` become ``0.125000000`` and ``0.000010000``; ints and the rest
    unchanged."""
    if isinstance(obj, float) and math.isfinite(obj):
        return book(Decimal(repr(obj)))
    if isinstance(obj, dict):
        return {k: exact_numbers(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [exact_numbers(v) for v in obj]
    return obj


_NUMBER = re.compile(r'"\\u0000(-?[0-9.]+)"')


def to_json(obj: Any, *, indent: int | None = None) -> str:
    """JSON with every Decimal written as a number in plain decimal text (the json module would refuse it, and
    a float would lose digits); NaN refused."""
    marked = json.dumps(obj, indent=indent, allow_nan=False,
                        default=lambda o: "\u0000" + plain(o) if isinstance(o, Decimal) else _refuse(o))
    return _NUMBER.sub(r"\1", marked)


def _refuse(o: Any) -> Any:
    raise TypeError(f"{type(o).__name__} is not JSON serializable")
