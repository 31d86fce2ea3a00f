"""Two implementations timed in turns (old, new, new, old, …) and the best run of each compared.

A loaded machine slows whatever runs during a burst: alternating the order puts each side before and after the
other equally often, and the best (smallest) run of each is the one least disturbed.
"""

from __future__ import annotations

from collections.abc import Sequence


def abba(first: str, second: str, *, rounds: int) -> list[str]:
    """``rounds`` ABBA blocks: A B B A A B B A …; each side runs ``2 * rounds`` times."""
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    return [first, second, second, first] * rounds


def best(runs: Sequence[float]) -> float:
    """The best (least disturbed) of a side's runs: the smallest time."""
    if not runs:
        raise ValueError("no runs to choose from")
    return min(runs)


def steady_tick(times: Sequence[float]) -> float:
    """A run's tick time: the median of the ticks after the first (the first proves every node: not steady)."""
    steady = sorted(times[1:] or times)
    if not steady:
        raise ValueError("no ticks")
    mid = len(steady) // 2
    return steady[mid] if len(steady) % 2 else (steady[mid - 1] + steady[mid]) / 2
