"""A compact utilisation distribution: seconds spent in fixed utilisation buckets.

Fixed buckets (not samples) keep one row per hour x holder small and let hours and pods be merged by
adding seconds. Buckets are half-open ``[lower, upper)`` (the last one includes 1.0), so a quantile is
answered with the bucket's upper bound: the true value is strictly below it. That errs towards "busier
than it was", the safe side when the answer is used to shrink a workload.
"""

from __future__ import annotations

import json
import operator
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
    """Seconds per utilisation bucket: ``seconds[i]`` is the time spent below ``BUCKET_UPPER_PERCENT[i]``
    (and at or above the bound before it). Plain floats rather than one object per bucket: booking adds a
    histogram per holder and hour every tick, and building fifteen objects each time dominated the tick."""

    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.seconds) != len(BUCKET_UPPER_PERCENT):
            raise ValueError(f"utilisation histogram: {len(self.seconds)} buckets, expected "
                             f"{len(BUCKET_UPPER_PERCENT)}")

    @classmethod
    def empty(cls) -> UtilHistogram:
        """The histogram of no observations."""
        return _EMPTY  # immutable: one shared instance (booking asks for it per holder per tick)

    @classmethod
    def of(cls, samples: Iterable[tuple[float, float]]) -> UtilHistogram:
        """From ``(utilisation ratio, seconds)`` pairs; a convenience for callers holding observations."""
        hist = cls.empty()
        for util, seconds in samples:
            hist = hist.add(util, seconds)
        return hist

    @classmethod
    def of_buckets(cls, buckets: Iterable[UtilBucket]) -> UtilHistogram:
        """From named buckets (any order, missing ones empty); an unknown bound is refused."""
        by_bound: dict[int, float] = {}
        for b in buckets:
            if b.upper_percent not in _INDEX:
                raise ValueError(f"utilisation histogram: unknown bucket {b.upper_percent}")
            by_bound[b.upper_percent] = by_bound.get(b.upper_percent, 0.0) + b.seconds
        return cls(tuple(by_bound.get(upper, 0.0) for upper in BUCKET_UPPER_PERCENT))

    @property
    def buckets(self) -> tuple[UtilBucket, ...]:
        """The buckets with their bounds, in order (for readers; booking never builds them)."""
        return tuple(UtilBucket(upper, s) for upper, s in zip(BUCKET_UPPER_PERCENT, self.seconds, strict=True))

    @property
    def total_seconds(self) -> float:
        """Seconds observed in all buckets."""
        return sum(self.seconds)

    def add(self, utilization: float, seconds: float) -> UtilHistogram:
        """This histogram with ``seconds`` more at ``utilization`` (a 0..1 ratio, clamped)."""
        percent = min(max(utilization, 0.0), 1.0) * 100.0
        i = min(bisect_right(BUCKET_UPPER_PERCENT, percent), len(BUCKET_UPPER_PERCENT) - 1)
        old = self.seconds
        return UtilHistogram((*old[:i], old[i] + seconds, *old[i + 1:]))

    def merge(self, other: UtilHistogram) -> UtilHistogram:
        """Both histograms' seconds together (hours of one holder, or pods of one workload)."""
        return UtilHistogram(tuple(map(operator.add, self.seconds, other.seconds)))

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
        return max(BUCKET_UPPER_PERCENT) / 100.0

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
        return cls(tuple(seconds.get(upper, 0.0) for upper in BUCKET_UPPER_PERCENT))


_INDEX = {upper: i for i, upper in enumerate(BUCKET_UPPER_PERCENT)}
_EMPTY = UtilHistogram((0.0,) * len(BUCKET_UPPER_PERCENT))
