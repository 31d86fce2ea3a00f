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
from decimal import Decimal, InvalidOperation
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
MAX_BUDGETS = 1000  # a file naming more is refused: one series set per budget
_ROLLING = re.compile(r"^(?P<days>[1-9][0-9]{0,2})d$")


class BudgetsFileError(ValueError):
    """A budgets file that cannot be used; the message is one line naming the file and the field."""


class Span(NamedTuple):
    """A window's [start, end) in Unix seconds; ``end`` is when it next rolls over (rolling: ``N`` days ahead, the
    horizon of a projection: it never rolls over as a whole)."""

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
    from the hour bucket ``N`` days back (``Span.end`` as far ahead)."""
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
    back = now - int(m.group("days")) * 86400.0
    return Span(back - back % 3600, now + int(m.group("days")) * 86400.0)


def _amount(raw: object, where: str) -> Decimal | None:
    if raw is None:
        return None
    try:
        value = Decimal(str(raw))
    except InvalidOperation:
        raise BudgetsFileError(f"{where}: {raw!r} is not a number") from None
    if not value.is_finite() or value <= 0 or isinstance(raw, bool):
        raise BudgetsFileError(f"{where}: {raw!r} is not a positive amount")
    return value


def parse_budgets(raw: object, *, source: str) -> list[WindowBudget]:
    """``{budgets: [{name, target: {KIND: NAME}, gpu_hours, money, window, action, alert_at}]}``."""
    items = raw.get("budgets") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise BudgetsFileError(f"{source}: budgets: expected a list of budgets")
    if len(items) > MAX_BUDGETS:
        raise BudgetsFileError(f"{source}: budgets: {len(items)} budgets, at most {MAX_BUDGETS}")
    out: list[WindowBudget] = []
    for i, item in enumerate(items):
        where = f"{source}: budgets[{i}]"
        if not isinstance(item, dict):
            raise BudgetsFileError(f"{where}: expected a mapping")
        unknown = set(item) - {"name", "target", "gpu_hours", "money", "window", "action", "alert_at"}
        if unknown:
            raise BudgetsFileError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        name = str(item.get("name") or "")
        if not name or len(name) > 128 or any(b.name == name for b in out):
            raise BudgetsFileError(f"{where}.name: {name!r} must be a unique name of 1 to 128 characters")
        target = item.get("target")
        if not isinstance(target, dict) or len(target) != 1 or next(iter(target)) not in TARGETS:
            raise BudgetsFileError(f"{where}.target: expected one of {', '.join(TARGETS)} naming the target")
        kind, tname = next(iter(target.items()))
        if kind == "kueue_local_queue" and "/" not in str(tname):
            raise BudgetsFileError(f"{where}.target.{kind}: expected <namespace>/<name>, got {tname!r}")
        gpu_hours, money = _amount(item.get("gpu_hours"), f"{where}.gpu_hours"), _amount(item.get("money"),
                                                                                           f"{where}.money")
        if gpu_hours is None and money is None:
            raise BudgetsFileError(f"{where}: give gpu_hours, money or both")
        window = str(item.get("window") or "")
        if not valid_window(window):
            raise BudgetsFileError(f"{where}.window: {window!r} is not day, week, month or Nd")
        action = str(item.get("action") or "none")
        if action not in ACTIONS:
            raise BudgetsFileError(f"{where}.action: {action!r} is not one of {', '.join(ACTIONS)}")
        alert_raw = item.get("alert_at")
        alert_at = DEFAULT_ALERT_AT if alert_raw is None else tuple(sorted(
            _fraction(v, f"{where}.alert_at[{j}]") for j, v in enumerate(alert_raw if isinstance(alert_raw, list)
                                                                          else [alert_raw])))
        out.append(WindowBudget(name, kind, str(tname), window, gpu_hours, money, action, alert_at))
    return out


def _fraction(raw: object, where: str) -> Decimal:
    value = _amount(raw, where)
    if value is None or value > 10:
        raise BudgetsFileError(f"{where}: {raw!r} is not a fraction of the budget (0 < f <= 10)")
    return value
