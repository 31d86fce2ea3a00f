"""Schema 15 on both backends: the scheduler queue (scheduler, queue, cluster_queue) joins the usage key. A ledger
the previous build wrote (schema 14, no queue) is migrated on open: its rows keep their amounts with queue "", and
rows that differ only by queue stay apart, so ``--by queue`` reports each queue."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.ledger.schema import TABLES_V14
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger
from exporter.model.books import UsageKey
from tests.ledger_versions import back_to, idle_tick, usage_as_of
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

HOUR = 1_764_547_200  # 2025-12-01T00:00:00Z
KEY = UsageKey(HOUR, "team-a", "p", "wl", "n1", "pool", "M", "", "", "USD")
TRAIN = KEY._replace(scheduler="kueue", queue="team-a/train", cluster_queue="gpu")


def _ledger(t: LedgerTarget) -> Ledger:
    return Ledger(t.target, password_file=t.password_file)


def _as_schema_14(t: LedgerTarget) -> None:
    """Put back the usage table as schema 14 made it (no queue columns) with one row: 1 GPU-h (3600 s, 3600e9
    nano-units on SQLite) at 4.00, through sharing none."""
    stmts = usage_as_of(TABLES_V14, backend=t.backend, hour=HOUR)
    nano = 10**9 if t.backend == "sqlite" else 1
    stmts += ["INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
              "priority_class, currency, claim, sharing, allocated_s, used_s, unmeasured_s, idle_s, cost, idle_cost, "
              f"energy_j, list_cost) VALUES ('default', {HOUR}, 'team-a', 'p', 'wl', 'n1', 'pool', 'M', '', '', "
              f"'USD', '', 'none', {3600 * nano}, 0, 0, {3600 * nano}, {4 * nano}, {4 * nano}, 0, {4 * nano})",
              *back_to(14, backend=t.backend, usage=False)]
    raw_execute(t, *stmts)


async def test_schema_14_ledger_gains_the_queue_key(ledger_target: LedgerTarget) -> None:
    """After the migration: the old row has queue "" with its 1 GPU-h and 4.00; 1800 s of the same holder booked
    through Kueue's team-a/train is a row of its own (0.5 GPU-h, 0.5 x 4.00 = 2.00), reported under its
    scheduler, queue and ClusterQueue."""
    fresh = _ledger(ledger_target)
    fresh.open_sync()
    fresh.backend.close()
    _as_schema_14(ledger_target)
    ledger = _ledger(ledger_target)
    await ledger.open()
    try:
        assert await ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert SCHEMA_VERSION == 15
        assert await ledger.query("SELECT scheduler, queue, cluster_queue FROM usage") == [("", "", "")]
        await ledger.commit(idle_tick(TRAIN._replace(sharing="none"), seconds=1800.0, price=4.0))
        assert await ledger.query("SELECT COUNT(*) FROM usage") == [(2,)]
        rows = {r["queue"]: r for r in await ledger.run_report("queue", since=None, until=None)}
    finally:
        await ledger.close()
    assert set(rows) == {"", "team-a/train"}
    assert rows[""]["allocated_gpu_hours"] == 1
    assert rows[""]["cost"] == 4
    train = rows["team-a/train"]
    assert (train["scheduler"], train["cluster_queue"]) == ("kueue", "gpu")
    assert train["allocated_gpu_hours"] == 1800 / 3600
    assert train["cost"] == 1800 / 3600 * 4


async def test_fresh_ledger_keys_usage_by_queue(ledger_target: LedgerTarget) -> None:
    """One pod's time in one hour under two queues stays in two rows: team-a/train 1800 s = 0.5 GPU-h (2.00),
    Volcano research 600 s = 1/6 GPU-h (600 / 3600 x 4.00 = 0.666666667);
    ``--by cluster_queue`` puts train under gpu."""
    ledger = _ledger(ledger_target)
    await ledger.open()
    try:
        await ledger.commit(idle_tick(TRAIN, seconds=1800.0, price=4.0))
        await ledger.commit(idle_tick(KEY._replace(scheduler="volcano", queue="research"), seconds=600.0, price=4.0))
        rows = {r["queue"]: r for r in await ledger.run_report("queue", since=None, until=None)}
        by_cq = {r["cluster_queue"]: r for r in await ledger.run_report("cluster_queue", since=None, until=None)}
    finally:
        await ledger.close()
    assert rows["team-a/train"]["allocated_gpu_hours"] == 1800 / 3600
    assert rows["research"]["scheduler"] == "volcano"
    assert rows["research"]["cost"] == Decimal("0.666666667")  # 600 / 3600 x 4.00, to 9 digits half-even
    assert by_cq["gpu"]["cost"] == 2
