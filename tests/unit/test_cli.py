"""The command line on bad input: one stderr line naming the file and field, exit 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.cli import main
from exporter.model.books import UsageAmounts, UsageKey
from exporter.model.exact import exact
from tests.unit.model.pricing.test_pricing_schema import HEAD, _commitment
from tests.unit.sim.test_scenario import BASE


def test_aggregator_exits_2_on_invalid_pricing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An invalid pricing file stops the aggregator at start with one line and exit code 2."""
    bad = tmp_path / "pricing.yaml"
    bad.write_text("default_price: -1\n")
    assert main(["aggregator", "--pricing-file", str(bad), "--ledger", str(tmp_path / "l.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "default_price" in err[0]
    assert not (tmp_path / "l.db").exists()


def test_cli_bad_scenario_exit_2(write_scenario: Callable[[str], Path], tmp_path: Path) -> None:
    """`simulate` with a bad scenario: one stderr line, exit 2, no ledger written."""
    path = write_scenario(BASE + "pods: [{name: p, namespace: a, node: n0, gpus: 9}]")
    ledger = tmp_path / "out.db"
    proc = subprocess.run([sys.executable, "-m", "exporter", "simulate", "--scenario", str(path), "--ledger",
                           str(ledger)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "pods[0].gpus" in proc.stderr
    assert not ledger.exists()


def test_cli_unknown_flag_and_missing_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Unknown flags and unreadable scenarios exit 2 with one line."""
    with pytest.raises(SystemExit) as info:
        main(["report", "--bogus"])
    assert info.value.code == 2
    assert main(["simulate", "--scenario", str(tmp_path / "none.yaml"), "--ledger", str(tmp_path / "l.db")]) == 2
    assert "none.yaml: cannot read" in capsys.readouterr().err


def test_aggregator_exits_2_on_an_invalid_version_2_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI refuses a bad commitment at start: exit 2, one stderr line with file and field, no ledger."""
    bad = tmp_path / "pricing.yaml"
    bad.write_text(HEAD + _commitment(gpus="0"))
    assert main(["aggregator", "--pricing-file", str(bad), "--ledger", str(tmp_path / "l.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{bad}: field commitments[0].gpus:" in err[0]
    assert not (tmp_path / "l.db").exists()


def test_aggregator_exits_2_on_a_bad_budgets_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A budgets file with an unknown window: exit 2, one stderr line with file and field, no ledger."""
    pricing, budgets = tmp_path / "pricing.yaml", tmp_path / "budgets.yaml"
    pricing.write_text("currency: USD\ndefault_price: 1.0\n")
    budgets.write_text("budgets:\n  - {name: x, target: {namespace: a}, money: 1, window: fortnight}\n")
    assert main(["aggregator", "--pricing-file", str(pricing), "--window-budgets-file", str(budgets),
                 "--ledger", str(tmp_path / "l.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{budgets}: budgets[0].window:" in err[0]
    assert not (tmp_path / "l.db").exists()


async def test_reprice_in_another_currency_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger booked in USD (1 GPU-h at 4.00) repriced by a EUR document: one line naming the file and
    the field, exit 2, nothing printed. The same document in USD reprices it (1 GPU-h x 3.00 = 3.00)."""
    ledger = Ledger(tmp_path / "l.db")
    await ledger.open()
    w = TickWrite()
    w.usage[UsageKey(3600, "ns", "p", "wl", "n1", "", "M", "", "", "USD")] = UsageAmounts(
        allocated_s=exact(3600.0), cost=exact(4.0), list_cost=exact(4.0))
    await ledger.commit(w)
    await ledger.close()
    eur, usd = tmp_path / "eur.yaml", tmp_path / "usd.yaml"
    eur.write_text("currency: EUR\ndefault_price: 3.0\n")
    usd.write_text("currency: USD\ndefault_price: 3.0\n")
    args = ["report", "--ledger", str(tmp_path / "l.db"), "--format", "json", "--reprice"]
    assert main([*args, str(eur)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert f"{eur}: field currency: EUR" in err and "USD" in err
    assert main([*args, str(usd)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["cost"], row["reprice_cost"]) == (4.0, 3.0)


@pytest.mark.parametrize("command", [["report"], ["recommend"], ["report", "--budget", "ns=10"]])
def test_ledger_commands_refuse_a_ledger_they_cannot_read_in_one_line(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger that is not there, or a file that is not a database: exit 2, one stderr line naming the path,
    nothing printed; the same for every command that reads a ledger."""
    garbage = tmp_path / "garbage.db"
    garbage.write_text("not a database\n")
    for ledger, says in ((tmp_path / "none.db", "no such ledger"), (garbage, "not a gpu-cost-exporter ledger")):
        assert main([*command, "--ledger", str(ledger)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and f"{ledger}: {says}" in err


def test_agent_exits_2_on_a_bad_exporter_selector(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """One line naming the setting and the entry; nothing started."""
    monkeypatch.setenv("GPUCOST_NODE_NAME", "gpu-1")
    monkeypatch.setenv("GPUCOST_EXPORTER_SELECTORS", "app=nvidia-dcgm-exporter@9400;app=x")
    assert main(["agent"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "exporter_selectors" in err and "'app=x'" in err
