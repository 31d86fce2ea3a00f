"""The export's window without ``--since`` / ``--until``: the current month to date, the way a finance team
closes its books; ``--all`` the whole ledger. Through the CLI on a ledger written by the real ``Ledger``."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exporter.aggregator.focus.commands import CommandError, export_window, month_start
from tests.unit.aggregator.focus.focus_helpers import UsageRow, read_csv, write_ledger
from tests.unit.aggregator.focus.test_focus_golden import run_cli

NOW = datetime(2026, 11, 17, 9, 30, tzinfo=UTC).timestamp()
NOV_1 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()


def _row(hour: float, pod: str) -> UsageRow:
    return UsageRow(hour=int(hour), node="gpu-node-07", namespace="ml-team", pod=pod, allocated_s=3600.0,
                    used_s=1800.0, idle_s=1800.0, cost=4.0, idle_cost=2.0)


@pytest.fixture
def two_months(tmp_path: Path) -> Path:
    """One pod-hour in the first hour of the current UTC month, one three days before it (last month)."""
    this_month = month_start(time.time())
    path = tmp_path / "ledger.db"
    write_ledger(path, [_row(this_month, "this-month"), _row(this_month - 3 * 86400, "last-month")], [])
    return path


def _pods(ledger: Path, *flags: str) -> list[str]:
    done = run_cli("export", "--ledger", str(ledger), "--format", "focus-csv", "--cluster", "prod-eu1", *flags)
    assert done.returncode == 0, done.stderr
    return sorted(r["x_PodName"] for r in read_csv(done.stdout))


def test_no_window_flags_is_the_current_month_to_date() -> None:
    assert export_window(None, None, now=NOW) == export_window("2026-11-01T00:00:00Z", "now", now=NOW)
    window = export_window(None, None, now=NOW)
    assert (window.since, window.until) == (NOV_1, NOW)


def test_until_alone_counts_from_the_start_of_its_month() -> None:
    window = export_window(None, "2026-10-20T00:00:00Z", now=NOW)
    assert window.since == datetime(2026, 10, 1, tzinfo=UTC).timestamp()
    assert window.until == datetime(2026, 10, 20, tzinfo=UTC).timestamp()


def test_since_alone_runs_to_now() -> None:
    assert export_window("2026-10-20T00:00:00Z", None, now=NOW).until == NOW


def test_all_is_the_whole_ledger_and_refuses_a_window() -> None:
    window = export_window(None, None, now=NOW, whole=True)
    assert (window.since, window.until) == (None, None)
    for since, until in (("720h", None), (None, "now")):
        with pytest.raises(CommandError, match="--all"):
            export_window(since, until, now=NOW, whole=True)


def test_export_without_a_window_exports_this_month(two_months: Path) -> None:
    assert _pods(two_months) == ["this-month"]


def test_export_all_exports_every_month(two_months: Path) -> None:
    assert _pods(two_months, "--all") == ["last-month", "this-month"]


def test_all_with_since_is_a_usage_error(two_months: Path) -> None:
    done = run_cli("export", "--ledger", str(two_months), "--format", "focus-csv", "--all", "--since", "720h")
    assert done.returncode == 2 and "--all" in done.stderr and done.stdout == ""


def test_help_says_the_default_window() -> None:
    done = run_cli("export", "--help")
    assert done.returncode == 0
    assert "current month to date" in " ".join(done.stdout.split()) and "--all" in done.stdout
