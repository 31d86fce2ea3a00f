"""A budgets file is refused with one line naming the file, the budget's field and what is wrong, pinned here
word for word; and the edges of what is accepted (a fraction of exactly 10, every window name, rolling
windows on the hour, fractional and non-UTC clocks)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from exporter.model.budget_windows import BudgetsFileError, WindowBudget, parse_budgets, window_span
from tests.unit.model.test_budget_windows import NOW, _ts

OK = {"name": "x", "target": {"namespace": "a"}, "money": 1, "window": "day"}
QUEUES = "namespace, team, kueue_local_queue, kueue_cluster_queue, volcano_queue, kai_queue, yunikorn_queue"

REFUSED = [
    ({"budgets": 3}, "budgets: expected a list of budgets"),
    ({"budgets": [OK] * 1001}, "budgets: 1001 budgets, at most 1000"),
    ({"budgets": [3]}, "budgets[0]: expected a mapping"),
    ({"budgets": [OK | {"when": 1, "a": 2}]}, "budgets[0]: unknown field 'a'"),
    ({"budgets": [OK | {"name": ""}]}, "budgets[0].name: '' must be a unique name of 1 to 128 characters"),
    ({"budgets": [OK | {"name": "n" * 129}]},
     f"budgets[0].name: {'n' * 129!r} must be a unique name of 1 to 128 characters"),
    ({"budgets": [OK, OK]}, "budgets[1].name: 'x' must be a unique name of 1 to 128 characters"),
    ({"budgets": [OK | {"target": {"namespace": "a", "team": "b"}}]},
     f"budgets[0].target: expected one of {QUEUES} naming the target"),
    ({"budgets": [OK | {"target": {"kueue_local_queue": "q"}}]},
     "budgets[0].target.kueue_local_queue: expected <namespace>/<name>, got 'q'"),
    ({"budgets": [{"name": "x", "target": {"namespace": "a"}, "window": "day"}]},
     "budgets[0]: give gpu_hours, money or both"),
    ({"budgets": [OK | {"money": "abc"}]}, "budgets[0].money: 'abc' is not a number"),
    ({"budgets": [OK | {"money": 0}]}, "budgets[0].money: 0 is not a positive amount"),
    ({"budgets": [OK | {"gpu_hours": "inf"}]}, "budgets[0].gpu_hours: 'inf' is not a positive amount"),
    ({"budgets": [OK | {"window": "0d"}]}, "budgets[0].window: '0d' is not day, week, month or Nd"),
    ({"budgets": [{"name": "x", "target": {"namespace": "a"}, "money": 1}]},
     "budgets[0].window: '' is not day, week, month or Nd"),
    ({"budgets": [OK | {"action": "kill"}]}, "budgets[0].action: 'kill' is not one of none, hold, drain"),
    ({"budgets": [OK | {"alert_at": [0.5, 11]}]},
     "budgets[0].alert_at[1]: 11 is not a fraction of the budget (0 < f <= 10)"),
    ({"budgets": [OK | {"alert_at": 10.5}]},
     "budgets[0].alert_at[0]: 10.5 is not a fraction of the budget (0 < f <= 10)"),
    ({"budgets": [OK | {"alert_at": "x"}]}, "budgets[0].alert_at[0]: 'x' is not a number"),
]


@pytest.mark.parametrize(("raw", "message"), REFUSED, ids=[str(i) for i in range(len(REFUSED))])
def test_the_whole_line(raw: object, message: str) -> None:
    with pytest.raises(BudgetsFileError) as info:
        parse_budgets(raw, source="b.yaml")
    assert str(info.value) == f"b.yaml: {message}"


def test_what_is_accepted_at_the_edges() -> None:
    """A fraction of exactly 10 alerts at ten times the budget; a name of 128 characters; every calendar
    window and the longest rolling one."""
    (ten,) = parse_budgets({"budgets": [OK | {"alert_at": 10, "name": "n" * 128}]}, source="b.yaml")
    assert ten.alert_at == (Decimal(10),)
    windows = ["day", "week", "month", "999d"]
    rows = parse_budgets([OK | {"name": w, "window": w} for w in windows], source="b.yaml")
    assert [b.window for b in rows] == windows


def test_every_field_of_a_budget_and_the_defaults() -> None:
    """Without action and alerts: no action, alerts at 80 % and 100 %. A thousand budgets are allowed."""
    (b,) = parse_budgets([{"name": "gpu", "target": {"team": "ml"}, "money": "12.5", "gpu_hours": 3,
                           "window": "7d"}], source="b.yaml")
    assert b == WindowBudget("gpu", "team", "ml", "7d", Decimal(3), Decimal("12.5"), "none",
                             (Decimal("0.8"), Decimal(1)))
    assert len(parse_budgets([OK | {"name": f"b{i}"} for i in range(1000)], source="b.yaml")) == 1000


def test_an_unknown_window_is_refused_by_name() -> None:
    with pytest.raises(ValueError) as info:
        window_span("fortnight", now=NOW)
    assert str(info.value) == "unknown window 'fortnight': use day, week, month or Nd"


def test_a_rolling_window_from_a_whole_hour_starts_exactly_n_days_back() -> None:
    """At 15:00:00 sharp, 2d starts at 15:00:00 two days before (its own hour bucket, not the one before)."""
    three = _ts("2027-01-06T15:00:00")
    assert window_span("2d", now=three) == (three - 2 * 86400, three + 2 * 86400)


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone set to UTC+9: 20:00 UTC on the 6th is already the 7th there."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_calendar_windows_are_utc_whatever_the_local_zone(tokyo: None) -> None:
    evening = _ts("2027-01-06T20:00:00")
    assert window_span("day", now=evening) == (_ts("2027-01-06T00:00:00"), _ts("2027-01-07T00:00:00"))
    assert window_span("month", now=evening) == (_ts("2027-01-01T00:00:00"), _ts("2027-02-01T00:00:00"))


def test_a_fractional_now_still_starts_the_day_at_midnight() -> None:
    assert window_span("day", now=NOW + 0.25) == (_ts("2027-01-06T00:00:00"), _ts("2027-01-07T00:00:00"))
