"""The ledger's schema, written once for both backends: tables as column lists, DDL rendered per dialect.

Every table is keyed by ``cluster`` first, so many clusters' aggregators can write one database. Money
columns are ``money`` (REAL on SQLite, NUMERIC on PostgreSQL); GPU-seconds are ``real`` (REAL, DOUBLE
PRECISION). Schema 3 added the cluster column: older SQLite ledgers are rebuilt table by table and
their rows keep the cluster ``default``. Schema 4 added list prices beside effective costs, namespaces'
energy, commitments' unused part with its "booked until" marks, and the billing labels of nodes:
booked rows get ``list_cost = cost`` (nothing was discounted before version-2 pricing). Schema 5 added
the right-sizing evidence (utilisation seconds per fixed bucket and framebuffer peaks, per hour x device).
Schema 6 added each namespace's team (its team label) per hour booked, for chargeback by team after the fact.
Schema 7 added the DRA claim to the usage key (``claim``, ``<namespace>/<name>``, "" for device-plugin
holders): booked rows get "". The primary key changes, so SQLite rebuilds the table and PostgreSQL
swaps the constraint in place (its partitions follow). Schema 8 added the energy of capacity nobody held
(or observed) and, per node, the GPU-seconds whose energy DCGM did not measure; rows booked before it
measured no such energy (0). Schema 9 added each node's GPUs by model and held MIG instances (``fleet``),
so aggregators that share a cluster's nodes (shards) blend commitments over the whole cluster's fleet.
Schema 10 added how the GPU was shared to the usage key (``sharing``: ``none``, ``time-slicing``, ``mps``,
``hami``, ``dra``; "" when the agent did not say): booked rows get "", their key changing as in schema 7.
Schema 13 added the GPU-seconds whose busy time was split by fraction for want of measured per-pod use
(``split_s``) to the usage rows, the marks and the namespace totals: rows booked before it split nothing known
(0); the marks it finds take the agents' next split counters as a baseline (``SPLIT_UNKNOWN``). It also added
CO2e (grams, and the GPU-seconds it is known for) and the GPU-seconds whose energy was not measured to the
usage, capacity and namespace-total rows; rows booked before it read 0 (CO2e unknown).
Schema 14 made amounts exact (``EXACT_SCHEMA``): GPU-seconds and money are fixed-point with 9 fractional digits
(SQLite: INTEGER nano-units, each column checked to stay an integer, so an overflow fails the transaction
instead of turning into a float; PostgreSQL: NUMERIC(38,9)), energy with 3 (millijoules: nano-joules would
overflow SQLite's int64 within weeks on one node). Marks, timestamps and right-sizing evidence stay floats.
Schema 15 added the scheduler queue to the usage key (``scheduler``, ``queue``, ``cluster_queue``: whose queue
admitted the pod, that queue, Kueue's ClusterQueue behind it), so a queue's history outlives the queue: booked rows
get "" (no queue known), their key changing as in schema 7 (no index of its own: budgets read a window's rows in one
grouped scan, which an index on the queue made slower). It also
added ``budget_holds``: the queues budgets hold, so a restarted (or newly elected) aggregator releases only its own.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.aggregator.ledger.schema_exact import exact_amounts
from exporter.aggregator.ledger.schema_types import FIXED_WORDS as FIXED_WORDS
from exporter.aggregator.ledger.schema_types import POSTGRES as POSTGRES
from exporter.aggregator.ledger.schema_types import SQLITE as SQLITE
from exporter.aggregator.ledger.schema_types import Dialect as Dialect
from exporter.aggregator.ledger.schema_types import Table as Table
from exporter.aggregator.ledger.schema_types import _type
from exporter.aggregator.ledger.schema_types import create_table as create_table
from exporter.aggregator.ledger.schema_v1 import SQLITE_MIGRATIONS
from exporter.model.books import SPLIT_UNKNOWN

SCHEMA_VERSION = 15
EXACT_SCHEMA = 14  # the migration that makes amounts fixed-point (``exact_amounts``)
DEFAULT_CLUSTER = "default"


_USAGE_KEY = (("hour", "int"), ("namespace", "text"), ("pod", "text"), ("workload", "text"), ("node", "text"),
              ("pool", "text"), ("gpu_model", "text"), ("mig_profile", "text"), ("priority_class", "text"),
              ("currency", "text"))
_CAP_KEY = (("node", "text"), ("pool", "text"), ("gpu_model", "text"), ("currency", "text"))
_CAP_VALUES = (("seconds", "real"), ("cost", "money"))

TABLES_V3: tuple[Table, ...] = (  # as schema 3 made them
    Table("usage", _USAGE_KEY, (("allocated_s", "real"), ("used_s", "real"), ("unmeasured_s", "real"),
                                ("idle_s", "real"), ("cost", "money"), ("idle_cost", "money"), ("energy_j", "real"))),
    Table("unallocated", (("hour", "int"), *_CAP_KEY), _CAP_VALUES),
    Table("unobserved", (("hour", "int"), *_CAP_KEY), _CAP_VALUES),
    Table("hwm", (("node", "text"), ("key", "text")),
          (("allocated_s", "real"), ("used_s", "real"), ("unmeasured_s", "real"), ("energy_j", "real"))),
    Table("agents", (("node", "text"),),
          (("epoch", "text"), ("booked_ts", "real"), ("seq", "int"), ("since", "real?"))),
    Table("totals", (("namespace", "text"), ("currency", "text")),
          (("allocated_s", "real"), ("used_s", "real"), ("unmeasured_s", "real"), ("cost", "money"),
           ("idle_cost", "money"))),
    Table("unallocated_totals", _CAP_KEY, _CAP_VALUES),
    Table("unobserved_totals", _CAP_KEY, _CAP_VALUES),
    Table("quota_events", (("uid", "text"),), (("namespace", "text"), ("count", "int"), ("seen_at", "real"))),
    Table("quota_rejection_totals", (("namespace", "text"),), (("count", "int"),)),
    Table("breakdown_totals", (("namespace", "text"), ("pool", "text"), ("priority_class", "text"),
                               ("currency", "text")), (("allocated_s", "real"), ("cost", "money"))),
    Table("agent_urls", (("node", "text"),), (("url", "text"),)),
    Table("fence", (), (("term", "int"), ("holder", "text"))),
)
#: Schema 4: list prices beside effective costs, energy per namespace, commitments, nodes' billing labels.
_V4_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "usage": (("list_cost", "money"),), "unallocated": (("list_cost", "money"),),
    "unobserved": (("list_cost", "money"),), "totals": (("list_cost", "money"), ("energy_j", "real")),
    "unallocated_totals": (("list_cost", "money"),), "unobserved_totals": (("list_cost", "money"),),
}
_COMMITMENT_VALUES = (("seconds", "real"), ("cost", "money"), ("list_cost", "money"))
_V4_TABLES: tuple[Table, ...] = (
    Table("unused_commitment", (("hour", "int"), ("commitment", "text"), ("gpu_model", "text"), ("currency", "text")),
          _COMMITMENT_VALUES),
    Table("unused_commitment_totals", (("commitment", "text"), ("gpu_model", "text"), ("currency", "text")),
          _COMMITMENT_VALUES),
    Table("commitment_marks", (("commitment", "text"),), (("booked_until", "real"),)),
    Table("node_billing", (("node", "text"),), (("instance_type", "text"), ("capacity_type", "text"))),
)
#: Schema 5: right-sizing evidence. ``s_uNNN`` = seconds with utilisation below NNN % (and at or above the
#: previous bucket's bound); the bounds are ``recommend_evidence.BUCKET_UPPER_PERCENT``.
EVIDENCE_BUCKETS = (1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100)
_V5_TABLES: tuple[Table, ...] = (
    Table("evidence", (("hour", "int"), ("namespace", "text"), ("pod", "text"), ("workload", "text"),
                       ("node", "text"), ("gpu_model", "text"), ("mig_profile", "text"), ("device_kind", "text"),
                       ("device", "text")),
          (("fraction", "real"), *((f"s_u{b:03d}", "real") for b in EVIDENCE_BUCKETS), ("fb_peak_bytes", "real?"))),
)
#: Schema 6: the team label of each namespace as booking saw it, per hour it booked the namespace's time.
_V6_TABLES: tuple[Table, ...] = (
    Table("namespace_team", (("hour", "int"), ("namespace", "text")), (("team", "text"),)),
)
TABLES_V6: tuple[Table, ...] = (
    *(Table(t.name, t.key, t.values + _V4_COLUMNS.get(t.name, ())) for t in TABLES_V3), *_V4_TABLES, *_V5_TABLES,
    *_V6_TABLES)
#: Schema 7: the DRA claim, last in the usage key.
_V7_KEYS: dict[str, tuple[tuple[str, str], ...]] = {"usage": (("claim", "text"),)}
#: Schema 8: energy on the capacity rows (they share one amount type, so the commitment tables get it too,
#: always 0), and the GPU-seconds whose energy was not measured, per node.
_V8_CAPACITY = ("unallocated", "unobserved", "unallocated_totals", "unobserved_totals", "unused_commitment",
                "unused_commitment_totals")
_V8_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {name: (("energy_j", "real0"),) for name in _V8_CAPACITY}
_V8_TABLES: tuple[Table, ...] = (Table("unmeasured_energy_totals", (("node", "text"),), (("seconds", "real"),)),)
#: Schema 9: each node's GPUs as its latest booked snapshot showed them (JSON ``{model: gpus}``) and the MIG
#: instances held on it (JSON ``[[model, profile, fraction], ...]``).
_V9_TABLES: tuple[Table, ...] = (
    Table("fleet", (("node", "text"),), (("gpus_by_model", "text"), ("held_mig", "text"))),
)
TABLES_V9: tuple[Table, ...] = tuple(
    Table(t.name, t.key + _V7_KEYS.get(t.name, ()), t.values + _V8_COLUMNS.get(t.name, ())) for t in TABLES_V6
) + _V8_TABLES + _V9_TABLES
#: Schema 10: how the GPU was shared, last in the usage key (after ``claim``).
_V10_KEYS: dict[str, tuple[tuple[str, str], ...]] = {"usage": (("sharing", "text"),)}
#: Schema 12: the devices each node advertised per hour (MIG instances by profile, whole GPUs, replicas).
_V12_TABLES: tuple[Table, ...] = (
    Table("node_devices", (("hour", "int"), ("node", "text"), ("gpu_model", "text"), ("mig_profile", "text"),
                           ("replicas", "int")), (("devices", "int"),)),
)
TABLES_V12: tuple[Table, ...] = tuple(
    Table(t.name, t.key + _V10_KEYS.get(t.name, ()), t.values) for t in TABLES_V9) + _V12_TABLES
#: Schema 13: split GPU-seconds on the usage rows, the counters' marks and the namespace totals; CO2e of the
#: measured energy, the GPU-seconds it is known for, and those whose energy was not measured.
_V13_SPLIT = (("split_s", "real0"),)
_V13_EMISSIONS = (("co2e_g", "real0"), ("co2e_s", "real0"), ("unmeasured_energy_s", "real0"))
_V13_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "usage": _V13_SPLIT + _V13_EMISSIONS, "hwm": _V13_SPLIT, "totals": _V13_SPLIT + _V13_EMISSIONS,
    **{name: _V13_EMISSIONS for name in _V8_CAPACITY}}
TABLES_V13: tuple[Table, ...] = tuple(
    Table(t.name, t.key, t.values + _V13_COLUMNS.get(t.name, ())) for t in TABLES_V12)
#: Schema 14: tables whose numbers are not amounts (marks, timestamps, evidence) keep binary floats.
FLOAT_TABLES = frozenset({"hwm", "agents", "quota_events", "commitment_marks", "evidence"})


def _exact_word(table: str, column: str, *, word: str) -> str:
    """A schema-13 column's type word at schema 14 (``real0``: a column added later, 0 unless written)."""
    if word not in ("real", "money", "real?", "real0"):
        return word
    if table in FLOAT_TABLES:
        return "float?" if word == "real?" else "float"
    if column == "energy_j":
        return "energy0" if word == "real0" else "energy"
    return "fixed0" if word == "real0" else "fixed"


TABLES_V14: tuple[Table, ...] = tuple(
    Table(t.name, t.key, tuple((c, _exact_word(t.name, c, word=w)) for c, w in t.values)) for t in TABLES_V13)
#: Schema 15: the scheduler queue, last in the usage key (after ``sharing``).
QUEUE_COLUMNS = ("scheduler", "queue", "cluster_queue")
#: and the queues budgets hold: budget -> what it holds, how, since when (the release reads it back).
_V15_TABLES: tuple[Table, ...] = (
    Table("budget_holds", (("budget", "text"),), (("target_kind", "text"), ("target", "text"), ("action", "text"),
                                                  ("held_at", "float"))),
)
TABLES: tuple[Table, ...] = tuple(
    Table(t.name, t.key + (tuple((c, "text0") for c in QUEUE_COLUMNS) if t.name == "usage" else ()), t.values)
    for t in TABLES_V14) + _V15_TABLES
HOURLY = ("usage", "unallocated", "unobserved", "unused_commitment")
BY_NAME = {t.name: t for t in TABLES}
#: Every fixed-point column's fractional digits, by column name (a name means the same in every table that has
#: it as an amount); what readers use to turn SQLite's integer units back into decimals.
FIXED_COLUMNS: dict[str, int] = {c: FIXED_WORDS[w] for t in TABLES for c, w in t.values if w in FIXED_WORDS}


def fixed_places(table: str) -> dict[str, int]:
    """The fixed-point columns of ``table`` and their fractional digits."""
    return {c: FIXED_WORDS[w] for c, w in BY_NAME[table].values if w in FIXED_WORDS}


def current_schema(d: Dialect) -> list[str]:
    """Statements creating a fresh ledger at ``SCHEMA_VERSION``."""
    return ([create_table(d, t) for t in TABLES] + ["CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)"]
            + room_for_updates(d))


#: Tables whose rows every tick updates (a node's marks, each holder's hour-rows and evidence, the running totals).
UPDATED_EVERY_TICK = ("hwm", "agents", "evidence", "totals", "breakdown_totals", "unallocated", "unallocated_totals")
#: Room left on each PostgreSQL page, so an update of a row's values (no key column changes) is a heap-only
#: tuple on the same page: no new entry in the wide primary-key index, and dead versions pruned in place.
UPDATE_FILLFACTOR = 70


def room_for_updates(d: Dialect) -> list[str]:
    """Schema 10 -> 11 (and a fresh ledger): PostgreSQL leaves room on the pages of the tables updated every tick
    (usage's month partitions get it when they are created); SQLite has no such setting."""
    if not d.partition_usage:
        return []
    return [f"ALTER TABLE {t} SET (fillfactor = {UPDATE_FILLFACTOR})" for t in UPDATED_EVERY_TICK]


def statements(script: str) -> list[str]:
    """The statements of a ``;``-separated script, blank ones dropped."""
    return [s for s in (x.strip() for x in script.split(";")) if s]


def add_cluster(d: Dialect) -> list[str]:
    """Schema 2 -> 3: every table rebuilt with ``cluster`` first in its key; existing rows are ``default``."""
    out: list[str] = []
    for t in TABLES_V3:
        if t.name == "fence":
            out.append(create_table(d, t))
            continue
        old = ", ".join(c for c, _w in t.key + t.values)
        out += [create_table(d, t, name=f"{t.name}_v3"),
                f"INSERT INTO {t.name}_v3 (cluster, {old}) SELECT '{DEFAULT_CLUSTER}', {old} FROM {t.name}",
                f"DROP TABLE {t.name}", f"ALTER TABLE {t.name}_v3 RENAME TO {t.name}"]
    return [*out, "CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)"]


def add_list_prices(d: Dialect) -> list[str]:
    """Schema 3 -> 4: the new columns (booked rows: list = effective, energy from the hourly rows kept)
    and the commitment and billing tables."""
    out: list[str] = []
    for table, cols in _V4_COLUMNS.items():
        for name, word in cols:
            base = {"money": d.money, "real": d.real}[word]  # schema 4's types
            out.append(f"ALTER TABLE {table} ADD COLUMN {name} {base} NOT NULL DEFAULT 0")
        out.append(f"UPDATE {table} SET list_cost = cost")
    out.append("UPDATE totals SET energy_j = COALESCE((SELECT SUM(u.energy_j) FROM usage u WHERE u.cluster = "
               "totals.cluster AND u.namespace = totals.namespace AND u.currency = totals.currency), 0)")
    return out + [create_table(d, t) for t in _V4_TABLES]


def _add_usage_key(d: Dialect, new: Table, *, column: str, version: int) -> list[str]:
    """``column`` (or several, comma-separated) joins the usage key (``new`` is the table after it); booked rows
    get "" (not known then).

    SQLite rebuilds the table (its primary key cannot change in place); PostgreSQL adds the column and
    swaps the key constraint on the parent (its partitions follow). ``IF NOT EXISTS``: a ledger whose
    usage table already has the column (set back by hand) migrates the same."""
    added = column.split(",")
    if d.partition_usage:
        pk = ", ".join(["cluster"] + [c for c, _w in new.key])
        return [*(f"ALTER TABLE usage ADD COLUMN IF NOT EXISTS {c} TEXT NOT NULL DEFAULT ''" for c in added),
                "ALTER TABLE usage DROP CONSTRAINT usage_pkey", f"ALTER TABLE usage ADD PRIMARY KEY ({pk})"]
    old = ", ".join(c for c in new.columns() if c not in added)
    blanks = ", ".join("''" for _c in added)
    return [create_table(d, new, name=f"usage_v{version}"),
            f"INSERT INTO usage_v{version} ({old}, {column.replace(',', ', ')}) SELECT {old}, {blanks} FROM usage",
            "DROP TABLE usage", f"ALTER TABLE usage_v{version} RENAME TO usage",
            "CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)"]


def add_claim(d: Dialect) -> list[str]:
    """Schema 6 -> 7: ``claim`` joins the usage key; booked rows get "" (no claim known)."""
    return _add_usage_key(d, {t.name: t for t in TABLES_V9}["usage"], column="claim", version=7)


def add_sharing(d: Dialect) -> list[str]:
    """Schema 9 -> 10: ``sharing`` joins the usage key; booked rows get "" (the mode was not booked)."""
    return _add_usage_key(d, {t.name: t for t in TABLES_V12}["usage"], column="sharing", version=10)


def add_energy(d: Dialect) -> list[str]:
    """Schema 7 -> 8: capacity rows' energy (0 where booked before it was measured) and the new table."""
    return [f"ALTER TABLE {table} ADD COLUMN {name} {_type(d, word)}"
            for table, cols in _V8_COLUMNS.items() for name, word in cols] + [create_table(d, t) for t in _V8_TABLES]


def add_split_and_emissions(d: Dialect) -> list[str]:
    """Schema 12 -> 13: the split and emissions columns, 0 on booked rows (their CO2e was never known); the marks
    found say their split is unknown, so an agent's split counter (cumulative over its epoch) is a baseline there,
    never one interval's. ``IF NOT EXISTS`` on PostgreSQL (SQLite has no such clause), as in ``_add_usage_key``:
    a usage table set back by hand migrates."""
    guard = " IF NOT EXISTS" if d.partition_usage else ""
    return [f"ALTER TABLE {table} ADD COLUMN{guard} {name} {_type(d, word)}"
            for table, cols in _V13_COLUMNS.items() for name, word in cols] + [
        f"UPDATE hwm SET split_s = {SPLIT_UNKNOWN}"]


def migrations(d: Dialect) -> dict[int, Callable[[], list[str]]]:
    """Statements taking a ledger from version ``v - 1`` to ``v``."""
    return {1: lambda: statements(SQLITE_MIGRATIONS[1]), 2: lambda: statements(SQLITE_MIGRATIONS[2]),
            3: lambda: add_cluster(d), 4: lambda: add_list_prices(d),
            5: lambda: [create_table(d, t) for t in _V5_TABLES],
            6: lambda: [create_table(d, t) for t in _V6_TABLES], 7: lambda: add_claim(d), 8: lambda: add_energy(d),
            9: lambda: [create_table(d, t) for t in _V9_TABLES], 10: lambda: add_sharing(d),
            11: lambda: room_for_updates(d), 12: lambda: [create_table(d, t) for t in _V12_TABLES],
            13: lambda: add_split_and_emissions(d), EXACT_SCHEMA: lambda: _exact_amounts(d), 15: lambda: add_queue(d)}


def add_queue(d: Dialect) -> list[str]:
    """Schema 14 -> 15: the scheduler queue joins the usage key; booked rows get "" (no queue was booked)."""
    return [*_add_usage_key(d, BY_NAME["usage"], column=",".join(QUEUE_COLUMNS), version=15),
            *(create_table(d, t) for t in _V15_TABLES)]


def _exact_amounts(d: Dialect) -> list[str]:
    """Schema 13 -> 14 (``schema_exact``): this schema's tables made fixed-point."""
    return exact_amounts(d, tables=TABLES_V14, old=TABLES_V13)
