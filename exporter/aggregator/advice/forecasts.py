"""Month-end forecasts per namespace from the ledger: the same rows for ``report --budgets``,
``/api/v1/report?view=budgets``, the status page and the budget metrics.

"Now" is the ledger's latest booked time (a ledger copied elsewhere gives the same answer). Spent is the
effective ``cost`` of the month's hour buckets, the number ``report --by namespace --since <month start>``
shows. The burn rate is the cost of the hour buckets from ``hour_of(now - window)`` (or where the books
begin, if later) divided by the hours from there to now: a 24 h window spans 24 to 25 booked hours.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from exporter.aggregator.ledger.table import Table
from exporter.logs import get_logger
from exporter.model.books import hour_of
from exporter.model.exact import book, exact
from exporter.model.forecast import HOUR, BurnRate, Forecast, HourCost, Month, first_crossing, forecast_month
from exporter.model.wire import plain, to_json

Query = Callable[[str, Iterable[Any]], list[tuple[Any, ...]]]
T = TypeVar("T")
DEFAULT_WINDOW_S = 86400.0
log = get_logger("aggregator.forecasts")


def _scope(cluster: str | None) -> tuple[str, list[Any]]:
    return ("cluster = ? AND ", [cluster]) if cluster is not None else ("", [])


def _books_span(query: Query, cluster: str | None) -> tuple[float, float] | None:
    """(first, last) booked time: where the books begin and the latest booked snapshot."""
    where, params = _scope(cluster)
    last, since = query(f"SELECT MAX(booked_ts), MIN(since) FROM agents WHERE {where}1 = 1", params)[0]
    (first_hour,) = query(f"SELECT MIN(hour) FROM usage WHERE {where}1 = 1", params)[0]
    first = since if since is not None else first_hour
    if last is None or first is None:
        return None
    return float(first), float(last)


def _costs(query: Query, cluster: str | None, *, since: float, until: float) -> dict[str, dict[str, float]]:
    """namespace -> currency -> effective cost of the hour buckets starting in [since, until)."""
    where, params = _scope(cluster)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for ns, currency, cost in query(f"SELECT namespace, currency, SUM(cost) FROM usage WHERE {where}hour >= ? "
                                    "AND hour < ? GROUP BY namespace, currency", [*params, hour_of(since), until]):
        out[str(ns)][str(currency)] = float(cost)
    return out


def _hourly(query: Query, cluster: str | None, *, namespace: str, month: Month) -> list[HourCost]:
    where, params = _scope(cluster)
    return [HourCost(float(h), float(c)) for h, c in query(
        f"SELECT hour, SUM(cost) FROM usage WHERE {where}namespace = ? AND hour >= ? AND hour < ? GROUP BY hour",
        [*params, namespace, month.start, month.end])]


def forecasts(query: Query, *, cluster: str | None, budgets: Mapping[str, float], window_s: float = DEFAULT_WINDOW_S,
              currency: str | None = None) -> list[Forecast]:
    """A forecast for every namespace with cost this month or in the burn window, and every budgeted one.

    A namespace whose rows are in more than one currency, or (``currency`` given) in another one than the
    budgets', gets no forecast: unknown, not a sum of unlike amounts."""
    span = _books_span(query, cluster)
    if span is None:
        return []
    first, as_of = span
    month = Month.of(as_of)
    start = max(float(hour_of(as_of - window_s)), first)
    spent = _costs(query, cluster, since=month.start, until=month.end)
    burnt = _costs(query, cluster, since=start, until=month.end)
    out: list[Forecast] = []
    for ns in sorted(set(spent) | set(burnt) | set(budgets)):
        currencies = set(spent.get(ns, {})) | set(burnt.get(ns, {}))
        if len(currencies) > 1 or (currency is not None and currencies - {currency}):
            log.warning("forecast_unknown", namespace=ns, currencies=sorted(currencies), budget_currency=currency)
            continue
        cur = next(iter(currencies), currency or "")
        month_spent = spent.get(ns, {}).get(cur, 0.0)
        budget = budgets.get(ns)
        crossed = first_crossing(_hourly(query, cluster, namespace=ns, month=month), budget) if (
            budget is not None and month_spent >= budget) else None
        f = forecast_month(namespace=ns, currency=cur, spent=month_spent, as_of=as_of, budget=budget,
                           burn=BurnRate(burnt.get(ns, {}).get(cur, 0.0), (as_of - start) / HOUR), crossed_at=crossed)
        if f is not None:
            out.append(f)
    return out


def _iso(ts: float | None, fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).strftime(fmt)


def _nine(v: float | None) -> Decimal | None:
    """A forecast's float as an exact decimal to 9 digits, as every amount is written (no float noise past
    them: ``134.65086066102248`` is ``134.650860661``)."""
    return None if v is None else book(exact(v))


def as_dict(f: Forecast) -> dict[str, Any]:
    """The JSON shape of one forecast row (amounts and hours to 9 digits, as ``report`` writes them)."""
    return {"namespace": f.namespace, "month": _iso(f.month.start, "%Y-%m"), "as_of": _iso(f.as_of),
            "budget": _nine(f.budget), "spent": _nine(f.spent), "burn_per_hour": _nine(f.burn_per_hour),
            "burn_window_hours": _nine(f.burn_hours), "hours_left": _nine(f.hours_left),
            "forecast_month_cost": _nine(f.month_cost), "over_budget": f.over_budget,
            "budget_crossing_day": _iso(f.crossing_day, "%Y-%m-%d"), "currency": f.currency}


_COLUMNS = ("namespace", "month", "budget", "spent", "burn_per_hour", "forecast_month_cost", "over_budget",
            "budget_crossing_day", "currency")


def render(rows: list[Forecast], fmt: str, *, wide: bool = False) -> str:
    """``json`` (every field), ``csv`` or ``table`` (money to cents; 120 columns unless ``wide``)."""
    if fmt == "json":
        return to_json([as_dict(f) for f in rows], indent=2) + "\n"
    flat = [{k: plain(v) if isinstance(v, Decimal) else v for k, v in as_dict(f).items() if k in _COLUMNS}
            for f in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
        return buf.getvalue()
    if not flat:
        return "(no usage booked)\n"
    cells = [[f"{Decimal(v):,.2f}" if k in _MONEY and v is not None else ("" if v is None else str(v))
              for k, v in r.items()] for r in flat]
    return Table(_COLUMNS, cells, keep=("namespace", "budget", "forecast_month_cost"),
                 priority=_COLUMNS).render(wide=wide)


_MONEY = frozenset({"budget", "spent", "burn_per_hour", "forecast_month_cost"})


class LedgerReader(Protocol):
    """What forecasts need of the ledger: its cluster and a read on its own thread."""

    cluster: str

    async def read(self, fn: Callable[[Query], T]) -> T:
        """Run ``fn(query)`` on the ledger's thread (off the event loop)."""


@dataclass(slots=True)
class MonthForecasts:
    """Forecasts as last computed for the metrics and the status page, refreshed after a commit at most every
    ``every`` seconds of the aggregator's clock; after every commit while the books are younger than that
    (a fresh install's first forecasts would otherwise stand on its first seconds for minutes)."""

    window_s: float = DEFAULT_WINDOW_S
    every: float = 300.0
    rows: tuple[Forecast, ...] = ()
    at: float | None = None
    errors: int = 0

    async def after_commit(self, ledger: LedgerReader, *, budgets: Mapping[str, float], currency: str,
                           now: float) -> None:
        """Refresh the rows when due; a failure is counted and logged, never raised into the tick's commit."""
        young = not self.rows or min(f.burn_hours for f in self.rows) * HOUR < self.every
        if self.at is not None and not young and now - self.at < self.every:
            return
        try:
            await self.compute(ledger, budgets=budgets, currency=currency, now=now)
        except Exception as exc:  # a forecast is advice: a failure never fails the tick's commit
            self.errors += 1
            log.warning("forecasts_failed", error=repr(exc))

    async def compute(self, ledger: LedgerReader, *, budgets: Mapping[str, float], currency: str,
                      now: float | None = None) -> tuple[Forecast, ...]:
        """Fresh rows; remembered for the metrics when ``now`` is given (the refresh's clock time)."""
        rows = tuple(await ledger.read(lambda q: forecasts(q, cluster=ledger.cluster, budgets=budgets,
                                                           window_s=self.window_s, currency=currency)))
        if now is not None:
            self.at, self.rows = now, rows
        return rows
