"""A namespace's month-end GPU cost forecast and the day it crosses its monthly budget.

Method (README "Budgets and forecast"): forecast = spent so far this calendar month (UTC) + burn rate
x the hours left in the month. The burn rate is the cost booked over a recent window of *booked time*
divided by that window's length in hours (wall hours the ledger covers, not GPU-hours), so a namespace
that held nothing for part of the window burns at its average over the window. A window of whole days
(24 h by default) averages out the day/night swing of interactive work while still following a job that
started yesterday; a week would lag a team's change of pace by days. Pure arithmetic: the ledger reads
are the aggregator's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Month:
    """A calendar month in UTC: [start, end) in epoch seconds."""

    start: float
    end: float

    @classmethod
    def of(cls, ts: float) -> Month:
        """The month that contains ``ts``."""
        first = datetime.fromtimestamp(ts, UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        following = first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(
            month=first.month + 1)
        return cls(first.timestamp(), following.timestamp())


@dataclass(frozen=True, slots=True)
class BurnRate:
    """Cost booked over a window of booked time, and that window's length."""

    cost: float
    hours: float

    @property
    def per_hour(self) -> float | None:
        """Cost per booked hour; None (unknown) when the window covers no booked time."""
        return self.cost / self.hours if self.hours > 0 else None


@dataclass(frozen=True, slots=True)
class HourCost:
    """Cost booked in one hour bucket (its start)."""

    hour: float
    cost: float


@dataclass(frozen=True, slots=True)
class Forecast:
    """A namespace's month: what it spent, how fast it burns, where the month ends, and its budget."""

    namespace: str
    currency: str
    as_of: float
    month: Month
    spent: float
    burn_per_hour: float
    burn_hours: float  # booked hours the burn rate was averaged over
    hours_left: float
    month_cost: float
    budget: float | None
    #: 00:00 UTC of the first day on which spent (+ burn x elapsed) reaches the budget; None: not this month.
    crossing_day: float | None

    @property
    def over_budget(self) -> bool | None:
        """Whether the forecast exceeds the budget; None without a budget."""
        return None if self.budget is None else self.month_cost > self.budget


def day_of(ts: float) -> float:
    """00:00 UTC of the day containing ``ts``."""
    return (ts // DAY) * DAY


def first_crossing(hourly: Iterable[HourCost], budget: float) -> float | None:
    """The hour bucket in which the month's running total first reached ``budget`` (hours in any order)."""
    total = 0.0
    for h in sorted(hourly, key=lambda h: h.hour):
        total += h.cost
        if total >= budget:
            return h.hour
    return None


def crossing_time(*, spent: float, burn_per_hour: float, as_of: float, budget: float, month: Month) -> float | None:
    """When spent + burn x elapsed reaches ``budget``, if before the month ends (``as_of`` when already reached)."""
    if spent >= budget:
        return as_of
    if burn_per_hour <= 0:
        return None
    at = as_of + (budget - spent) / burn_per_hour * HOUR
    return at if at < month.end else None


def forecast_month(*, namespace: str, currency: str, spent: float, burn: BurnRate, as_of: float,
                   budget: float | None, crossed_at: float | None = None) -> Forecast | None:
    """The month-end forecast at ``as_of``; None (unknown) when the burn rate is unknown.

    ``crossed_at``: when the books show the budget was already reached this month (``first_crossing``);
    without it, a budget already spent counts as crossed at ``as_of``."""
    rate = burn.per_hour
    if rate is None:
        return None
    month = Month.of(as_of)
    hours_left = max(0.0, month.end - as_of) / HOUR
    crossing: float | None = None
    if budget is not None:
        at = crossed_at if crossed_at is not None and spent >= budget else crossing_time(
            spent=spent, burn_per_hour=rate, as_of=as_of, budget=budget, month=month)
        crossing = None if at is None else day_of(at)
    return Forecast(namespace=namespace, currency=currency, as_of=as_of, month=month, spent=spent,
                    burn_per_hour=rate, burn_hours=burn.hours, hours_left=hours_left,
                    month_cost=spent + rate * hours_left, budget=budget, crossing_day=crossing)
