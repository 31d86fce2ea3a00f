"""Budget windows by hand: where each window lies at a given time, and what a budgets file may say."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from exporter.model.budget_windows import BudgetsFileError, parse_budgets, window_span


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


NOW = _ts("2027-01-06T15:20:00")  # a Wednesday


def test_calendar_windows() -> None:
    """day: 2027-01-06 00:00 to 01-07 00:00; week: Monday 01-04 00:00 to Monday 01-11; month: 01-01 to 02-01."""
    assert window_span("day", now=NOW) == (_ts("2027-01-06T00:00:00"), _ts("2027-01-07T00:00:00"))
    assert window_span("week", now=NOW) == (_ts("2027-01-04T00:00:00"), _ts("2027-01-11T00:00:00"))
    assert window_span("month", now=NOW) == (_ts("2027-01-01T00:00:00"), _ts("2027-02-01T00:00:00"))
    dec = _ts("2026-12-31T23:59:59")
    assert window_span("month", now=dec) == (_ts("2026-12-01T00:00:00"), _ts("2027-01-01T00:00:00"))


def test_rolling_window_starts_on_the_hour_bucket_n_days_back() -> None:
    """7d at 15:20 on 01-06: 7 x 86400 s back is 2026-12-30 15:20, whose hour bucket starts at 15:00; the
    projection horizon is 7 days ahead."""
    start, end = window_span("7d", now=NOW)
    assert start == _ts("2026-12-30T15:00:00")
    assert end == NOW + 7 * 86400


def test_budgets_file_fields() -> None:
    (b,) = parse_budgets({"budgets": [{"name": "t", "target": {"kueue_local_queue": "a/train"}, "gpu_hours": 4,
                                       "window": "week", "action": "hold", "alert_at": [1, 0.5]}]}, source="f")
    assert (b.target_kind, b.target, b.gpu_hours, b.money, b.alert_at) == (
        "kueue_local_queue", "a/train", Decimal(4), None, (Decimal("0.5"), Decimal(1)))
    assert b.acts
    (kai,) = parse_budgets([{"name": "k", "target": {"kai_queue": "q"}, "money": 1, "window": "2d",
                             "action": "hold"}], source="f")
    assert not kai.acts  # KAI has no stop mechanism: reported and budgeted, never held


@pytest.mark.parametrize(("item", "field"), [
    ({"target": {"namespace": "a"}, "money": 1, "window": "day"}, "budgets[0].name"),
    ({"name": "x", "target": {"pool": "a"}, "money": 1, "window": "day"}, "budgets[0].target"),
    ({"name": "x", "target": {"kueue_local_queue": "train"}, "money": 1, "window": "day"}, "kueue_local_queue"),
    ({"name": "x", "target": {"namespace": "a"}, "window": "day"}, "give gpu_hours, money or both"),
    ({"name": "x", "target": {"namespace": "a"}, "money": -1, "window": "day"}, "budgets[0].money"),
    ({"name": "x", "target": {"namespace": "a"}, "money": 1, "window": "fortnight"}, "budgets[0].window"),
    ({"name": "x", "target": {"namespace": "a"}, "money": 1, "window": "day", "action": "kill"}, "budgets[0].action"),
    ({"name": "x", "target": {"namespace": "a"}, "money": 1, "window": "day", "when": 1}, "unknown field 'when'"),
])
def test_bad_budgets_name_the_file_and_field(item: dict[str, object], field: str) -> None:
    with pytest.raises(BudgetsFileError, match=r"^budgets\.yaml: ") as err:
        parse_budgets({"budgets": [item]}, source="budgets.yaml")
    assert field in str(err.value)
    assert "\n" not in str(err.value)
