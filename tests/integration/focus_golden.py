"""Makes the FOCUS golden files in ``tests/fixtures/focus/`` with the exporter of the checked-out tree.

    python -m tests.integration.focus_golden            # rewrite the fixtures (review the diff!)

What it writes, and how the golden tests use each:

* ``default_scenario.sql`` -- the ledger of ``gpu-cost-exporter simulate`` (the default scenario), as SQL
  (``sqlite3`` ``iterdump``); ``simulate`` starts at the current wall-clock hour, so the ledger is kept, not
  re-simulated. ``default_scenario.csv`` and ``default_scenario_1.2.csv`` -- ``export --format focus-csv
  --all`` of it (FOCUS 1.3 and 1.2).
* ``random_fleet_<seed>.csv`` -- the FOCUS export of each seed of the two-backend property test
  (``random_fleet.py``): the fleet booked into SQLite by the real ``Books``, exported by the CLI. That test
  books the same fleet into PostgreSQL too and checks both exports against these bytes.

The fixtures were first made on commit 6faadc8 (the row-by-row exporter), so the columnar exporter is held to
the bytes its predecessor wrote.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.integration.random_fleet import SEEDS, book_fleet, random_fleet, random_pricing

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "focus"


def export_csv(*ledger: str, version: str = "1.3") -> str:
    """``gpu-cost-exporter export --format focus-csv --all`` of a ledger, as the CLI writes it: decoded from its
    bytes, since text mode would turn a CR LF into LF and hide it."""
    done = subprocess.run([sys.executable, "-m", "exporter", "export", "--ledger", *ledger, "--format", "focus-csv",
                           "--all", "--focus-version", version], cwd=REPO, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode())
    return done.stdout.decode()


def ledger_from_sql(sql: str, path: Path) -> Path:
    """A ledger file from its ``iterdump`` text."""
    conn = sqlite3.connect(path)
    conn.executescript(sql)
    conn.close()
    return path


def fleet_ledger(seed: int, path: Path) -> None:
    """The property test's fleet for ``seed``, booked into a SQLite ledger at ``path``."""
    rng = random.Random(seed)
    fleet, pricing = random_fleet(rng), random_pricing(rng)
    asyncio.run(book_fleet(str(path), None, fleet=fleet, pricing=pricing))


def main() -> None:
    """Rewrite every golden file."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gce-golden-") as tmp:
        ledger = Path(tmp) / "default.db"
        subprocess.run([sys.executable, "-m", "exporter", "simulate", "--ledger", str(ledger)], cwd=REPO,
                       check=True, capture_output=True)
        conn = sqlite3.connect(ledger)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (FIXTURES / "default_scenario.sql").write_text("\n".join(conn.iterdump()) + "\n")
        conn.close()
        copy = ledger_from_sql((FIXTURES / "default_scenario.sql").read_text(), Path(tmp) / "copy.db")
        for version, name in (("1.3", "default_scenario.csv"), ("1.2", "default_scenario_1.2.csv")):
            (FIXTURES / name).write_text(export_csv(str(copy), version=version))
        for seed in SEEDS:
            path = Path(tmp) / f"fleet{seed}.db"
            fleet_ledger(seed, path)
            (FIXTURES / f"random_fleet_{seed}.csv").write_text(export_csv(str(path)))


if __name__ == "__main__":
    main()
