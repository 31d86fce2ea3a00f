"""No command destroys a file it did not make: ``simulate`` replaces only a ledger an earlier ``simulate`` wrote,
and only with ``--overwrite``; ``export`` the same for its own files. Real processes of ``python -m exporter``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.cli_outputs import SIMULATED_KEY, SIMULATED_VALUE
from tests.conftest import REPO
from tests.disk import fill, small_tmpfs

pytestmark = pytest.mark.timeout(180)
SCENARIO = """
tick: 15s
duration: 2m
prices: {"NVIDIA L4": 1.0}
nodes: [{name: n0, model: "NVIDIA L4", gpus: 1}]
pods: [{name: p, namespace: a, node: n0, gpus: 1, utilization: 0.5}]
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exporter", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(proc: subprocess.CompletedProcess[str], says: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and says in proc.stderr, proc.stderr


def mark(ledger: Path) -> list[tuple[str]]:
    with contextlib.closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = ?", (SIMULATED_KEY,)).fetchall()


def test_simulate_replaces_only_its_own_ledger_and_only_when_asked(tmp_path: Path) -> None:
    """First run: a new marked ledger and nothing else beside it. Second run: refused without --overwrite, the
    ledger untouched; with it, replaced. A ledger without the mark (what the aggregator writes) is refused even
    with --overwrite, byte for byte unchanged."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    ledger = tmp_path / "ledger.db"
    first = cli("simulate", "--scenario", str(scenario), "--ledger", str(ledger))
    assert first.returncode == 0, first.stderr
    assert f"ledger: {ledger}" in first.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db", "s.yaml"]  # no scratch file left
    assert mark(ledger) == [(SIMULATED_VALUE,)]
    before = digest(ledger)
    refused(cli("simulate", "--scenario", str(scenario), "--ledger", str(ledger)),
            f"--ledger {ledger}: exists (a ledger simulate wrote); --overwrite replaces it")
    assert digest(ledger) == before
    again = cli("simulate", "--overwrite", "--scenario", str(scenario), "--ledger", str(ledger))
    assert again.returncode == 0, again.stderr
    assert mark(ledger) == [(SIMULATED_VALUE,)]
    report = cli("report", "--ledger", str(ledger), "--format", "json")
    assert report.returncode == 0 and json.loads(report.stdout)[0]["namespace"] == "a"
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:  # now it looks like any aggregator's ledger
        conn.execute("DELETE FROM meta WHERE key = ?", (SIMULATED_KEY,))
    before = digest(ledger)
    refused(cli("simulate", "--overwrite", "--scenario", str(scenario), "--ledger", str(ledger)),
            f"--ledger {ledger}: exists and is not a ledger simulate wrote; refusing to replace it")
    assert digest(ledger) == before


def test_export_replaces_only_its_own_file_and_only_when_asked(tmp_path: Path) -> None:
    """An export to a new file writes it and its metadata; the same again needs --overwrite; a file that its
    metadata does not name (another program's, or renamed) is never replaced."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    ledger = tmp_path / "ledger.db"
    assert cli("simulate", "--scenario", str(scenario), "--ledger", str(ledger)).returncode == 0
    out = tmp_path / "focus.csv"
    export = ("export", "--ledger", str(ledger), "--format", "focus-csv", "--all", "--output", str(out))
    done = cli(*export)
    assert done.returncode == 0, done.stderr
    assert out.read_text().startswith("AvailabilityZone,") or "," in out.read_text().splitlines()[0]
    assert json.loads(Path(f"{out}.metadata.json").read_text())["Export"]["File"] == "focus.csv"
    written = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("ledger.db"))
    assert written == ["focus.csv", "focus.csv.metadata.json", "s.yaml"]  # written beside, renamed: nothing left
    before = (digest(out), digest(Path(f"{out}.metadata.json")))
    refused(cli(*export), f"--output {out}: exists (an earlier export); --overwrite replaces it")
    assert (digest(out), digest(Path(f"{out}.metadata.json"))) == before
    assert cli(*export, "--overwrite").returncode == 0
    garbage = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(garbage)) as conn, conn:  # a SQLite file, not a ledger
        conn.execute("CREATE TABLE t (x)")
    before = (digest(out), digest(Path(f"{out}.metadata.json")))
    refused(cli("export", "--ledger", str(garbage), "--format", "focus-csv", "--all", "--output", str(out),
                "--overwrite"), f"{garbage}: not a gpu-cost-exporter ledger")
    assert (digest(out), digest(Path(f"{out}.metadata.json"))) == before  # a failed export changes nothing
    other = tmp_path / "budget.csv"
    other.write_text("team,amount\na,100\n")
    Path(f"{other}.metadata.json").write_text(Path(f"{out}.metadata.json").read_text())  # names focus.csv
    refused(cli(*export[:-1], str(other), "--overwrite"),
            f"--output {other}: exists and is not a file export wrote; refusing to replace it")
    assert other.read_text() == "team,amount\na,100\n"


def test_an_export_that_runs_out_of_disk_leaves_the_earlier_export_as_it_was(tmp_path: Path) -> None:
    """An export is written beside its target and renamed into place only when complete. On a filesystem with
    no room left, ``export --overwrite`` fails with one line naming the output and the cause, exit 2; the earlier
    export and its metadata are byte for byte as they were and no scratch file is left behind."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    ledger = tmp_path / "ledger.db"
    assert cli("simulate", "--scenario", str(scenario), "--ledger", str(ledger)).returncode == 0
    with small_tmpfs(tmp_path / "fs", size="1m") as fs:
        out = fs / "focus.csv"
        export = ("export", "--ledger", str(ledger), "--format", "focus-csv", "--all", "--output", str(out))
        assert cli(*export).returncode == 0
        before = (digest(out), digest(Path(f"{out}.metadata.json")))
        fill(fs / "filler")
        failed = cli(*export, "--overwrite")
        refused(failed, f"{out}: ")
        assert "No space left on device" in failed.stderr, failed.stderr
        assert (digest(out), digest(Path(f"{out}.metadata.json"))) == before
        assert sorted(p.name for p in fs.iterdir()) == ["filler", "focus.csv", "focus.csv.metadata.json"]
