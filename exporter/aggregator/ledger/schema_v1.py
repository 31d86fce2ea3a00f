"""The ledger's first two schemas, as the SQLite scripts that made them: kept verbatim so a ledger from then
still migrates (PostgreSQL ledgers begin at schema 3)."""

from __future__ import annotations

SQLITE_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE usage (
        hour INTEGER NOT NULL, namespace TEXT NOT NULL, pod TEXT NOT NULL, workload TEXT NOT NULL,
        node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL, mig_profile TEXT NOT NULL,
        priority_class TEXT NOT NULL, currency TEXT NOT NULL,
        allocated_s REAL NOT NULL, used_s REAL NOT NULL, unmeasured_s REAL NOT NULL, idle_s REAL NOT NULL,
        cost REAL NOT NULL, idle_cost REAL NOT NULL, energy_j REAL NOT NULL,
        PRIMARY KEY (hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, priority_class, currency)
    ) WITHOUT ROWID;
    CREATE TABLE unallocated (
        hour INTEGER NOT NULL, node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL,
        currency TEXT NOT NULL, seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (hour, node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE hwm (
        node TEXT NOT NULL, key TEXT NOT NULL, allocated_s REAL NOT NULL, used_s REAL NOT NULL,
        unmeasured_s REAL NOT NULL, energy_j REAL NOT NULL, PRIMARY KEY (node, key)
    ) WITHOUT ROWID;
    CREATE TABLE agents (node TEXT PRIMARY KEY, epoch TEXT NOT NULL, booked_ts REAL NOT NULL, seq INTEGER NOT NULL);
    CREATE TABLE totals (
        namespace TEXT NOT NULL, currency TEXT NOT NULL, allocated_s REAL NOT NULL, used_s REAL NOT NULL,
        unmeasured_s REAL NOT NULL, cost REAL NOT NULL, idle_cost REAL NOT NULL,
        PRIMARY KEY (namespace, currency)
    ) WITHOUT ROWID;
    CREATE TABLE unallocated_totals (
        node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL, currency TEXT NOT NULL,
        seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE quota_events (uid TEXT PRIMARY KEY, namespace TEXT NOT NULL, count INTEGER NOT NULL);
    CREATE TABLE breakdown_totals (
        namespace TEXT NOT NULL, pool TEXT NOT NULL, priority_class TEXT NOT NULL, currency TEXT NOT NULL,
        allocated_s REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (namespace, pool, priority_class, currency)
    ) WITHOUT ROWID;
    CREATE INDEX usage_namespace ON usage (namespace, hour);
    """,
    2: """
    CREATE TABLE unobserved (
        hour INTEGER NOT NULL, node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL,
        currency TEXT NOT NULL, seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (hour, node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE unobserved_totals (
        node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL, currency TEXT NOT NULL,
        seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE agent_urls (node TEXT PRIMARY KEY, url TEXT NOT NULL);
    CREATE TABLE quota_rejection_totals (namespace TEXT PRIMARY KEY, count INTEGER NOT NULL);
    ALTER TABLE quota_events ADD COLUMN seen_at REAL NOT NULL DEFAULT 0;
    ALTER TABLE agents ADD COLUMN since REAL;
    UPDATE quota_events SET seen_at = CAST(strftime('%s', 'now') AS REAL)
    """,
}
