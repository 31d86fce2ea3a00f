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
Schema 13 made amounts exact (``EXACT_SCHEMA``): GPU-seconds and money are fixed-point with 9 fractional digits
(SQLite: INTEGER nano-units, each column checked to stay an integer, so an overflow fails the transaction
instead of turning into a float; PostgreSQL: NUMERIC(38,9)), energy with 3 (millijoules: nano-joules would
overflow SQLite's int64 within weeks on one node). Marks, timestamps and right-sizing evidence stay floats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exporter.aggregator.ledger.schema_v1 import SQLITE_MIGRATIONS

SCHEMA_VERSION = 13
EXACT_SCHEMA = 13  # the migration that makes amounts fixed-point (``exact_amounts``)
DEFAULT_CLUSTER = "default"


@dataclass(frozen=True, slots=True)
class Dialect:
    """Column types and clauses that differ between the backends."""

    name: str
    real: str  # before schema 13, and the ``float`` columns since
    money: str  # before schema 13
    bigint: str
    fixed9: str  # schema 13: 9 fractional digits (seconds, money)
    fixed3: str  # schema 13: 3 fractional digits (energy)
    table_suffix: str  # ``WITHOUT ROWID`` on SQLite
    partition_usage: bool  # usage partitioned by month (PostgreSQL)


SQLITE = Dialect("sqlite", real="REAL", money="REAL", bigint="INTEGER", fixed9="INTEGER", fixed3="INTEGER",
                 table_suffix=" WITHOUT ROWID", partition_usage=False)
POSTGRES = Dialect("postgresql", real="DOUBLE PRECISION", money="NUMERIC", bigint="BIGINT", fixed9="NUMERIC(38,9)",
                   fixed3="NUMERIC(38,3)", table_suffix="", partition_usage=True)


@dataclass(frozen=True, slots=True)
class Table:
    """One table: key columns then value columns, each ``(name, type word)``; type words are ``text``, ``int``,
    ``real``, ``money``, ``real?`` (nullable) or ``real0`` (0 unless written) up to schema 12; since 13 amounts
    are ``fixed`` (9 digits) or ``energy`` (3 digits; ``energy0``: 0 unless written) and other numbers
    ``float`` / ``float?``."""

    name: str
    key: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, str], ...]

    def columns(self) -> tuple[str, ...]:
        """Every column of the table, ``cluster`` first: the key's, then the values'."""
        return ("cluster", *tuple(c for c, _t in self.key + self.values))


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
#: Schema 13: tables whose numbers are not amounts (marks, timestamps, evidence) keep binary floats.
FLOAT_TABLES = frozenset({"hwm", "agents", "quota_events", "commitment_marks", "evidence"})
FIXED_WORDS = {"fixed": 9, "energy": 3, "energy0": 3}  # type word -> fractional digits


def _exact_word(table: str, column: str, *, word: str) -> str:
    """A schema-12 column's type word at schema 13."""
    if word not in ("real", "money", "real?", "real0"):
        return word
    if table in FLOAT_TABLES:
        return "float?" if word == "real?" else "float"
    if column == "energy_j":
        return "energy0" if word == "real0" else "energy"
    return "fixed"


TABLES: tuple[Table, ...] = tuple(
    Table(t.name, t.key, tuple((c, _exact_word(t.name, c, word=w)) for c, w in t.values)) for t in TABLES_V12)
HOURLY = ("usage", "unallocated", "unobserved", "unused_commitment")
BY_NAME = {t.name: t for t in TABLES}
#: Every fixed-point column's fractional digits, by column name (a name means the same in every table that has
#: it as an amount); what readers use to turn SQLite's integer units back into decimals.
FIXED_COLUMNS: dict[str, int] = {c: FIXED_WORDS[w] for t in TABLES for c, w in t.values if w in FIXED_WORDS}


def fixed_places(table: str) -> dict[str, int]:
    """The fixed-point columns of ``table`` and their fractional digits."""
    return {c: FIXED_WORDS[w] for c, w in BY_NAME[table].values if w in FIXED_WORDS}


def _type(d: Dialect, word: str, *, column: str = "") -> str:
    base = {"text": "TEXT", "int": d.bigint, "real": d.real, "money": d.money, "real?": d.real, "real0": d.real,
            "float": d.real, "float?": d.real, "fixed": d.fixed9, "energy": d.fixed3, "energy0": d.fixed3}[word]
    if word in ("real0", "energy0"):  # a column added later: rows (and writers) from before it read 0
        base = f"{base} NOT NULL DEFAULT 0"
    elif not word.endswith("?"):
        base = f"{base} NOT NULL"
    if word in FIXED_WORDS and not d.partition_usage and column:
        # SQLite turns an integer sum past int64 into a REAL silently: refuse it, naming the column
        base += f" CONSTRAINT {column}_exceeds_sqlite_range CHECK (typeof({column}) = 'integer')"
    return base


def create_table(d: Dialect, t: Table, *, name: str | None = None) -> str:
    """The ``CREATE TABLE`` of ``t`` (as ``name``, when migrating through a copy) in the dialect, keyed by cluster
    first."""
    cols = ", ".join(["cluster TEXT NOT NULL"] + [f"{c} {_type(d, w, column=c)}" for c, w in t.key + t.values])
    pk = ", ".join(["cluster"] + [c for c, _w in t.key])
    partitioned = d.partition_usage and t.name == "usage"
    suffix = " PARTITION BY RANGE (hour)" if partitioned else d.table_suffix
    return f"CREATE TABLE {name or t.name} ({cols}, PRIMARY KEY ({pk})){suffix}"


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
    """``column`` joins the usage key (``new`` is the table after it); booked rows get "" (not known then).

    SQLite rebuilds the table (its primary key cannot change in place); PostgreSQL adds the column and
    swaps the key constraint on the parent (its partitions follow). ``IF NOT EXISTS``: a ledger whose
    usage table already has the column (set back by hand) migrates the same."""
    if d.partition_usage:
        pk = ", ".join(["cluster"] + [c for c, _w in new.key])
        return [f"ALTER TABLE usage ADD COLUMN IF NOT EXISTS {column} TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE usage DROP CONSTRAINT usage_pkey", f"ALTER TABLE usage ADD PRIMARY KEY ({pk})"]
    old = ", ".join(c for c in new.columns() if c != column)
    return [create_table(d, new, name=f"usage_v{version}"),
            f"INSERT INTO usage_v{version} ({old}, {column}) SELECT {old}, '' FROM usage",
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


def migrations(d: Dialect) -> dict[int, Callable[[], list[str]]]:
    """Statements taking a ledger from version ``v - 1`` to ``v``."""
    return {1: lambda: statements(SQLITE_MIGRATIONS[1]), 2: lambda: statements(SQLITE_MIGRATIONS[2]),
            3: lambda: add_cluster(d), 4: lambda: add_list_prices(d),
            5: lambda: [create_table(d, t) for t in _V5_TABLES],
            6: lambda: [create_table(d, t) for t in _V6_TABLES], 7: lambda: add_claim(d), 8: lambda: add_energy(d),
            9: lambda: [create_table(d, t) for t in _V9_TABLES], 10: lambda: add_sharing(d),
            11: lambda: room_for_updates(d), 12: lambda: [create_table(d, t) for t in _V12_TABLES],
            EXACT_SCHEMA: lambda: exact_amounts(d)}


#: SQLite's function (registered on the writer's connection) turning a schema-12 REAL into integer units.
SQLITE_UNITS_FN = "gpucost_units"


def _pg_half_even(expr: str, places: int) -> str:
    """PostgreSQL SQL rounding the numeric ``expr`` half-even to ``places`` digits (its ``round`` on numeric
    rounds ties away from zero): a tie goes to the even neighbour."""
    s = f"(({expr}) * 1e{places})"
    return (f"((CASE WHEN {s} - floor({s}) = 0.5 THEN floor({s}) + mod(abs(floor({s})), 2) ELSE round({s}) END)"
            f" / 1e{places})")


def exact_amounts(d: Dialect) -> list[str]:
    """Schema 12 -> 13: amounts become fixed-point, each value rounded half-even once (a REAL by its shortest
    decimal repr, as booking reads agents' floats). SQLite rebuilds each table (a column's type cannot change
    in place) converting through ``SQLITE_UNITS_FN``; PostgreSQL alters the columns' types (usage's partitions
    follow), reading DOUBLE PRECISION through its text (shortest round-trip digits), NUMERIC as it is."""
    out: list[str] = []
    old_types = {t.name: dict(t.values) for t in TABLES_V12}
    for t in TABLES:
        places = {c: FIXED_WORDS[w] for c, w in t.values if w in FIXED_WORDS}
        if not places:
            continue
        if d.partition_usage:
            for c, p in places.items():
                source = f"{c}::text::numeric" if old_types[t.name][c] != "money" else c
                out.append(f"ALTER TABLE {t.name} ALTER COLUMN {c} TYPE NUMERIC(38,{p}) USING "
                           f"{_pg_half_even(source, p)}")
            continue
        cols = t.columns()
        exprs = ", ".join(f"{SQLITE_UNITS_FN}({c}, {places[c]})" if c in places else c for c in cols)
        out += [create_table(d, t, name=f"{t.name}_v13"),
                f"INSERT INTO {t.name}_v13 ({', '.join(cols)}) SELECT {exprs} FROM {t.name}",
                f"DROP TABLE {t.name}", f"ALTER TABLE {t.name}_v13 RENAME TO {t.name}"]
    if not d.partition_usage:
        out.append("CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)")
    return out
