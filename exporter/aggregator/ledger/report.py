"""Cost reports from the ledger: the same rows for ``gpu-cost-exporter report`` and ``/api/v1/report``.

Amounts are ``Decimal`` sums of booked values (exact); GPU-hours are booked seconds / 3600 rounded half-even to
9 digits. JSON and CSV write every amount as plain decimal text with at most 9 fractional digits (no exponent);
the table rounds for display."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from exporter.aggregator.ledger.table import Table
from exporter.model.books import hour_of
from exporter.model.dimensions import ALIASES as ALIASES
from exporter.model.dimensions import DIMENSIONS as DIMENSIONS
from exporter.model.dimensions import GROUPS as GROUPS
from exporter.model.durations import parse_duration
from exporter.model.exact import ZERO, book
from exporter.model.named_rows import Select
from exporter.model.wire import plain
from exporter.model.wire import to_json as to_json  # importers have long found it here

#: Group columns computed from booked ones: the vendor from the model the agent reported (AMD: card_series, else
#: the board number 102-G...; Gaudi: "Intel Gaudi"; DCGM's model names otherwise).
DERIVED = {"vendor": "CASE WHEN gpu_model LIKE '%Gaudi%' THEN 'gaudi' WHEN gpu_model LIKE '%Instinct%' OR gpu_model "
                     "LIKE 'AMD %' OR gpu_model LIKE '102-G%' THEN 'amd' WHEN gpu_model IN ('', 'unknown') THEN "
                     "'unknown' ELSE 'nvidia' END"}


def vendor_of(gpu_model: str | None) -> str:
    """The vendor of a model name, as ``DERIVED`` computes it in SQL (the status page and metrics say the same)."""
    m = gpu_model or ""
    if "Gaudi" in m:
        return "gaudi"
    if "Instinct" in m or m.startswith(("AMD ", "102-G")):
        return "amd"
    return "unknown" if m in ("", "unknown") else "nvidia"


CAPACITY_COLUMNS = frozenset({"cluster", "node", "pool", "gpu_model", "vendor"})  # what capacity tables are keyed by
#: Single keys capacity is kept by.
CAPACITY_GROUPS = {"node": "node", "pool": "pool", "gpu_model": "gpu_model", "model": "gpu_model"}
GROUP_COLUMNS = frozenset(c for cols in GROUPS.values() for c in cols) | {"commitment"}
UNALLOCATED = "__unallocated__"
UNOBSERVED = "__unobserved__"
UNUSED_COMMITMENT = "__unused_commitment__"
CAPACITY_TABLES = (("unallocated", UNALLOCATED), ("unobserved", UNOBSERVED))
CAPACITY_ROWS = frozenset([*(name for _table, name in CAPACITY_TABLES), UNUSED_COMMITMENT])
FIELDS = ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours", "split_gpu_hours", "cost",
          "idle_cost", "list_cost")

Query = Callable[[str, Iterable[Any]], list[tuple[Any, ...]]]


class ReportError(ValueError):
    """A bad report request (unknown grouping, unparseable window)."""


def parse_time(text: str | None, now: float) -> float | None:
    """RFC3339 (``2026-11-30T12:00:00Z``), a relative duration back from now (``24h``), or ``now``."""
    if text is None or text == "":
        return None
    if text == "now":
        return now
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReportError(f"bad time {text!r}: use RFC3339 (2026-11-30T12:00:00Z) or a duration like 24h") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """What to report: group columns (in order), the window of hour buckets, and one cluster or all."""

    cols: tuple[str, ...]
    since: float | None = None
    until: float | None = None
    cluster: str | None = None  # None: every cluster in the ledger

    @classmethod
    def parse(cls, by: str, *, since: float | None, until: float | None, cluster: str | None) -> ReportRequest:
        """``by`` is one key or several (``cluster,namespace``); their columns are joined in order."""
        cols: list[str] = []
        for key in (k.strip() for k in by.split(",")):
            if key not in GROUPS:
                raise ReportError(f"unknown --by {key!r}: use one or more (comma-separated) of {', '.join(DIMENSIONS)}")
            cols += [c for c in GROUPS[key] if c not in cols]
        if since is not None and until is not None and until < since:
            raise ReportError("--until is before --since")
        return cls(tuple(cols), since=since, until=until, cluster=cluster)

    def where(self) -> tuple[str, list[Any]]:
        """The WHERE clause and its parameters: this cluster (or all) and the window's hour buckets."""
        where: list[str] = []
        params: list[Any] = []
        if self.cluster is not None:
            where.append("cluster = ?")
            params.append(self.cluster)
        if self.since is not None:
            where.append("hour >= ?")
            params.append(hour_of(self.since))
        if self.until is not None:
            where.append("hour < ?")
            params.append(self.until)
        return (f"WHERE {' AND '.join(where)}" if where else ""), params


def build_report(query: Query, by: str, *, since: float | None, until: float | None,
                 cluster: str | None = None) -> list[dict[str, Any]]:
    """Rows grouped by ``by`` (one key or several, comma-separated) over the hour buckets that start in
    [since, until), of one cluster or (None) of all."""
    return report_rows(query, ReportRequest.parse(by, since=since, until=until, cluster=cluster))


def window(by: str, *, since: float | None, until: float | None,
           cluster: str | None = None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) of the hour buckets that start in [since, until), of one
    cluster or (None) all; ``by`` a single grouping key (what ``--reprice`` takes)."""
    if by not in GROUPS:
        raise ReportError(f"unknown --by {by!r}: use one of {', '.join(DIMENSIONS)}")
    return ReportRequest.parse(by, since=since, until=until, cluster=cluster).where()


def unused_key(by: str, commitment: str, *, currency: str) -> tuple[Any, ...]:
    """The row key of one commitment's unused part: its own row in every grouping."""
    return (UNUSED_COMMITMENT,) * len(GROUPS[by]) + (commitment, currency)


def blank_row(by: str, name: str, *, currency: str) -> dict[str, Any]:
    """A row of zeros named ``name`` in every group column."""
    return {**dict.fromkeys(GROUPS[by], name), **dict.fromkeys(FIELDS, ZERO), "currency": currency}


_CARBON_SUMS = {"co2e_g": "SUM(co2e_g)", "co2e_s": "SUM(co2e_s)", "unmeasured_energy_s": "SUM(unmeasured_energy_s)"}
_SUMS = {"allocated_s": "SUM(allocated_s)", "used_s": "SUM(used_s)", "idle_s": "SUM(idle_s)",
         "unmeasured_s": "SUM(unmeasured_s)", "split_s": "SUM(split_s)", "cost": "SUM(cost)",
         "idle_cost": "SUM(idle_cost)", "list_cost": "SUM(list_cost)", **_CARBON_SUMS}
_CAPACITY_SUMS = {"seconds": "SUM(seconds)", "cost": "SUM(cost)", "list_cost": "SUM(list_cost)", **_CARBON_SUMS}


def _add_carbon(row: dict[str, Any], m: dict[str, Any], *, prefix: str = "") -> None:
    """Add a group's grams, known GPU-seconds and unmeasured-energy GPU-seconds to ``row``'s running sums."""
    for name in _CARBON_SUMS:
        row[f"_{prefix}{name}"] = row.get(f"_{prefix}{name}", ZERO) + amount(m[name])


def _finish_carbon(row: dict[str, Any], *, prefixes: tuple[str, ...]) -> None:
    """``co2e_kg``: None where no CO2e is known (no ``emissions:`` section, or no energy measured), never a
    silent 0; ``unmeasured_energy_gpu_hours``: the GPU-hours whose energy was not measured."""
    for prefix in prefixes:
        grams, known, dark = (row.pop(f"_{prefix}{n}", ZERO) for n in _CARBON_SUMS)
        row[f"{prefix}co2e_kg"] = book(grams / 1000) if known > 0 else None
        row[f"{prefix}unmeasured_energy_gpu_hours"] = hours(dark)


def report_rows(query: Query, req: ReportRequest) -> list[dict[str, Any]]:
    """The rows of ``req``: usage, capacity nobody held or observed, unused commitments; costliest first, capacity
    last."""
    cols = req.cols
    clause, params = req.where()
    n = len(cols)
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    derived = {c: DERIVED[c] for c in cols if c in DERIVED}
    col_sql = ", ".join(derived.get(c, c) for c in cols)
    usage = Select.of((*cols, "currency", *_SUMS), **_SUMS, **derived)
    key_of = usage.getter(*cols, "currency")
    for r in query(f"SELECT {usage.sql()} FROM usage {clause} GROUP BY {col_sql}, currency", params):
        m = usage.mapping(r)
        row: dict[str, Any] = {c: m[c] for c in cols}
        row.update(allocated_gpu_hours=hours(m["allocated_s"]), used_gpu_hours=hours(m["used_s"]),
                   idle_gpu_hours=hours(m["idle_s"]), unmeasured_gpu_hours=hours(m["unmeasured_s"]),
                   split_gpu_hours=hours(m["split_s"]),
                   cost=amount(m["cost"]), idle_cost=amount(m["idle_cost"]), list_cost=amount(m["list_cost"]),
                   currency=m["currency"])
        _add_carbon(row, m)
        rows[key_of(r)] = row
    as_columns = all(c in CAPACITY_COLUMNS for c in cols)
    cap_cols = tuple(c for c in cols if c in CAPACITY_COLUMNS)
    capacity = Select.of((*cap_cols, "currency", *_CAPACITY_SUMS), **_CAPACITY_SUMS, **derived)
    for table, name in CAPACITY_TABLES:
        found = query(f"SELECT {capacity.sql()} FROM {table} {clause} "
                      f"GROUP BY {', '.join([*(derived.get(c, c) for c in cap_cols), 'currency'])}", params)
        _add_capacity(rows, [capacity.mapping(r) for r in found], cols=cols, cap_cols=cap_cols,
                      as_columns=as_columns, name=name)
    unused = Select.of(("commitment", "currency", "seconds", "cost"), seconds="SUM(seconds)", cost="SUM(cost)")
    for r in query(f"SELECT {unused.sql()} FROM unused_commitment {clause} GROUP BY commitment, currency", params):
        m = unused.mapping(r)
        key = (UNUSED_COMMITMENT,) * n + (m["commitment"], m["currency"])
        row = rows.setdefault(key, {**dict.fromkeys(cols, UNUSED_COMMITMENT), **dict.fromkeys(FIELDS, ZERO),
                                    "currency": m["currency"]})
        row.update(commitment=m["commitment"], idle_gpu_hours=hours(m["seconds"]), cost=amount(m["cost"]),
                   idle_cost=amount(m["cost"]))
    capacity_prefixes = tuple(f"{name.strip('_')}_" for _table, name in CAPACITY_TABLES) if as_columns else ()
    for row in rows.values():
        if as_columns:
            for _table, name in CAPACITY_TABLES:
                row.setdefault(f"{name.strip('_')}_gpu_hours", ZERO)
                row.setdefault(f"{name.strip('_')}_cost", ZERO)
                row.setdefault(f"{name.strip('_')}_list_cost", ZERO)
        _finish_carbon(row, prefixes=("", *capacity_prefixes))
    return sorted(rows.values(), key=lambda r: (any(r[c] in CAPACITY_ROWS for c in cols), -r["cost"],
                                                tuple(str(r[c]) for c in cols)))


def _add_capacity(rows: dict[tuple[Any, ...], dict[str, Any]], found: list[dict[str, Any]], *,
                  cols: tuple[str, ...], cap_cols: tuple[str, ...], as_columns: bool, name: str) -> None:
    """Capacity nobody held (or nobody observed): columns of their own when every group column is one
    capacity is kept by (cluster, node, pool, model); otherwise rows whose other group columns are named
    ``__unallocated__`` / ``__unobserved__``, whose idle hours are the capacity's hours and whose cost
    and idle cost are their price."""
    prefix = name.strip("_")
    for m in found:
        group = {c: m[c] for c in cap_cols}
        currency = m["currency"]
        seconds, cost, list_cost = amount(m["seconds"]), amount(m["cost"]), amount(m["list_cost"])
        if as_columns:
            key = (*tuple(group[c] for c in cols), currency)
            row = rows.get(key)
            if row is None:
                row = rows[key] = {**group, **dict.fromkeys(FIELDS, ZERO), "currency": currency}
            row[f"{prefix}_gpu_hours"] = row.get(f"{prefix}_gpu_hours", ZERO) + hours(seconds)
            row[f"{prefix}_cost"] = row.get(f"{prefix}_cost", ZERO) + cost
            row[f"{prefix}_list_cost"] = row.get(f"{prefix}_list_cost", ZERO) + list_cost
            _add_carbon(row, m, prefix=f"{prefix}_")
        else:
            labels = {c: group.get(c, name) for c in cols}
            key = (*tuple(labels.values()), currency)
            row = rows.setdefault(key, {**labels, **dict.fromkeys(FIELDS, ZERO), "currency": currency})
            row["idle_gpu_hours"] += hours(seconds)
            row["cost"] += cost
            row["idle_cost"] += cost
            row["list_cost"] += list_cost
            _add_carbon(row, m)


def amount(v: Any) -> Decimal:
    """A summed amount from the ledger (Decimal on both backends; NULL: nothing booked) as a Decimal."""
    if v is None:
        return ZERO
    return v if isinstance(v, Decimal) else Decimal(repr(v)) if isinstance(v, float) else Decimal(v)


def hours(seconds: Any) -> Decimal:
    """GPU-seconds as GPU-hours, rounded half-even to 9 digits (the one rounding a report makes)."""
    return book(amount(seconds) / 3600)


def _cell(v: Any) -> str:
    """A table cell: numbers rounded for display, a value nobody knows (None) as ``unknown``, never ``None``."""
    if isinstance(v, float | Decimal):
        return f"{v:,.4f}"
    return "unknown" if v is None else str(v)


def _round(v: Any) -> Any:
    if isinstance(v, Decimal):
        return plain(v)
    return round(v, 6) if isinstance(v, float) and math.isfinite(v) else v


#: The table's columns a reader needs first, kept in this order while the table fits 120 columns.
PRIORITY = ("currency", "cost", "allocated_gpu_hours", "used_gpu_hours", "idle_cost", "idle_gpu_hours",
            "unmeasured_gpu_hours", "unallocated_gpu_hours", "unallocated_cost", "list_cost", "co2e_kg")


def _carbon_known(rows: list[dict[str, Any]], headers: list[str]) -> bool:
    """Whether any row knows a CO2e figure: without an ``emissions:`` section none does, and a column that
    can only say ``unknown`` is left out of tables (JSON and CSV keep every field)."""
    return any(r.get(h) is not None for r in rows for h in headers if h.endswith("co2e_kg"))


def render(rows: list[dict[str, Any]], fmt: str, *, wide: bool = False) -> str:
    """Rows as ``json``, ``csv`` or an aligned text ``table`` (120 columns unless ``wide``); ``ReportError`` for
    another format."""
    if fmt == "json":
        return to_json([{k: v if isinstance(v, Decimal) else _round(v) for k, v in r.items()} for r in rows],
                       indent=2) + "\n"
    if not rows:
        return "" if fmt == "csv" else "(no usage booked in this window)\n"
    headers = list(rows[0].keys())
    for r in rows[1:]:
        headers += [k for k in r if k not in headers]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=headers, lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: _round(v) for k, v in r.items()})
        return buf.getvalue()
    if fmt != "table":
        raise ReportError(f"unknown --format {fmt!r}: use table, json or csv")
    if not _carbon_known(rows, headers):
        headers = [h for h in headers if not h.endswith(("co2e_kg", "unmeasured_energy_gpu_hours"))]
    cells = [[_cell(r.get(h, "")) for h in headers] for r in rows]
    return Table(headers, cells, keep=[h for h in headers if h in GROUP_COLUMNS], priority=PRIORITY).render(wide=wide)
