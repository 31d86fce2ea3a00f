"""Forecasts read from a real SQLite ledger, with the arithmetic written out; budgets from annotations and
values; the metrics and the status page's Budgets table.

The ledger's latest booked time is 2026-12-11 00:00 UTC: 504 h (21 days) are left in December.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.advice.forecasts import MonthForecasts, as_dict, forecasts, render
from exporter.aggregator.kube.budgets import BUDGET_ANNOTATION, BudgetAnnotations, BudgetSource
from exporter.aggregator.ledger.sqlite import sqlite_reader
from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.aggregator.web.metrics import budget_families
from exporter.aggregator.web.status_budgets import budgets_section
from exporter.model.books import AgentMark, UsageAmounts, UsageKey
from exporter.model.budget_values import parse_budget
from exporter.model.exact import exact
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

NOV_25 = 1795564800.0  # 2026-11-25T00:00:00Z
NOV_30_23H = 1796079600.0  # 2026-11-30T23:00:00Z
DEC_1 = 1796083200.0
DEC_2 = 1796169600.0
DEC_4 = 1796342400.0
DEC_5 = 1796428800.0
DEC_10 = 1796860800.0
DEC_11 = 1796947200.0
DEC_25 = 1798156800.0
H = 3600.0


def _row(hour: float, ns: str, cost: float, currency: str = "USD") -> tuple[UsageKey, UsageAmounts]:
    key = UsageKey(int(hour), ns, f"{ns}-0", ns, "n1", "", "NVIDIA H100 80GB HBM3", "", "", currency)
    return key, UsageAmounts(allocated_s=exact(3600.0), cost=exact(cost), list_cost=exact(cost))


def _book(path: Path | str, rows: list[tuple[UsageKey, UsageAmounts]], *, since: float, as_of: float,
          cluster: str = "default", password_file: Path | None = None) -> None:
    ledger = Ledger(path, cluster=cluster, password_file=password_file)
    ledger.open_sync()
    w = TickWrite()
    for key, amounts in rows:
        w.usage[key] = w.usage[key] + amounts if key in w.usage else amounts
    w.agents["n1"] = AgentMark("e1", as_of, 1)
    w.books_since["n1"] = since
    ledger.commit_sync(w)
    ledger.backend.close()


@pytest.fixture
def query(tmp_path: Path) -> Iterator[Any]:
    """ml: 1000.00 in November (not this month), 252.00 at 12-01 00:00 and 2.00 in each of the 24 hours of
    12-10 -> spent 252 + 24 x 2 = 300.00. web: 150.00 (12-02) + 100.00 (12-05 10:00) = 250.00. mixed: USD and
    EUR. Another cluster's 999.00 for ml must not count."""
    path = tmp_path / "ledger.db"
    rows = [_row(NOV_30_23H, "ml", 1000.0), _row(DEC_1, "ml", 252.0)]
    rows += [_row(DEC_10 + k * H, "ml", 2.0) for k in range(24)]
    rows += [_row(DEC_2, "web", 150.0), _row(DEC_5 + 10 * H, "web", 100.0)]
    rows += [_row(DEC_2, "mixed", 1.0, "USD"), _row(DEC_2, "mixed", 1.0, "EUR")]
    _book(path, rows, since=NOV_25, as_of=DEC_11)
    _book(path, [_row(DEC_10, "ml", 999.0)], since=NOV_25, as_of=DEC_11 - H, cluster="other")
    with sqlite_reader(path) as read:  # amounts back as decimals, as the aggregator reads them
        yield read


def test_forecast_from_the_ledger(query: Any) -> None:
    """ml: burn over the 24 booked hours from 12-10 00:00 = 48.00 / 24 h = 2.00/h; 300 + 2 x 504 = 1308.00;
    budget 1000: (1000 - 300) / 2 = 350 h after 12-11 00:00 -> 12-25 14:00, day 12-25."""
    rows = {f.namespace: f for f in forecasts(query, cluster="default", budgets={"ml": 1000.0})}
    ml = rows["ml"]
    assert ml.as_of == DEC_11
    assert ml.spent == pytest.approx(252.0 + 24 * 2.0)  # 300.00
    assert ml.burn_per_hour == pytest.approx(48.0 / 24)  # 2.00
    assert ml.month_cost == pytest.approx(300.0 + 2.0 * 504)  # 1308.00
    assert ml.crossing_day == DEC_25 and ml.over_budget is True
    assert "mixed" not in rows  # two currencies: unknown, not summed


def test_a_seven_day_window_averages_over_168_booked_hours(query: Any) -> None:
    """Window 7 d: from 12-04 00:00, 168 h, in which ml booked 48.00 -> 48/168 per hour;
    300 + 48/168 x 504 = 300 + 144 = 444.00."""
    (ml,) = [f for f in forecasts(query, cluster="default", budgets={}, window_s=7 * 86400) if f.namespace == "ml"]
    assert ml.burn_per_hour == pytest.approx(48.0 / 168)
    assert ml.month_cost == pytest.approx(300.0 + 48.0 / 168 * 504)  # 444.00


def test_budget_spent_already_and_budget_without_usage(query: Any) -> None:
    """web: 250.00 spent >= 200 budget; the running total reached it in the 12-05 10:00 bucket (150 + 100)
    -> crossing day 12-05; no cost in the last 24 h -> burn 0, forecast 250.00. quiet: a budget, nothing
    booked -> spent 0, forecast 0, no crossing."""
    rows = {f.namespace: f for f in forecasts(query, cluster="default", budgets={"web": 200.0, "quiet": 50.0})}
    web, quiet = rows["web"], rows["quiet"]
    assert web.spent == pytest.approx(150.0 + 100.0) and web.burn_per_hour == 0.0
    assert web.month_cost == pytest.approx(250.0) and web.crossing_day == DEC_5 and web.over_budget is True
    assert quiet.spent == 0.0 and quiet.month_cost == 0.0 and quiet.crossing_day is None
    assert quiet.over_budget is False and quiet.currency == ""


def test_the_window_starts_where_the_books_begin(tmp_path: Path) -> None:
    """Books since 12-10 12:00, 2.00 in each hour to 12-11 00:00: 12 booked hours, 24.00 -> 2.00/h;
    24 + 2 x 504 = 1032.00 (not 24.00 / 24 h = 1.00/h)."""
    path = tmp_path / "young.db"
    _book(path, [_row(DEC_10 + k * H, "ml", 2.0) for k in range(12, 24)], since=DEC_10 + 12 * H, as_of=DEC_11)
    with sqlite_reader(path) as read:
        (ml,) = forecasts(read, cluster="default", budgets={})
    assert ml.burn_per_hour == pytest.approx(24.0 / 12)
    assert ml.month_cost == pytest.approx(24.0 + 2.0 * 504)  # 1032.00


def test_an_empty_ledger_has_no_forecast(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "empty.db")
    ledger.open_sync()
    assert forecasts(ledger.query_sync, cluster="default", budgets={"ml": 10.0}) == []


def test_rows_render_as_json_csv_and_table(query: Any) -> None:
    rows = forecasts(query, cluster="default", budgets={"ml": 1000.0})
    ml = next(as_dict(f) for f in rows if f.namespace == "ml")
    assert ml["budget_crossing_day"] == "2026-12-25" and ml["month"] == "2026-12"
    assert ml["as_of"] == "2026-12-11T00:00:00Z" and ml["forecast_month_cost"] == pytest.approx(1308.0)
    assert render(rows, "csv").splitlines()[0] == ("namespace,month,budget,spent,burn_per_hour,forecast_month_cost,"
                                                   "over_budget,budget_crossing_day,currency")
    assert "1,308.00" in render(rows, "table")


@pytest.mark.parametrize(("text", "amount"), [("1500", 1500.0), (" 1500.50 ", 1500.5), ("2e3", 2000.0),
                                              ("0", None), ("-5", None), ("1,500", None), ("1500 USD", None),
                                              ("NaN", None), ("Infinity", None), ("", None)])
def test_budget_amounts(text: str, amount: float | None) -> None:
    assert parse_budget(text) == amount


def test_annotations_watch_values_override_and_bad_values_counted_once() -> None:
    """Annotations kept from namespace events (and relists); a bad one is ignored and counted once per value;
    a configured budget overrides the namespace's own."""
    ann = BudgetAnnotations()

    def ns(name: str, value: str | None) -> dict[str, Any]:
        return {"metadata": {"name": name, "annotations": {} if value is None else {BUDGET_ANNOTATION: value}}}

    ann.handle("namespaces", "ADDED", obj=ns("ml", "1000"))
    ann.handle("namespaces", "ADDED", obj=ns("web", "lots"))
    ann.handle("namespaces", "ADDED", obj=ns("dev", "300"))
    ann.handle("pods", "ADDED", obj=ns("pod-like", "5"))  # not a namespace
    source = BudgetSource(overrides={"dev": 50.0})
    for _ in range(3):
        budgets = source.current(ann.by_namespace)
    assert {n: (b.amount, b.source) for n, b in budgets.items()} == {"ml": (1000.0, "annotation"),
                                                                   "dev": (50.0, "values")}
    assert source.invalid_total == 1  # "lots", counted once over three refreshes
    ann.handle("namespaces", "MODIFIED", obj=ns("web", "also bad"))
    source.current(ann.by_namespace)
    assert source.invalid_total == 2
    ann.handle("namespaces", "DELETED", obj=ns("ml", "1000"))
    ann.handle("namespaces", "LISTED", obj={"items": [ns("new", "7.5")]})
    assert ann.by_namespace == {"new": "7.5"}


def test_metrics_and_status_table(query: Any) -> None:
    """gpucost_budget from the budgets now; forecast and crossing day (12-25 00:00 = 1798156800) per forecast."""
    rows = tuple(forecasts(query, cluster="default", budgets={"ml": 1000.0, "quiet": 50.0}))
    samples = {(s.name, s.labels.get("namespace")): s.value
               for fam in budget_families({"ml": 1000.0, "quiet": 50.0}, rows, invalid=2) for s in fam.samples}
    assert samples[("gpucost_budget", "ml")] == 1000.0
    assert samples[("gpucost_forecast_month_cost", "ml")] == pytest.approx(1308.0)
    assert samples[("gpucost_forecast_budget_crossing_timestamp_seconds", "ml")] == DEC_25
    assert ("gpucost_forecast_budget_crossing_timestamp_seconds", "quiet") not in samples
    assert samples[("gpucost_budget_annotations_invalid_total", None)] == 2
    html = budgets_section(rows, budgets={"ml": 1000.0, "<b>x</b>": 5.0}, currency="USD")
    assert "<td>ml</td><td>1,000.00 USD</td><td>300.00 USD</td><td><span class=\"warn\">1,308.00 USD</span></td>" \
           "<td>2026-12-25</td>" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html


async def test_refresh_every_commit_while_the_books_are_young(tmp_path: Path) -> None:
    """Books 60 s old (< the 300 s refresh): every commit refreshes, so a fresh install's forecast does not stand
    on its first seconds. Books 2 h old: the next refresh waits 300 s of the aggregator's clock."""
    path = tmp_path / "l.db"
    _book(path, [_row(DEC_10, "ml", 1.0)], since=DEC_10, as_of=DEC_10 + 60)
    ledger = Ledger(path)
    await ledger.open()
    holder = MonthForecasts(every=300.0)
    try:
        await holder.after_commit(ledger, budgets={}, currency="USD", now=DEC_10 + 60)
        assert holder.rows[0].spent == 1.0 and holder.rows[0].burn_hours == pytest.approx(60 / H)
        _book(path, [_row(DEC_10, "ml", 1.0)], since=DEC_10, as_of=DEC_10 + 2 * H)
        await holder.after_commit(ledger, budgets={}, currency="USD", now=DEC_10 + 75)  # young: refreshed
        assert holder.rows[0].spent == 2.0 and holder.rows[0].burn_hours == pytest.approx(2.0)
        _book(path, [_row(DEC_10, "ml", 1.0)], since=DEC_10, as_of=DEC_10 + 2 * H)
        await holder.after_commit(ledger, budgets={}, currency="USD", now=DEC_10 + 90)  # 2 h of books: waits
        assert holder.rows[0].spent == 2.0
        await holder.after_commit(ledger, budgets={}, currency="USD", now=DEC_10 + 75 + 300)
        assert holder.rows[0].spent == 3.0
    finally:
        await ledger.close()


def test_forecast_on_sqlite_and_postgresql(ledger_target: LedgerTarget) -> None:
    """The same books on both backends (NUMERIC money on PostgreSQL): 252 + 24 x 2 = 300.00 spent, 2.00/h,
    300 + 2 x 504 = 1308.00, budget 1000 crossed on 12-25."""
    rows = [_row(DEC_1, "ml", 252.0), *(_row(DEC_10 + k * H, "ml", 2.0) for k in range(24))]
    _book(ledger_target.target, rows, since=NOV_25, as_of=DEC_11, password_file=ledger_target.password_file)
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    ledger.open_sync()
    try:
        (ml,) = forecasts(ledger.query_sync, cluster="default", budgets={"ml": 1000.0})
    finally:
        ledger.backend.close()
    assert ml.spent == pytest.approx(300.0) and ml.month_cost == pytest.approx(1308.0)
    assert ml.crossing_day == DEC_25


def test_bad_budgets_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The aggregator's setting, a budgets file and a flag: one line naming the setting, file or flag, exit 2."""
    from exporter.cli import main

    _book(tmp_path / "l.db", [_row(DEC_1, "ml", 252.0)], since=DEC_1, as_of=DEC_11)
    bad_file = tmp_path / "budgets.yaml"
    bad_file.write_text("budgets:\n  ml: lots\n")
    cases = [
        (["aggregator", "--budgets", "ml=lots"], "gpu-cost-exporter: error: setting budgets (GPUCOST_BUDGETS): "),
        (["report", "--ledger", str(tmp_path / "l.db"), "--budgets-file", str(bad_file)],
         f"gpu-cost-exporter: error: {bad_file}: ml: 'lots' is not a positive amount"),
        (["report", "--ledger", str(tmp_path / "l.db"), "--budgets", "--forecast-window", "0s"],
         "gpu-cost-exporter: error: --forecast-window: must be longer than 0"),
    ]
    for argv, line in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(line) and len(err.strip().splitlines()) == 1, err
    good = tmp_path / "values.yaml"
    good.write_text("budgets:\n  ml: 1000\n")  # the chart's values file
    assert main(["report", "--ledger", str(tmp_path / "l.db"), "--budgets-file", str(good), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("ml,2026-12,1000.000000000,252.000000000,")
