"""``gpu-cost-exporter ledger verify`` on real ledgers (SQLite and PostgreSQL) booked by the real books: a
consistent ledger gives exit 0 and no line; each way of breaking one behind the ledger's back gives its own
finding and exit 1; bad input exit 2. The aggregator refuses to start on a ledger whose marks fail, naming it.

The books: two nodes of 2 GPUs, each with one pod holding one GPU the whole time, snapshots every 20 minutes
from 00:40 to 02:20 (started 00:40): per node and hour, allocated + unallocated = 2 GPUs x the hour's seconds
booked (00:40-01:00: 2 x 1200 = 2400; 01:00-02:00: 7200; 02:00-02:20: 2400)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import Ledger, LedgerError, open_reader
from exporter.aggregator.ledger.verify import verify
from exporter.cli import main
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot
from tests.pg import PASSWORD, LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute, start_server

_FIXTURES = (postgres_fixture, ledger_target_fixture)  # used by name
H100 = "NVIDIA H100 80GB HBM3"
T0 = 1_800_000_000.0 - 1_200  # 00:40, 20 minutes before an hour boundary
STEP = 1_200.0


def _snapshots(node: str) -> list[UsageSnapshot]:
    out = []
    for seq in range(1, 6):
        wall = seq * STEP  # one GPU held the whole time, the other free: 1 x wall each
        out.append(UsageSnapshot(
            node=node, epoch="e1", timestamp=T0 + wall, seq=seq, started_at=T0,
            holders=[HolderCounters(namespace="ml", pod=f"train-{node}", container="c", device_id="GPU-0",
                                    gpu_uuid=f"GPU-{node}-0", gpu_model=H100, fraction=1.0, allocated_s=wall,
                                    used_s=wall / 2, unmeasured_s=0.0)],
            unallocated=[UnallocatedCounter(gpu_model=H100, seconds=wall)],
            capacity=[GpuCapacity(gpu_uuid=f"GPU-{node}-{i}", gpu_model=H100) for i in range(2)]))
    return out


async def _book(t: LedgerTarget) -> None:
    ledger = Ledger(t.target, password_file=t.password_file)
    await ledger.open()
    try:
        books, kube = Books(await ledger.load_state()), KubeState()
        pricing = parse_pricing(f'currency: USD\ndefault_price: 1\nmodels: {{"{H100}": 2.5}}\n', "p.yaml")
        fleet = {node: _snapshots(node) for node in ("n0", "n1")}
        for node in fleet:
            kube.nodes[node] = {}
        for i in range(5):
            p = books.prepare([fleet[n][i] for n in fleet], kube, pricing=pricing)
            assert p.rejected == {}
            await ledger.commit(p.write)
            books.apply(p)
    finally:
        await ledger.close()


def _verify_cli(t: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    args = ["ledger", "verify", "--ledger", t.target]
    if t.password_file is not None:
        args += ["--ledger-password-file", str(t.password_file)]
    code = main(args)
    return code, capsys.readouterr().out.splitlines()


def _units(t: LedgerTarget, seconds: int) -> int:
    """An amount as the backend stores it: SQLite integer nano-units, PostgreSQL NUMERIC."""
    return seconds * 10**9 if t.backend == "sqlite" else seconds


@pytest.fixture(name="booked")
def _booked(ledger_target: LedgerTarget) -> LedgerTarget:
    asyncio.run(_book(ledger_target))
    return ledger_target


def test_consistent_books_verify_clean(booked: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> None:
    assert _verify_cli(booked, capsys) == (0, [])
    # the node-hours it checked hold what the docstring works out by hand
    with open_reader(booked.target, password_file=booked.password_file) as query:
        rows = query("SELECT hour, SUM(allocated_s) AS allocated_s FROM usage WHERE node = 'n0' GROUP BY hour "
                     "ORDER BY hour", ())
        free = query("SELECT hour, SUM(seconds) AS seconds FROM unallocated WHERE node = 'n0' GROUP BY hour "
                     "ORDER BY hour", ())
    assert [(h, float(a) + float(f)) for (h, a), (_h, f) in zip(rows, free, strict=True)] == [
        (1_800_000_000 - 3600, 2400.0), (1_800_000_000, 7200.0), (1_800_000_000 + 3600, 2400.0)]


def test_a_total_off_by_one_unit_is_found(booked: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> None:
    raw_execute(booked, "UPDATE totals SET cost = cost + 1 WHERE namespace = 'ml'")
    code, lines = _verify_cli(booked, capsys)
    assert code == 1 and len(lines) == 1 and lines[0].startswith("total: default totals ml/USD cost: total "), lines


def test_a_node_hour_that_does_not_add_up_is_found(booked: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> None:
    five = _units(booked, 5)  # 5 GPU-seconds more in one hour row, and in its totals: only the hour is wrong
    raw_execute(booked,
                f"UPDATE usage SET allocated_s = allocated_s + {five} WHERE node = 'n0' AND hour = 1800000000",
                f"UPDATE totals SET allocated_s = allocated_s + {five}",
                f"UPDATE breakdown_totals SET allocated_s = allocated_s + {five} WHERE namespace = 'ml'")
    code, lines = _verify_cli(booked, capsys)
    assert code == 1 and lines == ["conservation: default node n0 hour 2027-01-15T08:00Z: allocated + unallocated + "
                                   "unobserved = 7205.000000 GPU-seconds, 2 GPUs x 3600.000000 s = 7200.000000"]


def test_an_hour_lost_whole_is_found(booked: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> None:
    raw_execute(booked, "DELETE FROM usage WHERE node = 'n1' AND hour = 1800000000",
                "DELETE FROM unallocated WHERE node = 'n1' AND hour = 1800000000")
    code, lines = _verify_cli(booked, capsys)
    assert code == 1
    assert ("conservation: default node n1 hour 2027-01-15T08:00Z: no rows, 7200.000000 GPU-seconds expected"
            in lines), lines
    assert any(line.startswith("total: default unallocated_totals n1/") for line in lines), lines


def test_marks_that_disagree_with_rows_are_found_and_refused_at_start(
        booked: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> None:
    raw_execute(booked, "DELETE FROM agents WHERE node = 'n1'")  # its counter marks stay: books without a start
    code, lines = _verify_cli(booked, capsys)
    assert code == 1 and lines == ["mark: default node n1: 2 counter marks but no books (agents row)"], lines
    ledger = Ledger(booked.target, password_file=booked.password_file)
    with pytest.raises(LedgerError, match=r"fails verification: mark: default node n1: 2 counter marks but no "
                                          r"books \(agents row\); see `gpu-cost-exporter ledger verify`"):
        ledger.open_sync()


def test_rows_after_the_last_booked_snapshot_are_found(booked: LedgerTarget,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    raw_execute(booked, "UPDATE agents SET booked_ts = booked_ts - 7200 WHERE node = 'n0'")
    code, lines = _verify_cli(booked, capsys)
    assert code == 1
    assert ("mark: default node n0: usage has rows in hour 2027-01-15T09:00Z, after its last booked snapshot "
            "(2027-01-15T07:00Z)") in lines, lines


def test_a_damaged_sqlite_file_is_an_integrity_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = LedgerTarget("sqlite", str(tmp_path / "l.db"))
    asyncio.run(_book(t))
    conn = sqlite3.connect(t.target)
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'usage_namespace'").fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with Path(t.target).open("r+b") as f:  # scribble over an index of the usage table
        f.seek((root - 1) * size + 8)
        f.write(b"\xff" * 64)
    code, lines = _verify_cli(t, capsys)
    assert code == 1 and lines and all(line.startswith("integrity: sqlite: ") for line in lines), lines


def test_postgres_indexes_are_checked_with_amcheck(ledger_target: LedgerTarget) -> None:
    if ledger_target.backend != "postgres":
        pytest.skip("amcheck is PostgreSQL's")
    asyncio.run(_book(ledger_target))
    raw_execute(ledger_target, "CREATE EXTENSION IF NOT EXISTS amcheck")
    with open_reader(ledger_target.target, password_file=ledger_target.password_file) as query:
        checked: list[str] = []

        def counting(sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
            if "bt_index_check" in sql:
                checked.append(str(params))
            return query(sql, params)

        assert verify(counting, postgres=True) == []
    assert any("'usage_p2027" in c for c in checked) and len(checked) > 10, checked  # usage's partition too


@pytest.mark.parametrize("target", ["missing.db", "."])
def test_bad_input_is_one_line_and_exit_2(target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / target
    code = main(["ledger", "verify", "--ledger", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(path) in err[0], err


def test_a_compacted_ledger_still_verifies(booked: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> None:
    async def compact() -> int:
        ledger = Ledger(booked.target, password_file=booked.password_file)
        await ledger.open()
        try:
            return await ledger.compact(1_800_000_000)  # the 07:00 hour goes; totals keep it
        finally:
            await ledger.close()

    assert asyncio.run(compact()) > 0
    assert _verify_cli(booked, capsys) == (0, [])


def test_the_aggregator_refuses_a_ledger_that_fails_naming_the_finding(
        booked: LedgerTarget, capsys: pytest.CaptureFixture[str]) -> None:
    if booked.backend != "sqlite":
        pytest.skip("the same check as Ledger.open_sync's above; the command line once is enough")
    raw_execute(booked, "UPDATE agents SET since = booked_ts + 60 WHERE node = 'n0'")
    assert main(["aggregator", "--ledger", booked.target, "--listen", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"gpu-cost-exporter: error: setting ledger (GPUCOST_LEDGER): "
                                               f"{booked.target}: fails verification: mark: default node n0: "
                                               "books start at "), err


def test_a_damaged_postgres_index_is_an_integrity_finding(capsys: pytest.CaptureFixture[str]) -> None:
    """A btree page of one of the ledger's indexes overwritten on disk while the server is down (a server of
    this test's own: the shared one stays whole): ``ledger verify`` names that index and what amcheck found,
    exit 1, and goes on to check the others."""
    import psycopg

    server = start_server()
    try:
        t = LedgerTarget("postgres", server.database(), server.password_file)
        asyncio.run(_book(t))
        raw_execute(t, "CREATE EXTENSION IF NOT EXISTS amcheck")
        with psycopg.connect(t.target, password=PASSWORD) as conn:
            found = conn.execute(
                "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname ~ '^usage_p[0-9]{6}$' AND c.relkind = 'i' "
                "AND pg_relation_size(c.oid) >= 2 * current_setting('block_size')::int ORDER BY 1 LIMIT 1").fetchone()
            size = conn.execute("SELECT current_setting('block_size')::int").fetchone()
        assert found is not None and size is not None
        (index, relpath), (block,) = found, size
        server.stop(mode="fast")
        with (server.data / relpath).open("r+b") as f:  # page 1: the first page of entries after the metapage
            f.seek(block + 24)
            f.write(b"\xa5" * 512)
        server.start()
        code = main(["ledger", "verify", "--ledger", t.target, "--ledger-password-file", str(t.password_file)])
        out, err = capsys.readouterr()
        assert code == 1, err
        assert [line.split(": ")[:2] for line in out.splitlines()] == [["integrity", f"index {index}"]], out
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
