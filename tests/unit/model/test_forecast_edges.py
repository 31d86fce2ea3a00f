"""The forecast at its edges: a budget reached exactly, a burn below one per hour, the month's last second,
fractional timestamps, and a machine whose local time zone is not UTC (months are UTC months)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from exporter.model.forecast import BurnRate, Forecast, HourCost, Month, crossing_time, first_crossing, forecast_month
from tests.unit.model.test_forecast import DEC_1, DEC_7, DEC_11, JAN_1, H

MAR_1 = 1772323200.0  # 2026-03-01T00:00:00Z
APR_1 = 1775001600.0  # 2026-04-01T00:00:00Z


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone set to UTC+9, where 03:00 UTC on the 1st is already noon of the 1st."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_months_are_utc_whatever_the_local_zone(tokyo: None) -> None:
    assert Month.of(MAR_1 + 3 * H) == Month(MAR_1, APR_1)
    assert Month.of(MAR_1 - 3 * H).end == MAR_1


def test_a_fractional_timestamp_lies_in_a_month_of_whole_seconds() -> None:
    assert Month.of(DEC_11 + 0.25) == Month(DEC_1, JAN_1)


def test_the_last_half_second_of_the_month_has_half_a_second_left() -> None:
    """Burn 3600.00/h with 0.5 s left: 0.5 more; spent 10.00 -> 10.50."""
    f = forecast_month(namespace="ml", currency="USD", spent=10.0, burn=BurnRate(3600.0, 1.0), as_of=JAN_1 - 0.5,
                       budget=None)
    assert f is not None
    assert f.hours_left == pytest.approx(0.5 / 3600)
    assert f.month_cost == pytest.approx(10.5)


def test_a_budget_reached_exactly() -> None:
    """Spent equal to the budget is crossed, now, even at no burn; running totals 1 + 2 = 3 reach 3 in the
    second hour."""
    month = Month.of(DEC_11)
    assert crossing_time(spent=5.0, burn_per_hour=0.0, as_of=DEC_11, budget=5.0, month=month) == DEC_11
    assert first_crossing([HourCost(DEC_1 + H, 2.0), HourCost(DEC_1, 1.0)], 3.0) == DEC_1 + H


def test_a_burn_below_one_per_hour_still_crosses() -> None:
    """0.50/h from 9.00 to a budget of 10.00: two hours later."""
    month = Month.of(DEC_11)
    assert crossing_time(spent=9.0, burn_per_hour=0.5, as_of=DEC_11, budget=10.0, month=month) == DEC_11 + 2 * H


def test_a_budget_spent_exactly_keeps_the_day_the_books_show() -> None:
    """Spent 250.00 of 250.00, first reached on 12-07 per the hourly books: the crossing day is 12-07, not
    the day of ``as_of``. Every field of the forecast is the input's or the arithmetic's: 2.00/h, 504 h left."""
    f = forecast_month(namespace="ml", currency="EUR", spent=250.0, burn=BurnRate(48.0, 24.0), as_of=DEC_11,
                       budget=250.0, crossed_at=DEC_7 + 5 * H)
    assert f == Forecast(namespace="ml", currency="EUR", as_of=DEC_11, month=Month(DEC_1, JAN_1), spent=250.0,
                         burn_per_hour=2.0, burn_hours=24.0, hours_left=504.0, month_cost=250.0 + 2.0 * 504,
                         budget=250.0, crossing_day=DEC_7)
