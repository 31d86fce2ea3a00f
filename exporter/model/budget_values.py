"""A monthly GPU budget as written: a positive finite decimal in the pricing currency, no units.

Pure parsing, shared by the namespace annotation, the chart's values and the aggregator's settings.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation


def parse_budget(text: object) -> float | None:
    """A budget amount, or None when ``text`` is not a positive finite decimal (no units, no separators)."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        return None
    try:
        amount = Decimal(str(text).strip())
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount <= 0:
        return None
    value = float(amount)
    return value if math.isfinite(value) else None
