"""Schema 3 -> 4 on both backends (PostgreSQL ledgers begin at schema 3): a ledger booked before version-2
pricing gains list prices equal to what it booked (nothing was discounted then), each namespace's energy
from its kept hourly rows, and empty commitment and billing tables."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.ledger.schema import TABLES_V3
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger
from exporter.model.books import CapacityTotalKey, NamespaceKey
from tests.ledger_versions import back_to, usage_as_of
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

HOUR = 1_764_547_200  # 2025-12-01T00:00:00Z


def _as_schema_3(t: LedgerTarget) -> None:
    """A fresh ledger taken back to schema 3, with what a schema-3 build booked: ns held 1 GPU-h for 4.00
    (idle half of it, 2.00) drawing 500 J; 2 GPU-h nobody held for 8.00; 60 s nobody observed for 0.50."""
    stmts = usage_as_of(TABLES_V3, backend=t.backend, hour=HOUR)
    stmts += [*back_to(3, backend=t.backend, usage=False),
              f"INSERT INTO usage VALUES ('default', {HOUR}, 'ns', 'p', 'wl', 'n1', 'pool', 'M', '', '', 'USD', "
              "3600, 1800, 0, 1800, 4.0, 2.0, 500.0)",
              f"INSERT INTO unallocated VALUES ('default', {HOUR}, 'n1', 'pool', 'M', 'USD', 7200, 8.0)",
              f"INSERT INTO unobserved VALUES ('default', {HOUR}, 'n1', 'pool', 'M', 'USD', 60, 0.5)",
              "INSERT INTO totals VALUES ('default', 'ns', 'USD', 3600, 1800, 0, 4.0, 2.0)",
              "INSERT INTO unallocated_totals VALUES ('default', 'n1', 'pool', 'M', 'USD', 7200, 8.0)",
              "INSERT INTO unobserved_totals VALUES ('default', 'n1', 'pool', 'M', 'USD', 60, 0.5)"]
    raw_execute(t, *stmts)


async def test_schema_3_ledger_gains_list_cost_equal_to_cost(ledger_target: LedgerTarget) -> None:
    """After the migration every booked row's list cost is its cost (4.00, 8.00, 0.50), the namespace's
    energy total is its usage rows' 500 J, and the report shows list = effective: saved 0."""
    fresh = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    fresh.open_sync()
    fresh.backend.close()
    _as_schema_3(ledger_target)
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    try:
        assert await ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        rows = {table: [tuple(float(v) for v in r) for r in await ledger.query(f"SELECT cost, list_cost FROM {table}")]
                for table in ("usage", "unallocated", "unobserved", "totals", "unallocated_totals",
                              "unobserved_totals")}
        assert await ledger.query("SELECT claim FROM usage") == [("",)]
        assert await ledger.query("SELECT COUNT(*) FROM unused_commitment") == [(0,)]
        state = await ledger.load_state()
        report = {r["namespace"]: r for r in await ledger.run_report("namespace", since=None, until=None)}
    finally:
        await ledger.close()
    assert rows == {"usage": [(4.0, 4.0)], "unallocated": [(8.0, 8.0)], "unobserved": [(0.5, 0.5)],
                    "totals": [(4.0, 4.0)], "unallocated_totals": [(8.0, 8.0)], "unobserved_totals": [(0.5, 0.5)]}
    totals = state.totals[NamespaceKey("ns", "USD")]
    assert (totals.cost, totals.list_cost, totals.energy_j) == (Decimal(4), Decimal(4), Decimal(500))
    assert state.unallocated_totals[CapacityTotalKey("n1", "pool", "M", "USD")].list_cost == 8.0
    assert state.unobserved_totals[CapacityTotalKey("n1", "pool", "M", "USD")].list_cost == 0.5
    assert state.commitment_marks == {} and state.node_billing == {} and state.unused_commitment_totals == {}
    assert report["ns"]["cost"] == report["ns"]["list_cost"] == 4.0
