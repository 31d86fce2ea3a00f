"""The backend seam: passwords never logged, clusters kept apart in one database, reports by several keys,
month partitions and NUMERIC money on PostgreSQL, and ``report``/``aggregator`` on a PostgreSQL URL."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from exporter.aggregator.ledger.store import Ledger, TickWrite, redact
from exporter.cli import main
from exporter.model.books import (
    CapacityAmounts,
    CapacityKey,
    NamespaceKey,
    NamespaceTotals,
    UsageAmounts,
    UsageKey,
)
from exporter.model.exact import exact
from tests.pg import PASSWORD, LedgerTarget, PgServer, ledger_target_fixture, postgres_fixture

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name
NOV = 1_793_491_200  # 2026-11-01T00:00:00Z
DEC = 1_796_083_200  # 2026-12-01T00:00:00Z


def _usage(hour: int, ns: str, seconds: float, cost: float) -> TickWrite:
    """One holder's booked hour: the floats written here are read by their decimal text, as booking reads them."""
    w = TickWrite()
    seconds_d, cost_d = Decimal(repr(seconds)), Decimal(repr(cost))
    w.usage[UsageKey(hour, ns, "p", "wl", "n1", "pool", "M", "", "", "USD")] = UsageAmounts(
        allocated_s=seconds_d, used_s=seconds_d / 2, idle_s=seconds_d / 2, cost=cost_d, idle_cost=cost_d / 2)
    w.totals[NamespaceKey(ns, "USD")] = NamespaceTotals(allocated_s=seconds_d, used_s=seconds_d / 2, cost=cost_d)
    return w


def test_redact_hides_passwords_in_authority_and_query() -> None:
    url = "postgresql://ledger:s3cret@db.example:5432/books?sslmode=require&password=other"
    out = redact(url)
    assert "s3cret" not in out and "other" not in out
    assert out == "postgresql://ledger:***@db.example:5432/books?sslmode=require&password=***"
    assert redact("postgresql://ledger@db:5432/books?passfile=/run/pw") == "postgresql://ledger@db:5432/books?passfile=/run/pw"


def test_ledger_describes_itself_without_the_password() -> None:
    """What the aggregator logs at start (``ledger=...``) is the redacted URL."""
    ledger = Ledger("postgresql://ledger:s3cret@127.0.0.1:1/books", cluster="c1")
    assert ledger.path == "postgresql://ledger:***@127.0.0.1:1/books"


async def test_clusters_share_one_ledger_and_stay_apart(ledger_target: LedgerTarget) -> None:
    """Two clusters write the same namespace into one ledger: each reloads only its own totals; the
    report by cluster,namespace keeps them apart and --cluster picks one.
    By hand: a: 3600 s = 1 GPU-h, cost 2.5; b: 7200 s = 2 GPU-h, cost 4.0; all: 3 GPU-h, 6.5."""
    a = Ledger(ledger_target.target, cluster="a", password_file=ledger_target.password_file)
    b = Ledger(ledger_target.target, cluster="b", password_file=ledger_target.password_file)
    await a.open()
    await b.open()
    await a.commit(_usage(NOV, "team", 3600.0, 2.5))
    await b.commit(_usage(NOV, "team", 7200.0, 4.0))
    assert (await a.load_state()).totals[NamespaceKey("team", "USD")].allocated_s == 3600.0
    assert (await b.load_state()).totals[NamespaceKey("team", "USD")].allocated_s == 7200.0
    rows = await a.run_report("cluster,namespace", since=None, until=None, cluster=None)
    got = {(r["cluster"], r["namespace"]): (r["allocated_gpu_hours"], r["cost"]) for r in rows}
    assert got == {("a", "team"): (1.0, 2.5), ("b", "team"): (2.0, 4.0)}
    by_cluster = {r["cluster"]: r["cost"] for r in await a.run_report("cluster", since=None, until=None, cluster=None)}
    assert by_cluster == {"a": 2.5, "b": 4.0}
    own = await b.run_report("namespace", since=None, until=None)  # default: this ledger's cluster only
    assert [(r["namespace"], r["allocated_gpu_hours"]) for r in own] == [("team", 2.0)]
    total = await a.run_report("namespace", since=None, until=None, cluster=None)
    assert [(r["namespace"], r["allocated_gpu_hours"], r["cost"]) for r in total] == [("team", 3.0, 6.5)]
    await a.close()
    await b.close()


async def test_capacity_rows_keep_the_cluster_when_grouping_by_cluster_and_namespace(
        ledger_target: LedgerTarget) -> None:
    """Unallocated capacity has no namespace: by cluster,namespace it is one ``__unallocated__`` row per
    cluster. By hand: 1800 s = 0.5 GPU-h at cost 0.75, all idle."""
    ledger = Ledger(ledger_target.target, cluster="a", password_file=ledger_target.password_file)
    await ledger.open()
    w = _usage(NOV, "team", 3600.0, 1.0)
    w.unallocated[CapacityKey(NOV, "n1", "pool", "M", "USD")] = CapacityAmounts(seconds=exact(1800.0), cost=exact(0.75))
    await ledger.commit(w)
    rows = await ledger.run_report("cluster,namespace", since=None, until=None, cluster=None)
    cap = [r for r in rows if r["namespace"] == "__unallocated__"]
    assert [(r["cluster"], r["idle_gpu_hours"], r["cost"], r["idle_cost"]) for r in cap] == [("a", 0.5, 0.75, 0.75)]
    await ledger.close()


async def test_money_is_numeric_on_postgres(postgres: PgServer) -> None:
    """Three ticks of 0.1 add up to exactly 0.3 in the database (float would give 0.30000000000000004),
    NUMERIC(38,9), handed back as that Decimal."""
    url = postgres.database()
    ledger = Ledger(url, cluster="a", password_file=postgres.password_file)
    await ledger.open()
    for _ in range(3):
        await ledger.commit(_usage(NOV, "team", 1.0, 0.1))
    with psycopg.connect(url, password=PASSWORD) as conn:
        (text,) = conn.execute("SELECT cost::text FROM usage").fetchone() or ("",)
        (kind,) = conn.execute("SELECT data_type FROM information_schema.columns "
                               "WHERE table_name = 'totals' AND column_name = 'cost'").fetchone() or ("",)
    assert (text, kind) == ("0.300000000", "numeric")
    assert await ledger.query("SELECT cost FROM usage") == [(Decimal("0.300000000"),)]
    await ledger.close()


async def test_usage_is_partitioned_by_month_and_retention_drops_partitions(postgres: PgServer) -> None:
    """Rows of November and December land in their month's partition (and the month after each is made
    ahead); compacting before December 1st drops November's partition whole: 2 rows."""
    url = postgres.database()
    ledger = Ledger(url, cluster="a", password_file=postgres.password_file)
    await ledger.open()
    await ledger.commit(_usage(NOV, "x", 1.0, 0.1))
    await ledger.commit(_usage(NOV + 3600, "y", 1.0, 0.1))
    await ledger.commit(_usage(DEC, "z", 1.0, 0.1))

    def partitions() -> list[str]:
        with psycopg.connect(url, password=PASSWORD) as conn:
            return [r[0] for r in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'usage' ORDER BY 1")]

    assert partitions() == ["usage_p202611", "usage_p202612", "usage_p202701"]
    assert await ledger.query("SELECT COUNT(*) FROM usage_p202611") == [(2,)]
    assert await ledger.compact(before_hour=DEC) == 2
    assert partitions() == ["usage_p202612", "usage_p202701"]
    assert await ledger.query("SELECT namespace FROM usage") == [("z",)]
    await ledger.close()


async def test_report_command_reads_a_postgres_ledger(postgres: PgServer, capsys: pytest.CaptureFixture[str]) -> None:
    """``report --ledger postgresql://…`` with a password file, several keys and one cluster."""
    url = postgres.database()
    for cluster, seconds in (("a", 3600.0), ("b", 1800.0)):
        ledger = Ledger(url, cluster=cluster, password_file=postgres.password_file)
        await ledger.open()
        await ledger.commit(_usage(NOV, "team", seconds, 1.0))
        await ledger.close()
    args = ["report", "--ledger", url, "--ledger-password-file", str(postgres.password_file), "--format", "json"]
    assert main([*args, "--by", "cluster,namespace"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["cluster"], r["namespace"], r["allocated_gpu_hours"]) for r in rows} == {
        ("a", "team", 1.0), ("b", "team", 0.5)}
    assert main([*args, "--cluster", "b"]) == 0
    assert [(r["namespace"], r["allocated_gpu_hours"]) for r in json.loads(capsys.readouterr().out)] == [("team", 0.5)]


def _pgpass(tmp_path: Path, port: int, password: str, mode: int) -> Path:
    """A libpq password file (host:port:database:user:password) with file mode ``mode``."""
    path = tmp_path / "pgpass"
    path.write_text(f"127.0.0.1:{port}:*:postgres:{password}\n")
    path.chmod(mode)
    return path


async def test_a_libpq_passfile_in_the_url_instead_of_a_password_file(postgres: PgServer, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``?passfile=`` (a pgpass file, 0600) and no password file: the aggregator's ledger and ``report``
    both connect; the URL they describe themselves by names the file, never the password in it.
    By hand: 1800 s = 0.5 GPU-h."""
    url = f"{postgres.database()}?passfile={_pgpass(tmp_path, postgres.port, PASSWORD, 0o600)}"
    ledger = Ledger(url, cluster="a")
    await ledger.open()
    await ledger.commit(_usage(NOV, "team", 1800.0, 1.0))
    assert ledger.path == url and PASSWORD not in ledger.path
    await ledger.close()
    assert main(["report", "--ledger", url, "--by", "cluster,namespace", "--cluster", "a", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert [(r["cluster"], r["namespace"], r["allocated_gpu_hours"]) for r in json.loads(out)] == [("a", "team", 0.5)]
    assert PASSWORD not in out + err


def test_a_passfile_others_can_read_is_ignored_by_libpq(postgres: PgServer, tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    """libpq skips a pgpass file with group or world access (and warns on stderr itself): no password is
    sent, and the error is one line naming the ledger, exit 2."""
    url = f"{postgres.database()}?passfile={_pgpass(tmp_path, postgres.port, PASSWORD, 0o644)}"
    assert main(["report", "--ledger", url]) == 2
    err = capfd.readouterr().err
    assert "has group or world access" in err  # libpq's own warning
    last = err.splitlines()[-1]
    assert last.startswith(f"gpu-cost-exporter: error: {url}: ") and "no password supplied" in last
    assert PASSWORD not in err


def test_report_with_a_wrong_password_is_one_line_without_it(postgres: PgServer, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    wrong = tmp_path / "pw"
    wrong.write_text("nope-not-it\n")
    url = postgres.url().replace("postgres@", "postgres:inline-secret@")
    assert main(["report", "--ledger", url, "--ledger-password-file", str(wrong)]) == 2
    err = capsys.readouterr().err
    assert "inline-secret" not in err and "postgres:***@" in err and "password authentication failed" in err


def test_aggregator_on_postgres_needs_a_cluster_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["aggregator", "--ledger", "postgresql://u@127.0.0.1:1/db"]) == 2
    assert "setting cluster (GPUCOST_CLUSTER): required with a PostgreSQL ledger" in capsys.readouterr().err
