"""Budgets over windows: what a budget names (a target, amounts in GPU-hours and/or money, a window, an action) and
where its window lies at a given time.

Windows are calendar ``day``, ``week`` (Monday 00:00 UTC) and ``month`` (the 1st, 00:00 UTC), or rolling ``Nd`` (the
``N`` days back from now). The ledger keeps hour buckets, so a rolling window counts the whole hour bucket it starts
in (up to one hour more than ``N`` days); calendar windows start on an hour and are exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

#: target kind -> (scheduler the usage rows carry, the row column the target's name matches); ``team`` matches the
#: namespaces whose team label was that team in the hour booked (``namespace_team``).
TARGETS: dict[str, tuple[str, str]] = {
    "namespace": ("", "namespace"),
    "team": ("", "team"),
    "kueue_local_queue": ("kueue", "queue"),
    "kueue_cluster_queue": ("kueue", "cluster_queue"),
    "volcano_queue": ("volcano", "queue"),
    "kai_queue": ("kai", "queue"),
    "yunikorn_queue": ("yunikorn", "queue"),
}
#: Targets a budget can hold: Kueue's stopPolicy and Volcano's CloseQueue Command. KAI and YuniKorn have no stop
#: mechanism (``schedulers.md`` §1, §5): their budgets are reported and alert, never act.
HOLDABLE = frozenset({"kueue_local_queue", "kueue_cluster_queue", "volcano_queue"})
ACTIONS = ("none", "hold", "drain")
DEFAULT_ALERT_AT = (Decimal("0.8"), Decimal("1"))
_ROLLING = re.compile(r"^([1-9][0-9]{0,2})d$")


class Span(NamedTuple):
    """A window's [start, end) in Unix seconds; ``end`` is when it next rolls over (rolling: never, so now + 1 h)."""

    start: float
    end: float


@dataclass(frozen=True, slots=True)
class WindowBudget:
    """One budget: ``target_kind`` (``TARGETS``) and ``target`` (Kueue LocalQueue ``<namespace>/<name>``), a limit in
    GPU-hours and/or money, its window, what it does when spent, and the spent fractions that alert."""

    name: str
    target_kind: str
    target: str
    window: str
    gpu_hours: Decimal | None = None
    money: Decimal | None = None
    action: str = "none"
    alert_at: tuple[Decimal, ...] = DEFAULT_ALERT_AT

    @property
    def acts(self) -> bool:
        """Whether the budget holds its queue when spent (``hold`` or ``drain`` on a queue that can be held)."""
        return self.action != "none" and self.target_kind in HOLDABLE


def valid_window(text: str) -> bool:
    """``day``, ``week``, ``month`` or rolling ``Nd`` (1 to 999 days)."""
    return text in ("day", "week", "month") or _ROLLING.match(text) is not None


def window_span(window: str, *, now: float) -> Span:
    """Where ``window`` lies at ``now``: calendar windows from their UTC start to the next one's; rolling windows
    from the hour bucket ``N`` days back (``Span.end`` one hour ahead: they never roll over as a whole)."""
    t = datetime.fromtimestamp(now, UTC)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if window == "day":
        return Span(day.timestamp(), (day + timedelta(days=1)).timestamp())
    if window == "week":
        start = day - timedelta(days=day.weekday())
        return Span(start.timestamp(), (start + timedelta(days=7)).timestamp())
    if window == "month":
        start = day.replace(day=1)
        nxt = (start + timedelta(days=32)).replace(day=1)
        return Span(start.timestamp(), nxt.timestamp())
    m = _ROLLING.match(window)
    if m is None:
        raise ValueError(f"unknown window {window!r}: use day, week, month or Nd")
    back = now - int(m[1]) * 86400.0
    return Span(back - back % 3600, now + 3600.0)
