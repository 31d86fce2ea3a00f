"""Many-row upserts through ``COPY`` on PostgreSQL, and the room left on the pages updated every tick (schema 11).

Against a real PostgreSQL server: the ledger's writes of many rows take the ``COPY`` path and land exactly the
decimals booked (the same as row by row); rows repeating a conflict key
and statements that are not upserts go row by row, summed as before; fresh, migrated and new-partition tables
carry the fill factor.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

import psycopg
import pytest

from exporter.aggregator.ledger.pg_bulk import copy_upsert
from exporter.aggregator.ledger.postgres import PgTx
from exporter.aggregator.ledger.schema import SCHEMA_VERSION, UPDATE_FILLFACTOR, UPDATED_EVERY_TICK
from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.model.books import NamespaceKey, NamespaceTotals, UsageAmounts, UsageKey
from tests.ledger_versions import back_to
from tests.pg import PASSWORD, LedgerTarget, PgServer, ledger_target_fixture, postgres_fixture, raw_execute

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name
NOV = 1_793_491_200  # 2026-11-01T00:00:00Z
THIRD = Decimal("0.333333333")  # a third, booked: half-even to 9 digits
HALF_THIRD = Decimal("0.166666667")  # 0.1666666666|7 booked
UPSERT = "INSERT INTO t (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = t.v + excluded.v"


def _many(pods: int) -> TickWrite:
    """One hour of ``pods`` holders in one namespace, each costing a third."""
    w = TickWrite()
    for i in range(pods):
        w.usage[UsageKey(NOV, "team", f"p{i}", "wl", "n1", "pool", "M", "", "", "USD")] = UsageAmounts(
            allocated_s=Decimal(3600), used_s=Decimal(1200), idle_s=Decimal(2400), cost=THIRD, idle_cost=HALF_THIRD)
    w.totals[NamespaceKey("team", "USD")] = NamespaceTotals(allocated_s=Decimal(3600) * pods, cost=THIRD * pods)
    return w


async def test_many_rows_land_exactly_the_decimals_booked(postgres: PgServer) -> None:
    """Two commits of 300 rows costing a third (0.333333333) each: every row holds 0.666666666, idle
    0.166666667 x 2 = 0.333333334, and the total 0.333333333 x 600 = 199.999999800, all exact."""
    ledger = Ledger(postgres.database(), cluster="bulk", password_file=postgres.password_file)
    await ledger.open()
    for _ in range(2):
        await ledger.commit(_many(300))
    rows = await ledger.query("SELECT cost, idle_cost, allocated_s FROM usage WHERE cluster = 'bulk'")
    assert len(rows) == 300
    assert set(rows) == {(Decimal("0.666666666"), Decimal("0.333333334"), Decimal("7200.000000000"))}
    assert await ledger.query("SELECT cost FROM totals WHERE cluster = 'bulk'") == [(Decimal("199.999999800"),)]
    await ledger.close()


async def test_one_row_lands_exactly_too(postgres: PgServer) -> None:
    """A tick with one namespace writes one totals row: it takes the same path, and 0.333333333 reads back as it
    was booked: money never depends on how many rows a tick wrote."""
    ledger = Ledger(postgres.database(), cluster="one", password_file=postgres.password_file)
    await ledger.open()
    w = TickWrite()
    w.totals[NamespaceKey("team", "USD")] = NamespaceTotals(allocated_s=Decimal(3600), cost=THIRD)
    await ledger.commit(w)
    assert await ledger.query("SELECT cost FROM totals WHERE cluster = 'one'") == [(THIRD,)]
    await ledger.close()


def _nullable(postgres: PgServer) -> psycopg.Connection:
    conn = psycopg.connect(postgres.database(), password=PASSWORD)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v NUMERIC NOT NULL, peak DOUBLE PRECISION)")
    return conn


def test_the_staging_table_holds_one_upserts_rows_only_and_carries_nulls(postgres: PgServer) -> None:
    """One connection reuses its staging table: two upserts in one transaction, then one in the next, each add
    only their own rows (1 + 2 + 4 = 7, not 1 + (1 + 2) + …), and a NULL (an unmeasured framebuffer peak) lands
    as NULL."""
    sql = ("INSERT INTO t (k, v, peak) VALUES (?, ?, ?) ON CONFLICT (k) DO UPDATE SET v = t.v + excluded.v, "
           "peak = COALESCE(excluded.peak, t.peak)")
    with _nullable(postgres) as conn:
        conn.commit()
        with conn.cursor() as cur:
            for value in (1.0, 2.0):
                assert copy_upsert(cur, sql, rows=[("a", value, None), ("b", value, 5.0)])
        conn.commit()
        with conn.cursor() as cur:
            assert copy_upsert(cur, sql, rows=[("a", 4.0, None), ("b", 4.0, None)])
        conn.commit()
        rows = sorted(conn.execute("SELECT k, v::float8, peak FROM t").fetchall())
    assert rows == [("a", 7.0, None), ("b", 7.0, 5.0)]


async def test_a_role_without_temporary_tables_writes_row_by_row(postgres: PgServer) -> None:
    """A hardened database may revoke TEMPORARY: the ledger sees it at open and upserts row by row, booking the
    same rows (a third, as NUMERIC's 15 digits keep it), instead of failing every tick."""
    name = f"notemp_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.url(), password=PASSWORD, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'pw-{name}'")
        admin.execute(f"REVOKE TEMPORARY ON DATABASE {name} FROM PUBLIC")
    with psycopg.connect(postgres.url(name), password=PASSWORD, autocommit=True) as db:
        db.execute(f"GRANT CREATE, USAGE ON SCHEMA public TO {name}")
    url = f"postgresql://{name}@127.0.0.1:{postgres.port}/{name}"
    secret = postgres.root / f"{name}.pw"
    secret.write_text(f"pw-{name}\n")
    ledger = Ledger(url, cluster="nt", password_file=secret)
    await ledger.open()
    for _ in range(2):
        await ledger.commit(_many(3))
    assert await ledger.query("SELECT COUNT(*), SUM(allocated_s) FROM usage") == [(3, 21600.0)]
    assert await ledger.query("SELECT has_database_privilege(current_database(), 'TEMPORARY')") == [(False,)]
    await ledger.close()


def _scratch(postgres: PgServer) -> psycopg.Connection:
    conn = psycopg.connect(postgres.database(), password=PASSWORD)
    conn.execute("DROP TABLE IF EXISTS t")
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v NUMERIC NOT NULL)")
    return conn


def test_copy_path_adds_into_existing_rows(postgres: PgServer) -> None:
    """The one-statement form is the caller's upsert: a new key is inserted, an existing one added to."""
    with _scratch(postgres) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES ('a', 1)")
        assert copy_upsert(cur, UPSERT, rows=[("a", 2.5), ("b", 4.0)])
        assert sorted(cur.execute("SELECT k, v::float8 FROM t").fetchall()) == [("a", 3.5), ("b", 4.0)]


def test_rows_repeating_a_conflict_key_go_row_by_row(postgres: PgServer) -> None:
    """One statement may not update a row twice: ``copy_upsert`` declines (touching nothing) and the ledger's
    transaction runs them one by one, so 1 + 2 = 3."""
    with _scratch(postgres) as conn, conn.cursor() as cur:
        assert not copy_upsert(cur, UPSERT, rows=[("a", 1.0), ("a", 2.0)])
        assert cur.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
        PgTx(cur, bulk=True).executemany(UPSERT, [("a", 1.0), ("a", 2.0)])
        assert cur.execute("SELECT v FROM t").fetchall() == [(3,)]


@pytest.mark.parametrize("sql", [
    "DELETE FROM t WHERE k = ?",
    "INSERT INTO t (k, v) VALUES (?, ?)",  # no conflict target: not an upsert this path may take
    "INSERT INTO t (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = ?",  # a parameter after VALUES
])
def test_statements_that_are_not_plain_upserts_are_declined(postgres: PgServer, sql: str) -> None:
    with _scratch(postgres) as conn, conn.cursor() as cur:
        assert not copy_upsert(cur, sql, rows=[("a", 1.0), ("b", 2.0)])
        assert cur.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)


def _fillfactors(url: str) -> dict[str, list[str] | None]:
    with psycopg.connect(url, password=PASSWORD) as conn:
        return {name: opts for name, opts in conn.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace")}


async def test_pages_of_tables_updated_every_tick_keep_room_fresh_and_migrated(ledger_target: LedgerTarget) -> None:
    """A fresh ledger, a ledger set back to schema 10, and a usage partition made by a commit: on PostgreSQL the
    tables every tick updates carry ``fillfactor=70``; SQLite (no such setting) just moves to the current schema."""
    t = ledger_target
    ledger = Ledger(t.target, cluster="ff", password_file=t.password_file)
    await ledger.open()
    await ledger.close()
    want = [f"fillfactor={UPDATE_FILLFACTOR}"]
    resets = [f"ALTER TABLE {name} RESET (fillfactor)" for name in UPDATED_EVERY_TICK]
    if t.backend == "postgres":
        assert {n: o for n, o in _fillfactors(t.target).items() if n in UPDATED_EVERY_TICK} == dict.fromkeys(
            UPDATED_EVERY_TICK, want)
    raw_execute(t, *(resets if t.backend == "postgres" else []), *back_to(10, backend=t.backend))
    ledger = Ledger(t.target, cluster="ff", password_file=t.password_file)
    await ledger.open()
    await ledger.commit(_many(2))
    assert await ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    await ledger.close()
    assert SCHEMA_VERSION == 15
    if t.backend == "postgres":
        found = _fillfactors(t.target)
        assert {n: found[n] for n in UPDATED_EVERY_TICK} == dict.fromkeys(UPDATED_EVERY_TICK, want)
        assert found["usage_p202611"] == want
