"""A compact utilisation distribution: seconds spent in fixed utilisation buckets.

Fixed buckets (not samples) keep one row per hour x holder small and let hours and pods be merged by
adding seconds. Buckets are half-open ``[lower, upper)`` (the last one includes 1.0), so a quantile is
answered with the bucket's upper bound: the true value is strictly below it. That errs towards "busier
than it was", the safe side when the answer is used to shrink a workload.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

#: Upper bounds of the utilisation buckets, in percent. Dense at the low end, where idle and
#: right-sizing decisions are made; the idle threshold (5 %) is an edge.
BUCKET_UPPER_PERCENT: tuple[int, ...] = (1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100)


@dataclass(frozen=True, slots=True)
class UtilBucket:
    """Seconds observed with utilisation in ``[previous upper, upper)``."""

    upper_percent: int
    seconds: float


@dataclass(frozen=True, slots=True)
class UtilHistogram:
    """Seconds per utilisation bucket, one bucket per ``BUCKET_UPPER_PERCENT`` entry, in order."""

    buckets: tuple[UtilBucket, ...]

    @classmethod
    def empty(cls) -> UtilHistogram:
        return _EMPTY  # immutable: one shared instance (booking asks for it per holder per tick)

    @classmethod
    def of(cls, samples: Iterable[tuple[float, float]]) -> UtilHistogram:
        """From ``(utilisation ratio, seconds)`` pairs; a convenience for callers holding observations."""
        hist = cls.empty()
        for util, seconds in samples:
            hist = hist.add(util, seconds)
        return hist

    @property
    def total_seconds(self) -> float:
        return sum(b.seconds for b in self.buckets)

    def add(self, utilization: float, seconds: float) -> UtilHistogram:
        """This histogram with ``seconds`` more at ``utilization`` (a 0..1 ratio, clamped)."""
        percent = min(max(utilization, 0.0), 1.0) * 100.0
        i = min(bisect_right(BUCKET_UPPER_PERCENT, percent), len(BUCKET_UPPER_PERCENT) - 1)
        old = self.buckets[i]
        return UtilHistogram((*self.buckets[:i], UtilBucket(old.upper_percent, old.seconds + seconds),
                              *self.buckets[i + 1:]))

    def merge(self, other: UtilHistogram) -> UtilHistogram:
        """Both histograms' seconds together (hours of one holder, or pods of one workload)."""
        extra = {b.upper_percent: b.seconds for b in other.buckets}
        return UtilHistogram(tuple(UtilBucket(b.upper_percent, b.seconds + extra.get(b.upper_percent, 0.0))
                                   for b in self.buckets))

    def quantile(self, q: float) -> float | None:
        """Upper bound (ratio) of the bucket holding the ``q`` quantile; None without observations."""
        total = self.total_seconds
        if total <= 0:
            return None
        running = 0.0
        for bucket in self.buckets:
            running += bucket.seconds
            if bucket.seconds > 0 and running >= q * total - 1e-9:
                return bucket.upper_percent / 100.0
        return self.buckets[-1].upper_percent / 100.0

    def to_json(self) -> str:
        """Compact text for a ledger column: ``{"upper percent": seconds}`` for non-empty buckets."""
        return json.dumps({str(b.upper_percent): round(b.seconds, 3) for b in self.buckets if b.seconds > 0},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> UtilHistogram:
        """Inverse of :meth:`to_json`; unknown bucket bounds are refused (a newer writer, or damage)."""
        raw = json.loads(text) if text else {}
        if not isinstance(raw, dict):
            raise ValueError("utilisation histogram: expected a JSON object")
        known = set(BUCKET_UPPER_PERCENT)
        seconds = {int(k): float(v) for k, v in raw.items()}
        unknown = sorted(set(seconds) - known)
        if unknown:
            raise ValueError(f"utilisation histogram: unknown bucket {unknown[0]}")
        return cls(tuple(UtilBucket(upper, seconds.get(upper, 0.0)) for upper in BUCKET_UPPER_PERCENT))


_EMPTY = UtilHistogram(tuple(UtilBucket(upper, 0.0) for upper in BUCKET_UPPER_PERCENT))
