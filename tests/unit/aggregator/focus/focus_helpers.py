"""Shared by the FOCUS tests: a ledger written through the real ``Ledger``, the CSV read back, and the
FOCUS 1.3 rules the validator cannot check offline (split allocation, provider columns, SKU price ids,
cost = unit price x quantity to the 9th digit) and the exact reconciliation with ``report``."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from pathlib import Path
from typing import Any

from exporter.aggregator.ledger.fixed import to_db
from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.model.books import CapacityAmounts, CapacityKey, CommitmentKey, UsageAmounts, UsageKey
from exporter.model.exact import exact

CURRENCY = "USD"
CLUSTER = "prod-eu1"  # the cluster the hand-built ledgers book for (the export's SubAccountId)


@dataclass(frozen=True)
class UsageRow:
    """One usage row to write into a hand-built ledger."""

    hour: int
    node: str
    namespace: str
    pod: str
    allocated_s: float
    used_s: float
    idle_s: float
    cost: float
    idle_cost: float
    pool: str = "h100-pool"
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    workload: str = "trainer"
    mig_profile: str = ""
    priority_class: str = ""
    unmeasured_s: float = 0.0
    energy_j: float = 0.0
    list_cost: float | None = None  # None: the effective cost (no discount)
    scheduler: str = ""
    queue: str = ""


@dataclass(frozen=True)
class CapacityRow:
    """One unallocated row to write into a hand-built ledger."""

    hour: int
    node: str
    seconds: float
    cost: float
    pool: str = "h100-pool"
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    list_cost: float | None = None  # None: the effective cost (no discount)


@dataclass(frozen=True)
class UnusedRow:
    """One hour of a commitment's unused part (list cost 0: no GPU-hour was had for it)."""

    hour: int
    commitment: str
    seconds: float
    cost: float
    gpu_model: str = "NVIDIA H100 80GB HBM3"


def write_ledger(path: Path | str, usage: list[UsageRow], unallocated: list[CapacityRow],
                 unobserved: list[CapacityRow] | None = None, *, cluster: str = CLUSTER,
                 unused: list[UnusedRow] | None = None, teams: dict[tuple[int, str], str] | None = None,
                 password_file: Path | None = None) -> None:
    """Through the real Ledger (its schema, its transaction), as booking writes it; ``path`` a SQLite file or a
    PostgreSQL URL."""
    w = TickWrite()
    for u in usage:
        key = UsageKey(u.hour, u.namespace, u.pod, u.workload, u.node, u.pool, u.gpu_model, u.mig_profile,
                       u.priority_class, CURRENCY, scheduler=u.scheduler, queue=u.queue)
        w.usage[key] = UsageAmounts(allocated_s=exact(u.allocated_s), used_s=exact(u.used_s),
            unmeasured_s=exact(u.unmeasured_s),
                                    idle_s=exact(u.idle_s), cost=exact(u.cost), idle_cost=exact(u.idle_cost),
                                        energy_j=exact(u.energy_j),
                                    list_cost=exact(u.cost if u.list_cost is None else u.list_cost))
    for table, rows in ((w.unallocated, unallocated), (w.unobserved, unobserved or [])):
        for c in rows:
            table[CapacityKey(c.hour, c.node, c.pool, c.gpu_model, CURRENCY)] = CapacityAmounts(
                seconds=exact(c.seconds), cost=exact(c.cost),
                    list_cost=exact(c.cost if c.list_cost is None else c.list_cost))
    for x in unused or []:
        w.unused_commitment[CommitmentKey(x.hour, x.commitment, x.gpu_model, CURRENCY)] = CapacityAmounts(
            seconds=exact(x.seconds), cost=exact(x.cost), list_cost=exact(0.0))
    w.namespace_teams.update(teams or {})

    async def commit() -> None:
        ledger = Ledger(path, cluster=cluster, password_file=password_file)
        await ledger.open()
        await ledger.commit(w)
        await ledger.close()

    asyncio.run(commit())


def add_unobserved(path: Path, rows: list[CapacityRow], *, cluster: str = CLUSTER) -> None:
    """Capacity nobody could observe, booked into an existing ledger (the ``unobserved`` table)."""
    conn = sqlite3.connect(path)
    conn.executemany("INSERT INTO unobserved (cluster, hour, node, pool, gpu_model, currency, seconds, cost, "
                     "list_cost) VALUES (?,?,?,?,?,?,?,?,?)",
                     [(cluster, c.hour, c.node, c.pool, c.gpu_model, CURRENCY, *(
                         to_db(v, column=n, places=9) for n, v in (("seconds", c.seconds), ("cost", c.cost),
                                                                   ("list_cost", c.cost))))
                      for c in rows])  # amounts in the ledger's integer nano-units
    conn.commit()
    conn.close()


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def dec(text: str) -> Decimal:
    assert text != "", "expected a number, got null"
    return Decimal(text)


NANO = Decimal("1e-9")


def as_decimal(value: float | Decimal | int) -> Decimal:
    """A number as the report hands it: a float by its shortest repr, a Decimal as it is."""
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def to_nano(value: Decimal) -> Decimal:
    """Rounded half-even to 9 fractional digits, in a context wide enough that nothing is rounded before."""
    with localcontext(prec=80):
        return value.quantize(NANO, rounding=ROUND_HALF_EVEN)


def times(price: Decimal, quantity: Decimal) -> Decimal:
    """``price x quantity`` as a checker computes it: the exact product rounded half-even to 9 digits."""
    with localcontext(prec=80):
        return to_nano(price * quantity)


def report_total(ledger: Path, since: float | None = None, until: float | None = None) -> Decimal:
    """``report``'s total cost over all its rows, incl. __unallocated__ (and unobserved capacity), as the exact
    sum of its rows' decimals, rounded to the 9 digits the report writes (a no-op on an exact ledger's)."""
    conn = sqlite3.connect(ledger)

    def query(sql: str, p: Iterable[Any]) -> list[tuple[Any, ...]]:
        return decoded_rows(conn.execute(sql, tuple(p)))  # amounts as decimals

    rows = build_report(query, "namespace", since=since, until=until)
    with localcontext(prec=80):
        total = sum((as_decimal(r["cost"]) for r in rows), Decimal(0))
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "unobserved" in tables and not any(r["namespace"] == "__unobserved__" for r in rows):
        # report does not list unobserved capacity yet: add it as report would
        where: list[str] = []
        params: list[float] = []
        if since is not None:
            where.append("hour >= ?")
            params.append(int(since // 3600) * 3600)
        if until is not None:
            where.append("hour < ?")
            params.append(until)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with localcontext(prec=80):
            total += as_decimal(query(f"SELECT COALESCE(SUM(cost), 0) FROM unobserved {clause}", params)[0][0])
    conn.close()
    return to_nano(total)


def assert_reconciles(rows: list[dict[str, str]], ledger: Path, since: float | None = None,
                      until: float | None = None) -> None:
    """Σ EffectiveCost = report's total exactly, and Σ ratios of every origin charge = 1 exactly."""
    exported = sum((dec(r["EffectiveCost"]) for r in rows), Decimal(0))
    expected = report_total(ledger, since, until)
    assert exported == expected, (exported, expected)
    ratios: dict[tuple[str, str, str, str, str], Decimal] = defaultdict(Decimal)
    for r in rows:
        if r["CommitmentDiscountStatus"] == "Unused":  # a charge of its own, not split from a node
            assert r["AllocatedMethodDetails"] == "", r
            continue
        origin = (r["ChargePeriodStart"], r["ResourceId"], r["x_NodePool"], r["x_GpuModel"], r["BillingCurrency"])
        for element in json.loads(r["AllocatedMethodDetails"], parse_float=Decimal)["Elements"]:
            ratios[origin] += element["AllocatedRatio"]
    assert ratios and all(v == 1 for v in ratios.values()), ratios


def assert_focus13_rules(rows: list[dict[str, str]]) -> None:
    """The 1.3 rules the offline validator cannot run (its 1.3 model is fetched from the network)."""
    assert rows
    for r in rows:
        if r["CommitmentDiscountStatus"] == "Unused":
            _assert_unused_commitment(r)
            continue
        # provider columns (1.3): mandatory, non-null; the deprecated ones still present
        for col in ("ServiceProviderName", "HostProviderName", "ProviderName", "PublisherName", "InvoiceIssuerName"):
            assert r[col], col
        # no commitment known on a node's charge (the ledger books the blended rate, not the coverage)
        for col in ("CommitmentDiscountId", "CommitmentDiscountStatus", "CommitmentDiscountQuantity"):
            assert r[col] == "", col
        # split allocation: method id always; resource id null exactly for the unallocated portion
        assert r["AllocatedMethodId"]
        capacity = r["x_CapacityState"] in ("Unallocated", "Unobserved")
        assert (r["AllocatedResourceId"] == "") == capacity
        assert (r["AllocatedResourceName"] == "") == (r["AllocatedResourceId"] == "")
        assert (r["AllocatedTags"] == "") == capacity
        if r["AllocatedTags"]:
            tags = json.loads(r["AllocatedTags"])
            assert all(k.startswith("gpu-cost-exporter/") for k in tags)
            assert not set(tags) & set(json.loads(r["Tags"] or "{}"))
        details = json.loads(r["AllocatedMethodDetails"], parse_float=Decimal)
        assert set(details) == {"Elements"} and len(details["Elements"]) == 1
        element = details["Elements"][0]
        assert isinstance(element["AllocatedRatio"], Decimal | int)
        assert "UsageQuantity" not in element or element["UsageUnit"] == "GPU-Hours"
        # usage rows carry a SkuPriceId; quantities and unit prices are null exactly when it is
        assert r["ChargeCategory"] == "Usage" and r["SkuPriceId"] and r["SkuId"]
        assert r["SkuPriceId"].startswith(r["SkuId"] + "-")
        for col in ("ConsumedQuantity", "PricingQuantity", "PricingCategory", "ListUnitPrice", "ContractedUnitPrice"):
            assert r[col] != "", col
        # cost = unit price x pricing quantity, unconditionally in 1.3: exactly, to the 9th digit
        assert_products(r)


def _assert_unused_commitment(r: dict[str, str]) -> None:
    """FOCUS DiscountHandling: an unused commitment is a Usage row with status Unused and no consumed quantity;
    it is not split from an origin charge (no Allocated* values) and no resource carries it."""
    assert r["ChargeCategory"] == "Usage" and r["x_CapacityState"] == "UnusedCommitment"
    assert r["CommitmentDiscountId"] and r["CommitmentDiscountName"] and r["CommitmentDiscountType"]
    assert r["CommitmentDiscountCategory"] == "Usage" and r["CommitmentDiscountUnit"] == "GPU-Hours"
    assert r["ConsumedQuantity"] == r["ConsumedUnit"] == ""
    for col in ("AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName",
                "AllocatedTags", "ResourceId", "ResourceType"):
        assert r[col] == "", col
    assert r["SkuPriceId"].startswith(r["SkuId"] + "-") and r["PricingCategory"] == "Committed"
    assert dec(r["CommitmentDiscountQuantity"]) == dec(r["PricingQuantity"])
    # the quantity is the seconds / 3600 rounded half-even to 9 digits
    assert dec(r["PricingQuantity"]) == to_nano(dec(r["x_UnusedCommitmentGpuSeconds"]) / 3600)
    assert_products(r)


def assert_products(r: dict[str, str]) -> None:
    """ListCost = ListUnitPrice x PricingQuantity and ContractedCost = ContractedUnitPrice x PricingQuantity,
    recomputed exactly and rounded half-even to 9 digits, equal to the digit."""
    qty = dec(r["PricingQuantity"])
    for cost_col, price_col in (("ListCost", "ListUnitPrice"), ("ContractedCost", "ContractedUnitPrice")):
        assert dec(r[cost_col]) == times(dec(r[price_col]), qty), (r, cost_col)


DATETIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
DECIMAL = re.compile(r"^-?\d+\.\d{1,9}$")  # at most 9 fractional digits, never an exponent


def assert_formats(rows: list[dict[str, str]], version: str = "1.3") -> None:
    """Strict FOCUS formats (the validator reads typed CSV columns leniently): UTC ``...Z`` date-times, decimals
    with a point, at most 9 fractional digits and no exponent (the allocation's ratio and quantity too), JSON
    objects in the key-value columns, and no empty strings but nulls."""
    from exporter.aggregator.focus.columns import ColumnType, columns_for

    for column in columns_for(version):
        for r in rows:
            value = r[column.name]
            if value == "":
                continue
            if column.type is ColumnType.DATETIME:
                assert DATETIME.match(value), (column.name, value)
            elif column.type is ColumnType.DECIMAL:
                assert DECIMAL.match(value), (column.name, value)
            elif column.type is ColumnType.JSON:
                assert isinstance(json.loads(value), dict), (column.name, value)
    for r in rows:
        if r.get("AllocatedMethodDetails"):
            element = json.loads(r["AllocatedMethodDetails"], parse_float=str)["Elements"][0]
            assert DECIMAL.match(element["UsageQuantity"]), element
            assert dec(element["UsageQuantity"]) == dec(r["PricingQuantity"]), element
