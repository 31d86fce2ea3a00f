"""The FOCUS export of a PostgreSQL ledger: the same books written through the real ``Ledger`` into a SQLite
file and into a real PostgreSQL database export byte for byte the same, from the CLI and from
``/api/v1/focus`` of an aggregator on that database.

The books (cluster prod-eu1; another cluster shares both ledgers and must not leak into the export):
hour 1 (2026-11-30 23:00, the last of November's partition): gpu-node-07, 8 H100 at 4.00 under a commitment
of 12 (c = 1, 2.10 each): ml-team/trainer 2 GPU-h = 4.20 (list 8.00, team research), ml-team/Zed 1 GPU-h =
2.10 (list 4.00; booked after trainer, sorts before it by code point), unallocated 4 GPU-h = 8.40 (list 16.00),
unobserved 1 GPU-h = 2.10 (list 4.00); unused commitment (12 - 8) GPU-h x 2.10 = 8.40.
a100-1: one 3g.40gb MIG slice (3/7 of an A100 at 2.50 = 1.0714285714285714/h) held by web/api, no team.
hour 2 (2026-12-01 00:00, December's partition): trainer 1 GPU-h = 2.10, unallocated 7 GPU-h = 14.70,
unused 8.40. Total effective: 4.20 + 2.10 + 8.40 + 2.10 + 8.40 + 1.07142857142857 + 2.10 + 14.70 + 8.40.
Every amount has at most 15 significant digits (a PostgreSQL ledger keeps money as NUMERIC cast from the
float, to 15 digits), so both ledgers hold exactly the same books.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import aiohttp
import pytest

from exporter.aggregator.service import Aggregator
from exporter.config import AggregatorSettings
from exporter.sim.runner import free_port
from tests.pg import PgServer, postgres_fixture
from tests.unit.aggregator.focus.focus_helpers import (
    CapacityRow,
    UnusedRow,
    UsageRow,
    assert_focus13_rules,
    assert_formats,
    dec,
    read_csv,
    write_ledger,
)

_FIXTURES = (postgres_fixture,)  # used by name
REPO = Path(__file__).resolve().parents[2]
H1 = int(datetime(2026, 11, 30, 23, tzinfo=UTC).timestamp())
H2 = H1 + 3600
WINDOW = ("--since", "2026-11-30T00:00:00Z", "--until", "2026-12-02T00:00:00Z")
A100 = "NVIDIA A100-SXM4-80GB"
PRICING = """currency: USD
default_price: 1.0
models: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.50}
commitments:
  - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: 12, hourly: 2.10,
     start: "2026-01-01T00:00:00Z", end: "2027-01-01T00:00:00Z"}
"""  # the books' prices: the price list refuses a booked price (or commitment) the pricing file does not have


def _books(target: str, password_file: Path | None) -> None:
    usage = [
        UsageRow(hour=H1, node="gpu-node-07", namespace="ml-team", pod="trainer", allocated_s=7200.0, used_s=5400.0,
                 idle_s=1800.0, cost=4.2, idle_cost=1.05, list_cost=8.0),
        UsageRow(hour=H1, node="gpu-node-07", namespace="ml-team", pod="Zed", allocated_s=3600.0, used_s=3600.0,
                 idle_s=0.0, cost=2.1, idle_cost=0.0, list_cost=4.0),
        UsageRow(hour=H1, node="a100-1", namespace="web", pod="api", allocated_s=3600.0 * 3 / 7, used_s=900.0,
                 idle_s=3600.0 * 3 / 7 - 900.0, cost=1.07142857142857, idle_cost=0.5, list_cost=1.07142857142857,
                 pool="", gpu_model=A100, mig_profile="3g.40gb", workload="api-7d9"),
        UsageRow(hour=H2, node="gpu-node-07", namespace="ml-team", pod="trainer", allocated_s=3600.0, used_s=3600.0,
                 idle_s=0.0, cost=2.1, idle_cost=0.0, list_cost=4.0),
    ]
    unallocated = [CapacityRow(hour=H1, node="gpu-node-07", seconds=14400.0, cost=8.4, list_cost=16.0),
                   CapacityRow(hour=H2, node="gpu-node-07", seconds=25200.0, cost=14.7, list_cost=28.0)]
    unobserved = [CapacityRow(hour=H1, node="gpu-node-07", seconds=3600.0, cost=2.1, list_cost=4.0)]
    unused = [UnusedRow(hour=H1, commitment="h100-1yr", seconds=14400.0, cost=8.4),
              UnusedRow(hour=H2, commitment="h100-1yr", seconds=14400.0, cost=8.4)]
    teams = {(H1, "ml-team"): "research", (H2, "ml-team"): "research"}
    write_ledger(target, usage, unallocated, unobserved, unused=unused, teams=teams, password_file=password_file)
    # another cluster in the same ledger: never part of prod-eu1's export
    write_ledger(target, [UsageRow(hour=H1, node="gpu-node-07", namespace="ml-team", pod="other", allocated_s=3600.0,
                                   used_s=0.0, idle_s=3600.0, cost=4.0, idle_cost=4.0)], [],
                 cluster="us-west", teams={(H1, "ml-team"): "elsewhere"}, password_file=password_file)


@pytest.fixture(scope="module")
def ledgers(postgres: PgServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """(SQLite path, PostgreSQL URL, its password file), the same books in both."""
    sqlite_path = str(tmp_path_factory.mktemp("focus-pg") / "ledger.db")
    url = postgres.database()
    for target, pw in ((sqlite_path, None), (url, postgres.password_file)):
        _books(target, pw)
    return sqlite_path, url, postgres.password_file


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "exporter", *args], cwd=REPO, capture_output=True, text=True,
                          check=False)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_sqlite_and_postgres_ledgers_export_the_same_bytes(ledgers: tuple[str, str, Path], version: str) -> None:
    sqlite_path, url, pw = ledgers
    from_sqlite = cli("export", "--ledger", sqlite_path, "--format", "focus-csv", *WINDOW, "--cluster", "prod-eu1",
                      "--focus-version", version).stdout
    from_pg = cli("export", "--ledger", url, "--ledger-password-file", str(pw), "--format", "focus-csv", *WINDOW,
                  "--cluster", "prod-eu1", "--focus-version", version).stdout
    assert from_pg == from_sqlite
    rows = read_csv(from_pg)
    # hour 1: api (node a100-1 first), Zed, trainer, unallocated, unobserved, unused; hour 2: 3 rows
    assert [(r["ChargePeriodStart"][:13], r["x_PodName"] or r["x_CapacityState"]) for r in rows] == [
        ("2026-11-30T23", "api"), ("2026-11-30T23", "Zed"), ("2026-11-30T23", "trainer"),
        ("2026-11-30T23", "Unallocated"), ("2026-11-30T23", "Unobserved"), ("2026-11-30T23", "UnusedCommitment"),
        ("2026-12-01T00", "trainer"), ("2026-12-01T00", "Unallocated"), ("2026-12-01T00", "UnusedCommitment")]
    assert {r["SubAccountId"] for r in rows} == {"prod-eu1"} and "other" not in {r.get("x_PodName") for r in rows}
    total = sum((dec(r["EffectiveCost"]) for r in rows), Decimal(0))
    # 4.2 + 2.1 + 8.4 + 2.1 + 8.4 + 1.07142857142857 + 2.1 + 14.7 + 8.4 = 51.47142857142857, written to 9 digits
    # half-even (the 10th digit is 4: down): the slice's 1.07142857142857 is 1.071428571, and the rest are exact
    assert total == sum(Decimal(x) for x in ("4.2", "2.1", "8.4", "2.1", "8.4", "1.071428571", "2.1", "14.7",
                                             "8.4")) == Decimal("51.471428571")
    if version == "1.3":
        teams = {(r["x_PodName"], r["ChargePeriodStart"][:13]): r["x_Team"] for r in rows if r["x_PodName"]}
        assert teams == {("trainer", "2026-11-30T23"): "research", ("api", "2026-11-30T23"): "",
                         ("Zed", "2026-11-30T23"): "research",
                         ("trainer", "2026-12-01T00"): "research"}
        assert_formats(rows)
        assert_focus13_rules(rows)


def test_price_list_of_a_postgres_ledger(ledgers: tuple[str, str, Path], tmp_path: Path) -> None:
    sqlite_path, url, pw = ledgers
    (tmp_path / "pricing.yaml").write_text(PRICING)
    base = ("pricing", "--pricing-file", str(tmp_path / "pricing.yaml"), "--format", "focus-price-list")
    from_pg = cli(*base, "--ledger", url, "--ledger-password-file", str(pw)).stdout
    assert from_pg == cli(*base, "--ledger", sqlite_path).stdout
    ids = {r["SkuPriceId"] for r in read_csv(from_pg)}
    assert "gpu-commitment-h100-1yr-usd-0.0" in ids and "gpu-nvidia-h100-80gb-hbm3-pool-h100-pool-usd-4.0" in ids


def test_unreachable_postgres_is_one_line_and_exit_2(tmp_path: Path) -> None:
    url = f"postgresql://postgres:hunter2@127.0.0.1:{free_port()}/ledger"
    done = cli("export", "--ledger", url, "--format", "focus-csv", *WINDOW, "--output", str(tmp_path / "o.csv"),
               ok=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "127.0.0.1" in done.stderr and "hunter2" not in done.stderr
    assert not (tmp_path / "o.csv").exists()


async def test_http_on_a_postgres_ledger_streams_the_cli_bytes(ledgers: tuple[str, str, Path],
                                                                tmp_path: Path) -> None:
    _sqlite_path, url, pw = ledgers
    expected = cli("export", "--ledger", url, "--ledger-password-file", str(pw), "--format", "focus-csv", *WINDOW,
                   "--cluster", "prod-eu1").stdout
    listen = f"127.0.0.1:{free_port()}"
    agg = Aggregator(AggregatorSettings(listen=listen, ledger=url, ledger_password_file=pw, cluster="prod-eu1",
                                        agents=[]))
    await agg.start()
    try:
        async with aiohttp.ClientSession() as s:
            params = {"since": WINDOW[1], "until": WINDOW[3], "format": "csv"}  # cluster: the aggregator's own
            async with s.get(f"http://{listen}/api/v1/focus", params=params) as r:
                assert r.status == 200, await r.text()
                assert r.headers.get("Transfer-Encoding") == "chunked"
                body = await r.text()
    finally:
        await agg.close()
    assert body == expected
