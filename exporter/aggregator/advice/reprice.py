"""What-if: the GPU-hours already in the ledger priced by another pricing document, never written.

``gpu-cost-exporter report --reprice FILE`` answers "what would last month have cost under the new
contract?": every ledger row keeps its hour, node, pool, GPU model, MIG profile, GPU-seconds and
energy, and the node's billing facts (instance type, capacity type) are kept in ``node_billing``; the
other document prices exactly those, hour by hour, with its commitments evaluated per hour over the
GPU-seconds present (the hourly rule of docs/pricing.md). Booked costs are never changed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from exporter.aggregator.ledger.report import (
    CAPACITY_GROUPS,
    CAPACITY_ROWS,
    CAPACITY_TABLES,
    DERIVED,
    GROUPS,
    UNUSED_COMMITMENT,
    Query,
    ReportError,
    blank_row,
    unused_key,
    window,
)
from exporter.model.named_rows import Select
from exporter.model.pricing.commitments import CommitmentHour, EligibleSeconds, commitment_hour
from exporter.model.pricing.document import Pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts
from exporter.model.pricing.resolve import GpuRate

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class RawRow:
    """One ledger row reduced to what prices it: where it goes in the report, and its GPU time."""

    key: tuple[Any, ...]
    column: str  # "cost" for held time (and capacity rows of their own), else e.g. "unallocated_cost"
    hour: int
    facts: NodeFacts
    mig_profile: str | None
    gpu_seconds: float
    energy_j: float


def _facts(billing: dict[str, tuple[str, str]], node: str, *, model: str, pool: str) -> NodeFacts:
    instance_type, capacity_type = billing.get(node, ("", CapacityType.ON_DEMAND.value))
    return NodeFacts(node, model, instance_type or None, CapacityType(capacity_type), pool or None)


def _raw_rows(query: Query, by: str, *, clause: str, params: list[Any]) -> list[RawRow]:
    cols = GROUPS[by]
    col_sql = ", ".join(cols)
    billing = {node: (itype, ctype) for node, itype, ctype in
               query("SELECT node, instance_type, capacity_type FROM node_billing", [])}
    out = []
    where = ("hour", "node", "pool", "gpu_model")
    keys = {f"by_{c}": c for c in cols}  # the report's group columns, named apart from the pricing columns
    usage = Select.of((*keys, "currency", *where, "mig_profile", "seconds", "energy_j"),
                      seconds="SUM(allocated_s)", energy_j="SUM(energy_j)", **keys)
    key_of = usage.getter(*keys, "currency")
    for r in query(f"SELECT {usage.sql()} FROM usage {clause} GROUP BY {col_sql}, currency, "
                   f"{', '.join(where)}, mig_profile", params):
        m = usage.mapping(r)
        facts = _facts(billing, m["node"], model=m["gpu_model"], pool=m["pool"])
        out.append(RawRow(key_of(r), "cost", int(m["hour"]), facts,
                          m["mig_profile"] or None, float(m["seconds"]), float(m["energy_j"])))
    group = CAPACITY_GROUPS.get(by)
    capacity = Select.of(("value", "currency", *where, "seconds", "energy_j"), value=group or "currency",
                         seconds="SUM(seconds)", energy_j="SUM(energy_j)")
    for table, name in CAPACITY_TABLES:
        for r in query(f"SELECT {capacity.sql()} FROM {table} {clause} GROUP BY {group or 'currency'}, currency, "
                       f"{', '.join(where)}", params):
            m = capacity.mapping(r)
            key, column = ((m["value"], m["currency"]), f"{name.strip('_')}_cost") if group else (
                (name,) * len(cols) + (m["currency"],), "cost")
            facts = _facts(billing, m["node"], model=m["gpu_model"], pool=m["pool"])
            out.append(RawRow(key, column, int(m["hour"]), facts,
                              None, float(m["seconds"]), float(m["energy_j"])))
    return out


def _hours(pricing: Pricing, raw: Iterable[RawRow]) -> dict[int, CommitmentHour]:
    """Each hour's commitments against the GPU-seconds in that hour that could take them."""
    eligible: dict[int, dict[tuple[str, str], float]] = defaultdict(lambda: defaultdict(float))
    for row in raw:
        rate = pricing.book.at(row.hour).rate(row.facts, row.mig_profile)
        if rate.commitment_model is not None:
            eligible[row.hour][(rate.commitment_model, row.facts.pool or "")] += row.gpu_seconds
    return {hour: commitment_hour(pricing.book.at(hour), hour_start=hour, eligible=[
        EligibleSeconds(model, pool, seconds) for (model, pool), seconds in table.items()])
        for hour, table in eligible.items()}


def reprice(query: Query, rows: list[dict[str, Any]], *, by: str, since: float | None, until: float | None,
            pricing: Pricing, cluster: str | None = None) -> list[dict[str, Any]]:
    """``rows`` (from ``build_report``) with ``reprice_cost`` and ``reprice_list_cost`` (and, grouped by
    node, pool or model, ``reprice_unallocated_cost`` / ``reprice_unobserved_cost``) under ``pricing``."""
    if any(c in DERIVED for c in GROUPS[by]):
        raise ReportError(f"--reprice does not group by {by} (derived from the model): use --by model")
    clause, params = window(by, since=since, until=until, cluster=cluster)
    cols = GROUPS[by]
    by_key = {tuple(r[c] for c in cols) + ((r["commitment"],) if "commitment" in r else ()) + (r["currency"],): r
              for r in rows}
    raw = _raw_rows(query, by, clause=clause, params=params)
    hours = _hours(pricing, raw)
    hours.update({h: commitment_hour(pricing.book.at(h), hour_start=h, eligible=[])
                  for h in {row.hour for row in raw} if h not in hours})
    for row in raw:
        rate: GpuRate = hours[row.hour].apply(pricing.book.at(row.hour).rate(row.facts, row.mig_profile))
        cost = row.gpu_seconds / SECONDS_PER_HOUR * rate.effective_per_gpu_hour
        if rate.energy is not None:
            cost += rate.energy.cost(row.energy_j)
        target = by_key.get(row.key)
        if target is None:
            continue  # a row outside the report (cannot happen: same window, same tables)
        target[f"reprice_{row.column}"] = target.get(f"reprice_{row.column}", 0.0) + cost
        if row.column == "cost":
            target["reprice_list_cost"] = target.get("reprice_list_cost", 0.0) + (
                row.gpu_seconds / SECONDS_PER_HOUR * rate.list_per_gpu_hour)
    for hour in sorted(hours.values(), key=lambda h: h.hour_start):
        for unused in hour.unused:
            key = unused_key(by, unused.name, currency=pricing.currency)
            target = by_key.get(key)
            if target is None:
                target = by_key[key] = {**blank_row(by, UNUSED_COMMITMENT, currency=pricing.currency),
                                        "commitment": unused.name}
            target["reprice_cost"] = target.get("reprice_cost", 0.0) + unused.cost
    for r in by_key.values():
        r.setdefault("reprice_cost", 0.0)
        r.setdefault("reprice_list_cost", 0.0)
        if by in CAPACITY_GROUPS:
            for _table, name in CAPACITY_TABLES:
                r.setdefault(f"{name.strip('_')}_gpu_hours", 0.0)
                r.setdefault(f"{name.strip('_')}_cost", 0.0)
                r.setdefault(f"{name.strip('_')}_list_cost", 0.0)
                r.setdefault(f"reprice_{name.strip('_')}_cost", 0.0)
    return sorted(by_key.values(), key=lambda r: (r[cols[0]] in CAPACITY_ROWS, -r["cost"], str(r[cols[0]])))
