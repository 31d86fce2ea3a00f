"""Month-end forecast and budget crossing, each with its arithmetic written out by hand.

December 2026 has 31 days. At 2026-12-11 00:00 UTC ten days have passed and 21 days x 24 h = 504 h are left.
"""

from __future__ import annotations

import pytest

from exporter.model.forecast import BurnRate, HourCost, Month, crossing_time, day_of, first_crossing, forecast_month

DEC_1 = 1796083200.0  # 2026-12-01T00:00:00Z
DEC_7 = 1796601600.0  # 2026-12-07T00:00:00Z
DEC_11 = 1796947200.0  # 2026-12-11T00:00:00Z
DEC_25 = 1798156800.0  # 2026-12-25T00:00:00Z
JAN_1 = 1798761600.0  # 2027-01-01T00:00:00Z
FEB_1_2028 = 1832976000.0  # 2028-02-01T00:00:00Z (leap year)
MAR_1_2028 = 1835481600.0
H = 3600.0



def test_months_are_calendar_months_in_utc() -> None:
    assert Month.of(DEC_11) == Month(DEC_1, JAN_1)  # December rolls over into the next year
    assert Month.of(JAN_1 - 1) == Month(DEC_1, JAN_1)
    assert Month.of(JAN_1).start == JAN_1
    assert Month.of(FEB_1_2028 + 5 * H) == Month(FEB_1_2028, MAR_1_2028)
    assert (MAR_1_2028 - FEB_1_2028) / H == 29 * 24  # 29 days in February 2028


def test_forecast_is_spent_plus_burn_times_hours_left() -> None:
    """Spent 300.00 by 2026-12-11 00:00, burn 48.00 over the last 24 h = 2.00/h, 504 h left:
    300 + 2 x 504 = 1308.00."""
    f = forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(cost=48.0, hours=24.0),
                       as_of=DEC_11, budget=None)
    assert f is not None
    assert f.burn_per_hour == pytest.approx(2.0)  # 48.00 / 24 h
    assert f.hours_left == pytest.approx(21 * 24) and f.burn_hours == 24.0  # 504 h left; rate over 24 h
    assert f.month_cost == pytest.approx(300.0 + 2.0 * 504)  # 1308.00
    assert f.budget is None and f.crossing_day is None and f.over_budget is None


def test_crossing_day_is_the_first_day_spent_plus_burn_reaches_the_budget() -> None:
    """Budget 1000: (1000 - 300) / 2.00 = 350 h after 12-11 00:00 = 14 d 14 h -> 12-25 14:00, day 12-25;
    forecast 1308.00 > 1000: over."""
    f = forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(48.0, 24.0), as_of=DEC_11,
                       budget=1000.0)
    assert f is not None
    assert crossing_time(spent=300.0, burn_per_hour=2.0, as_of=DEC_11, budget=1000.0,
                         month=Month.of(DEC_11)) == DEC_11 + 350 * H
    assert f.crossing_day == DEC_25
    assert f.over_budget is True


def test_no_crossing_when_the_month_ends_first() -> None:
    """Budget 1500: 1200 / 2.00 = 600 h > 504 h left -> no crossing, forecast 1308.00 within budget.
    Budget exactly 1308.00: reached at the month's last instant, which is not in the month -> none, not over."""
    under = forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(48.0, 24.0), as_of=DEC_11,
                           budget=1500.0)
    assert under is not None and under.crossing_day is None and under.over_budget is False
    exact = forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(48.0, 24.0), as_of=DEC_11,
                           budget=1308.0)
    assert exact is not None and exact.crossing_day is None and exact.over_budget is False


def test_zero_burn_never_crosses_an_unspent_budget() -> None:
    f = forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(0.0, 24.0), as_of=DEC_11,
                       budget=400.0)
    assert f is not None and f.month_cost == pytest.approx(300.0) and f.crossing_day is None


def test_a_budget_already_spent_crossed_on_the_day_the_books_show() -> None:
    """Budget 250: hours of 100 (12-01 00:00), 100 (12-06 23:00), 100 (12-07 05:00): the running total
    reaches 300 >= 250 in the 12-07 05:00 bucket -> day 12-07. Without the hourly books: the day of as_of."""
    hours = [HourCost(DEC_7 + 5 * H, 100.0), HourCost(DEC_1, 100.0), HourCost(DEC_7 - H, 100.0)]
    assert first_crossing(hours, 250.0) == DEC_7 + 5 * H
    assert first_crossing(hours, 301.0) is None
    f = forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(48.0, 24.0), as_of=DEC_11,
                       budget=250.0, crossed_at=first_crossing(hours, 250.0))
    assert f is not None and f.crossing_day == DEC_7 and f.over_budget is True
    g = forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(48.0, 24.0), as_of=DEC_11 + 7 * H,
                       budget=250.0)
    assert g is not None and g.crossing_day == DEC_11


def test_unknown_burn_rate_gives_no_forecast() -> None:
    """No booked time in the window: the rate is unknown, so is the forecast (never 0)."""
    assert BurnRate(cost=0.0, hours=0.0).per_hour is None
    assert forecast_month(namespace="ml", currency="USD", spent=300.0, burn=BurnRate(0.0, 0.0), as_of=DEC_11,
                          budget=1000.0) is None


def test_day_of_is_utc_midnight() -> None:
    assert day_of(DEC_11 + 350 * H) == DEC_25
    assert day_of(DEC_25) == DEC_25
