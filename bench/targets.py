"""Issue 28's targets: each figure beside its baseline from the same run, and whether it is met.

A target is either a bound on the figure itself (seconds, MB) or on its ratio to the baseline (this code's
time over another implementation's); the ratio is printed in both cases so a reader sees how far from the
baseline a figure is, whichever the bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Rule(Enum):
    """What ``limit`` bounds: the value (at most / at least) or value / baseline (at most / at least)."""

    VALUE_AT_MOST = "value <= target"
    RATIO_AT_MOST = "value / baseline <= target"
    RATIO_AT_LEAST = "value / baseline >= target"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One of issue 28's targets with its figures from one run (``baseline``: what it is compared to)."""

    name: str
    value: float
    unit: str
    baseline: float
    baseline_is: str
    limit: float
    rule: Rule

    @property
    def ratio(self) -> float | None:
        """value / baseline; None for a baseline of zero (nothing to compare to)."""
        return self.value / self.baseline if self.baseline else None

    @property
    def met(self) -> bool:
        """Whether the figure is within its target (a ratio rule without a ratio is not met)."""
        if self.rule is Rule.VALUE_AT_MOST:
            return self.value <= self.limit
        ratio = self.ratio
        if ratio is None:
            return False
        return ratio <= self.limit if self.rule is Rule.RATIO_AT_MOST else ratio >= self.limit

    def entry(self) -> dict[str, Any]:
        """The JSON entry ``bench/run.py --targets`` prints."""
        ratio = self.ratio
        return {"name": self.name, "value": round(self.value, 4), "unit": self.unit,
                "baseline": round(self.baseline, 4), "baseline_is": self.baseline_is,
                "ratio": None if ratio is None else round(ratio, 4), "target": self.limit,
                "rule": self.rule.value, "met": self.met}
