"""FOCUS value formats: UTC date-times, decimals and key-value JSON, exactly as the spec and its validator read them.

Decimals come from ``Decimal`` and always carry a decimal point: the validator infers column types from the
text, and an integer-looking ``2`` fails "MUST be of type Decimal" where ``2.0`` passes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache

Scalar = str | int | bool | Decimal | None


def money(value: float | Decimal | int) -> Decimal:
    """A ledger value as a ``Decimal``: an exact ledger's ``Decimal`` as it is, a float ledger's float as the
    shortest decimal that reads back as the same float (no binary noise added)."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"not a finite number: {value!r}")
        return value
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return Decimal(repr(float(value))) if isinstance(value, float) else Decimal(value)


@lru_cache(maxsize=65536)
def decimal_text(value: Decimal) -> str:
    """Plain notation with a decimal point and no exponent: ``2.0``, ``0.25``, ``100.0``. Cached: an export
    repeats the same amounts (equal decimals always give the same text, so caching by value is exact)."""
    if not value.is_finite():
        raise ValueError(f"not a finite decimal: {value!r}")
    text = format(value.normalize() if value != 0 else Decimal(0), "f")
    return text if "." in text else text + ".0"


@lru_cache(maxsize=4096)
def _utc_text(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_text(ts: float) -> str:
    """``YYYY-MM-DDTHH:mm:ssZ``: whole seconds, UTC, no offset notation (an export repeats a few hours)."""
    return _utc_text(int(ts))


def month_bounds(ts: float) -> tuple[int, int]:
    """Start (inclusive) and end (exclusive) of the UTC calendar month holding ``ts``: the billing period."""
    return _month_bounds(int(ts))


@lru_cache(maxsize=1024)
def _month_bounds(ts: int) -> tuple[int, int]:
    dt = datetime.fromtimestamp(ts, UTC)
    start = datetime(dt.year, dt.month, 1, tzinfo=UTC)
    end = datetime(dt.year + (dt.month == 12), dt.month % 12 + 1, 1, tzinfo=UTC)
    return int(start.timestamp()), int(end.timestamp())


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # one encoder, not one per call


def _json_scalar(value: Scalar) -> str:
    if isinstance(value, Decimal):
        return decimal_text(value)
    return _ENCODE(value)


def json_object(items: Mapping[str, Scalar | list[Mapping[str, Scalar]]]) -> str:
    """A compact JSON object whose decimals are written from ``Decimal`` (json.dumps would need floats)."""
    if all(v is None or type(v) is str for v in items.values()):  # tags: one C call
        return _ENCODE(items)
    parts: list[str] = []
    for key, value in items.items():
        text = "[" + ",".join(json_object(v) for v in value) + "]" if isinstance(value, list) else _json_scalar(value)
        parts.append(f"{_ENCODE(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def allocation_details(ratio: Decimal, unit: str, *, quantity: Decimal) -> str:
    """``{"Elements":[{"AllocatedRatio":…,"UsageUnit":…,"UsageQuantity":…}]}``: ``json_object`` of that shape,
    written directly (it is on every row)."""
    return (f'{{"Elements":[{{"AllocatedRatio":{decimal_text(ratio)},"UsageUnit":{_ENCODE(unit)},'
            f'"UsageQuantity":{decimal_text(quantity)}}}]}}')
