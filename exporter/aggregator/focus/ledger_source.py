"""Reads the ledger for an export with plain SQL through a ``Query`` callable, one hour at a time.

Memory stays bounded by one hour of rows whatever the window: the hours are listed first (a few hundred
integers for a month), then each hour is read with ``WHERE hour = ?`` on the tables' primary keys (keyset
pages of one hour, on SQLite and PostgreSQL alike). Rows are ordered in Python, by code point, so both
backends give the same order whatever the database's collation. The capacity tables (time nobody held,
time nobody could observe) share one shape and are one list. Amounts become ``Decimal`` here, once: an
exact ledger's decimals as they are, a float ledger's floats as their shortest decimal (never through a float).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from decimal import Decimal
from functools import lru_cache
from operator import attrgetter
from typing import Any, TypeVar

from exporter.aggregator.books.booking import hour_of
from exporter.aggregator.focus.format import money
from exporter.aggregator.ledger.report import Query
from exporter.model.named_rows import Select


@dataclass(frozen=True, slots=True)
class CapacityTable:
    """A ledger table of capacity charged to no pod (columns of ``unallocated``), and the state it stands for."""

    table: str
    state: str


CAPACITY_TABLES: tuple[CapacityTable, ...] = (
    CapacityTable("unallocated", "Unallocated"),
    CapacityTable("unobserved", "Unobserved"),
)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One ``usage`` row: a holder's GPU time on one node in one hour."""

    hour: int
    namespace: str
    pod: str
    workload: str
    node: str
    pool: str
    gpu_model: str
    mig_profile: str
    priority_class: str
    currency: str
    allocated_s: Decimal
    used_s: Decimal
    unmeasured_s: Decimal
    idle_s: Decimal
    cost: Decimal
    list_cost: Decimal
    idle_cost: Decimal
    energy_j: Decimal
    co2e_g: Decimal  # 0 on a ledger from before schema 13
    co2e_s: Decimal  # GPU-seconds whose CO2e is known; 0: unknown
    sharing: str = ""  # how the GPU was shared (none, time-slicing, mps, hami, dra, kai); "" before schema 10
    scheduler: str = ""  # whose queue admitted the pod; "" for none (and on a ledger from before schema 15)
    queue: str = ""


@dataclass(frozen=True, slots=True)
class CapacityRecord:
    """One row of a capacity table: GPU time on a node that no holder is charged for."""

    state: str
    hour: int
    node: str
    pool: str
    gpu_model: str
    currency: str
    seconds: Decimal
    cost: Decimal
    list_cost: Decimal
    co2e_g: Decimal
    co2e_s: Decimal


@dataclass(frozen=True, slots=True)
class CommitmentRecord:
    """One ``unused_commitment`` row: the part of a commitment no GPU could use in one hour, paid all the same."""

    hour: int
    commitment: str
    gpu_model: str
    currency: str
    seconds: Decimal  # unused committed GPU-seconds
    cost: Decimal
    list_cost: Decimal


@dataclass(frozen=True, slots=True)
class Window:
    """Hour buckets that start in [since, until), as ``report`` selects them; None = open."""

    since: float | None
    until: float | None

    def clause(self) -> tuple[str, list[float]]:
        """The ``WHERE`` clause on ``hour`` and its parameters; "" when the window is open on both sides."""
        where: list[str] = []
        params: list[float] = []
        if self.since is not None:
            where.append("hour >= ?")
            params.append(hour_of(self.since))
        if self.until is not None:
            where.append("hour < ?")
            params.append(self.until)
        return (f"WHERE {' AND '.join(where)}" if where else ""), params


@dataclass(frozen=True, slots=True)
class LedgerLayout:
    """Which of the optional tables and columns this ledger file has."""

    capacity: tuple[CapacityTable, ...]
    list_cost_in: frozenset[str]  # tables that carry a list_cost column
    cluster: str | None = None  # rows of this cluster only, in a ledger keyed by cluster
    commitments: bool = False  # the ledger has the ``unused_commitment`` table (schema 4 on)
    teams: bool = False  # the ledger has the ``namespace_team`` table (schema 6 on)
    carbon: bool = False  # usage and capacity rows carry CO2e (schema 13 on)
    sharing: bool = False  # usage rows carry how the GPU was shared (schema 10 on)
    queues: bool = False  # usage rows carry the scheduler queue (schema 15 on)

    def hourly_tables(self) -> tuple[str, ...]:
        """Every table the export reads by hour."""
        return ("usage", *(c.table for c in self.capacity), *(("unused_commitment",) if self.commitments else ()))

    def scope(self) -> tuple[str, tuple[str, ...]]:
        """The extra condition (and its parameter) that keeps one cluster's rows."""
        return (" AND cluster = ?", (self.cluster,)) if self.cluster is not None else ("", ())


def _tables(query: Query, dialect: str) -> set[str]:
    if dialect == "postgresql":
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return {str(name) for (name,) in query(sql, ())}


def _columns(query: Query, table: str, *, dialect: str) -> set[str]:
    if dialect == "postgresql":
        return {str(name) for (name,) in query("SELECT column_name FROM information_schema.columns "
                                               "WHERE table_schema = current_schema() AND table_name = ?", (table,))}
    return {str(name) for (name,) in query(f"SELECT name FROM pragma_table_info('{table}')", ())}


def inspect_ledger(query: Query, *, cluster: str | None = "default", dialect: str = "sqlite") -> LedgerLayout:
    """Find the capacity tables present and which tables already carry list prices; a ledger whose rows
    are keyed by cluster is read for ``cluster`` only (the export's SubAccountId). ``dialect``: ``sqlite``
    or ``postgresql`` (only the catalog queries differ)."""
    names = _tables(query, dialect)
    if "usage" not in names or "unallocated" not in names:
        raise ValueError("not a gpu-cost-exporter ledger (no usage/unallocated tables)")
    capacity = tuple(t for t in CAPACITY_TABLES if t.table in names)
    with_list = frozenset(t for t in ("usage", *(c.table for c in capacity))
                          if "list_cost" in _columns(query, t, dialect=dialect))
    keyed = "cluster" in _columns(query, "usage", dialect=dialect)
    return LedgerLayout(capacity, with_list, cluster if keyed else None,  # None: every cluster
                        commitments="unused_commitment" in names, teams="namespace_team" in names,
                        carbon="co2e_g" in (usage_cols := _columns(query, "usage", dialect=dialect)),
                        sharing="sharing" in usage_cols, queues="queue" in usage_cols)


def ledger_clusters(query: Query, *, dialect: str = "sqlite") -> list[str]:
    """The clusters with rows in any exported table (``default`` for a ledger from before clusters)."""
    layout = inspect_ledger(query, cluster="default", dialect=dialect)
    if layout.cluster is None:
        return ["default"]
    sql = " UNION ".join(f"SELECT DISTINCT cluster FROM {t}" for t in layout.hourly_tables())
    return sorted(str(name) for (name,) in query(sql, ()))


def list_cost_sql(layout: LedgerLayout, table: str) -> str:
    """The list cost of a row: the ``list_cost`` column once pricing writes one, else the (effective) cost."""
    return "list_cost" if table in layout.list_cost_in else "cost"


def window_hours(query: Query, layout: LedgerLayout, *, window: Window) -> list[int]:
    """Every hour with a row in any exported table, ascending."""
    clause, params = window.clause()
    scope, scope_params = layout.scope()
    if scope and not clause:
        clause, scope = "WHERE cluster = ?", ""
    tables = layout.hourly_tables()
    sql = " UNION ".join(f"SELECT DISTINCT hour FROM {t} {clause}{scope}" for t in tables) + " ORDER BY 1"
    return [int(hour) for (hour,) in query(sql, [*params, *scope_params] * len(tables))]


_USAGE_ORDER = attrgetter("node", "pool", "gpu_model", "currency", "namespace", "pod", "mig_profile", "workload",
                          "priority_class", "sharing")
_CAPACITY_ORDER = attrgetter("node", "pool", "gpu_model", "currency")
_COMMITMENT_ORDER = attrgetter("commitment", "gpu_model", "currency")


_NO_CARBON = {"co2e_g": "0.0", "co2e_s": "0.0"}  # a ledger from before schema 13: CO2e unknown
_NO_QUEUE = {"scheduler": "''", "queue": "''"}  # a ledger from before schema 15: no queue booked


R = TypeVar("R")


def _amount(value: float | Decimal) -> Decimal:
    """A ledger amount as a Decimal. An integer is refused: no REAL or NUMERIC column hands one over, so it
    would be integer units that a reader forgot to decode (a cost a billion times too large)."""
    if isinstance(value, int):
        raise ValueError(f"amount {value!r} read as an integer: integer units must be decoded before the export")
    return money(value)


_READ: dict[str, Callable[[Any], Any]] = {"str": str, "int": int, "Decimal": _amount}


def _records(record: type[R], cols: Select, *, rows: Iterable[Sequence[Any]], **fixed: Any) -> list[R]:
    """Rows as ``record``s (``fixed``: fields the same in every row), each value converted to its field's type:
    amounts through ``_amount``, never through a float."""
    types = {f.name: str(f.type) for f in fields(record) if f.name not in fixed}  # type: ignore[arg-type]
    names = cols.names
    convert = tuple(_READ[types[n]] for n in names)
    return [record(**fixed, **{n: c(v) for n, c, v in zip(names, convert, r, strict=False)}) for r in rows]


@lru_cache(maxsize=64)
def _select(record: type, list_cost: str | None, *, skip: tuple[str, ...] = (), carbon: bool = True,
            sharing: bool = True, queues: bool = True) -> Select:
    """One SELECT per record type and list-cost expression, built once: the export reads every hour alike."""
    exprs = ({} if carbon else dict(_NO_CARBON)) | ({} if sharing or record is not UsageRecord else {"sharing": "''"})
    exprs |= {} if queues else dict(_NO_QUEUE)
    return Select.record(record, skip=skip, **exprs) if list_cost is None else Select.record(
        record, skip=skip, list_cost=list_cost, **exprs)


def read_usage(query: Query, layout: LedgerLayout, *, hour: int) -> list[UsageRecord]:
    """The usage rows of one hour, in a stable order."""
    cols = _select(UsageRecord, list_cost_sql(layout, "usage"), carbon=layout.carbon, sharing=layout.sharing,
                   queues=layout.queues)
    scope, scope_params = layout.scope()
    rows = query(f"SELECT {cols.sql()} FROM usage WHERE hour = ?{scope}", (hour, *scope_params))
    return sorted(_records(UsageRecord, cols, rows=rows), key=_USAGE_ORDER)


def read_capacity(query: Query, layout: LedgerLayout, *, hour: int) -> list[CapacityRecord]:
    """The capacity rows (unallocated, unobserved, ...) of one hour, in a stable order."""
    out: list[CapacityRecord] = []
    scope, scope_params = layout.scope()
    for cap in layout.capacity:
        cols = _select(CapacityRecord, list_cost_sql(layout, cap.table), skip=("state",), carbon=layout.carbon)
        rows = query(f"SELECT {cols.sql()} FROM {cap.table} WHERE hour = ?{scope}", (hour, *scope_params))
        out += sorted(_records(CapacityRecord, cols, rows=rows, state=cap.state), key=_CAPACITY_ORDER)
    return out


def read_unused_commitments(query: Query, layout: LedgerLayout, *, hour: int,
                            last: int | None = None) -> list[CommitmentRecord]:
    """The unused-commitment rows of one hour (of the hours ``hour`` to ``last``: each hour's in the same order);
    none on a ledger from before commitments."""
    if not layout.commitments:
        return []
    cols = _select(CommitmentRecord, None)
    scope, scope_params = layout.scope()
    rows = query(f"SELECT {cols.sql()} FROM unused_commitment WHERE hour >= ? AND hour <= ?{scope}",
                 (hour, hour if last is None else last, *scope_params))
    return sorted(_records(CommitmentRecord, cols, rows=rows), key=_COMMITMENT_ORDER)


def read_teams(query: Query, layout: LedgerLayout, *, hour: int) -> dict[str, str]:
    """namespace -> team as booking saw the namespace's team label in this hour; absent = unknown."""
    return {ns: team for (_hour, ns), team in read_teams_of_hours(query, layout, first=hour, last=hour).items()}


def read_teams_of_hours(query: Query, layout: LedgerLayout, *, first: int, last: int) -> dict[tuple[int, str], str]:
    """(hour, namespace) -> team for the hours ``first`` to ``last``, as ``read_teams``."""
    if not layout.teams:
        return {}
    scope, scope_params = layout.scope()
    return {(int(hour), str(ns)): str(team) for hour, ns, team in query(
        f"SELECT hour, namespace, team FROM namespace_team WHERE hour >= ? AND hour <= ?{scope}",
        (first, last, *scope_params))}


def read_capacity_types(query: Query, layout: LedgerLayout) -> dict[str, str]:
    """node -> capacity type (on-demand, spot, reserved) as booking last saw the node's labels; a ledger from
    before commitments (schema 4) has none, and its nodes count as on-demand."""
    if not layout.commitments:
        return {}
    scope, scope_params = layout.scope()
    where = f"WHERE 1 = 1{scope}"
    return {str(node): str(kind or "") for node, kind in query(
        f"SELECT node, capacity_type FROM node_billing {where}", tuple(scope_params))}
