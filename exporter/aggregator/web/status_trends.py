"""What the status page's trend charts show, read from the ledger's hourly usage rows.

Per currency (money in two currencies is never added): cost per UTC day over the last 30 days and per
hour over the last 24 h, each split into idle cost and the rest, for the namespaces that cost most over
the 30 days, the others summed into one series; and the fleet's utilisation per hour and per day. A
bucket that starts before the ledger's oldest usage row (the books began later, or retention dropped
it) is unknown, not zero. Plain SQL with ``?`` placeholders through the ledger's query function, so
SQLite and PostgreSQL ledgers answer alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from exporter.model.books import HOUR, hour_of

Query = Callable[[str, Iterable[Any]], list[tuple[Any, ...]]]
DAY = 86400
DAYS = 30
HOURS = 24
TOP_NAMESPACES = 8
OTHER = "(other namespaces)"  # not a valid namespace name (DNS label), so never a real one


@dataclass(frozen=True, slots=True)
class CostBar:
    """One bucket's booked cost and the idle part of it; ``known`` False: before the books began."""

    start: int
    cost: float = 0.0
    idle_cost: float = 0.0
    known: bool = True

    @property
    def busy_cost(self) -> float:
        """Cost of the GPU time that was not idle (used, or unmeasured: never guessed as idle)."""
        return self.cost - self.idle_cost


@dataclass(frozen=True, slots=True)
class CostSeries:
    """One namespace's (or the others' sum's) bars in one currency."""

    namespace: str
    currency: str
    bars: tuple[CostBar, ...]

    @property
    def total(self) -> float:
        """The series' cost over all its bars."""
        return sum(b.cost for b in self.bars)


@dataclass(frozen=True, slots=True)
class UtilPoint:
    """The fleet's GPU-hours in one bucket; utilisation is used over measured allocated hours."""

    start: int
    allocated_gpu_hours: float = 0.0
    used_gpu_hours: float = 0.0
    unmeasured_gpu_hours: float = 0.0
    known: bool = True

    @property
    def ratio(self) -> float | None:
        """Used ÷ (allocated - unmeasured), as ``gpucost_gpu_utilization_ratio``; None: nothing measured."""
        measured = self.allocated_gpu_hours - self.unmeasured_gpu_hours
        if not self.known or measured <= 1e-9:
            return None
        return min(1.0, max(0.0, self.used_gpu_hours / measured))


@dataclass(frozen=True, slots=True)
class CurrencyTrends:
    """The cost charts of one currency: top namespaces then (if any) the others' sum."""

    currency: str
    daily: tuple[CostSeries, ...]
    hourly: tuple[CostSeries, ...]


@dataclass(frozen=True, slots=True)
class Trends:
    """Everything the charts draw, with the bucket starts they share."""

    days: tuple[int, ...]
    hours: tuple[int, ...]
    costs: tuple[CurrencyTrends, ...]
    util_hourly: tuple[UtilPoint, ...]
    util_daily: tuple[UtilPoint, ...]


@dataclass(frozen=True, slots=True)
class _Money:
    cost: float
    idle_cost: float


def _buckets(now: float) -> tuple[tuple[int, ...], tuple[int, ...]]:
    today = int(now // DAY) * DAY
    this_hour = hour_of(now)
    return (tuple(today - (DAYS - 1 - i) * DAY for i in range(DAYS)),
            tuple(this_hour - (HOURS - 1 - i) * HOUR for i in range(HOURS)))


def _money_rows(query: Query, *, bucket_sql: str, cluster: str, since: int,
                until: int) -> dict[tuple[str, str, int], _Money]:
    """(namespace, currency, bucket start) -> cost and idle cost, of the hour rows in [since, until]."""
    rows = query(f"SELECT namespace, currency, {bucket_sql}, SUM(cost), SUM(idle_cost) FROM usage "
                 f"WHERE cluster = ? AND hour >= ? AND hour <= ? GROUP BY namespace, currency, {bucket_sql}",
                 (cluster, since, until))
    return {(str(ns), str(cur), int(start)): _Money(float(cost), float(idle)) for ns, cur, start, cost, idle in rows}


def _util_rows(query: Query, *, bucket_sql: str, cluster: str, since: int, until: int) -> dict[int, UtilPoint]:
    rows = query(f"SELECT {bucket_sql}, SUM(allocated_s), SUM(used_s), SUM(unmeasured_s) FROM usage "
                 f"WHERE cluster = ? AND hour >= ? AND hour <= ? GROUP BY {bucket_sql}", (cluster, since, until))
    return {int(start): UtilPoint(int(start), float(a) / HOUR, float(u) / HOUR, float(m) / HOUR)
            for start, a, u, m in rows}


def _series(name: str, currency: str, *, starts: tuple[int, ...], amounts: list[dict[int, _Money]],
            first: int | None, width: int) -> CostSeries:
    """Bars of ``starts``: the sum of ``amounts`` in each; unknown where the bucket ends before ``first``."""
    bars = []
    for s in starts:
        known = first is not None and s + width > first
        parts = [m[s] for m in amounts if s in m]
        bars.append(CostBar(s, sum(p.cost for p in parts), sum(p.idle_cost for p in parts), known))
    return CostSeries(name, currency, tuple(bars))


def _regroup(rows: dict[tuple[str, str, int], _Money]) -> dict[tuple[str, str], dict[int, _Money]]:
    out: dict[tuple[str, str], dict[int, _Money]] = {}
    for (ns, cur, start), money in rows.items():
        out.setdefault((ns, cur), {})[start] = money
    return out


def read_trends(query: Query, *, cluster: str, now: float, top: int = TOP_NAMESPACES) -> Trends:
    """The charts' numbers at ``now``; at most ``top`` namespaces per currency are charted by name."""
    days, hours = _buckets(now)
    ((oldest,),) = query("SELECT MIN(hour) FROM usage WHERE cluster = ?", (cluster,))
    first = None if oldest is None else int(oldest)
    day_sql = f"(hour / {DAY}) * {DAY}"
    first_day, first_hour, this_hour = min(days), min(hours), max(hours)
    daily = _regroup(_money_rows(query, bucket_sql=day_sql, cluster=cluster, since=first_day, until=this_hour))
    hourly = _regroup(_money_rows(query, bucket_sql="hour", cluster=cluster, since=first_hour, until=this_hour))
    # the last 24 h lie inside the 30 days: ranking by the 30 days' cost covers every namespace of both
    totals: dict[tuple[str, str], float] = {k: sum(m.cost for m in v.values()) for k, v in daily.items()}
    costs = []
    for currency in sorted({cur for _ns, cur in totals}):
        ranked = sorted((ns for ns, cur in totals if cur == currency), key=lambda ns: (-totals[(ns, currency)], ns))
        named, rest = ranked[:top], ranked[top:]
        groups = [(ns, [ns]) for ns in named] + ([(OTHER, rest)] if rest else [])
        costs.append(CurrencyTrends(
            currency,
            tuple(_series(name, currency, starts=days, amounts=[daily.get((ns, currency), {}) for ns in members],
                          first=first, width=DAY) for name, members in groups),
            tuple(_series(name, currency, starts=hours, amounts=[hourly.get((ns, currency), {}) for ns in members],
                          first=first, width=HOUR) for name, members in groups)))
    util_h = _util_rows(query, bucket_sql="hour", cluster=cluster, since=first_hour, until=this_hour)
    util_d = _util_rows(query, bucket_sql=day_sql, cluster=cluster, since=first_day, until=this_hour)

    def points(starts: tuple[int, ...], found: dict[int, UtilPoint], *, width: int) -> tuple[UtilPoint, ...]:
        return tuple(found.get(s) or UtilPoint(s, known=first is not None and s + width > first) for s in starts)

    return Trends(days, hours, tuple(costs), points(hours, util_h, width=HOUR), points(days, util_d, width=DAY))
