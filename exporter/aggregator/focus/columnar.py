"""One hour of FOCUS rows as columns, from the ledger's integer units: the export's fast path.

The rows are the ones ``rows.hour_rows`` makes (same order, same values; the golden files in
``tests/fixtures/focus`` hold both to the same bytes), computed differently: amounts are read as integer
nano-units (SQLite's stored integers; PostgreSQL's NUMERIC scaled in SQL), the per-row arithmetic that
cannot be done column-wise without 128-bit integers (an origin's ratios, the recovered unit prices, the
extended costs) is plain ``int`` arithmetic, rounded half-even in ``half_even``, and every text -- ids, JSON
cells, descriptions, decimals -- is assembled by Arrow kernels over whole columns (``cells``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import groupby
from operator import attrgetter
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from exporter.aggregator.focus.cells import RATIO_SCALE, Fixed, Frame, decimal_text
from exporter.aggregator.focus.format import json_object, month_bounds
from exporter.aggregator.focus.ledger_source import LedgerLayout, list_cost_sql
from exporter.aggregator.focus.rate_card import PRICING_UNIT, SKU_METER, sku_id
from exporter.aggregator.focus.rows import METHOD_ID, TAG_PREFIX, FocusSettings
from exporter.aggregator.ledger.report import Query

NANO = 10**9
RATIO_ONE = 10**RATIO_SCALE
TOLERANCE = 9  # price_point's 9e-7 per GPU-hour, as 9 x 10^-7
_USAGE = ("namespace", "pod", "workload", "node", "pool", "gpu_model", "mig_profile", "priority_class", "currency")
_USAGE_AMOUNTS = ("allocated_s", "used_s", "unmeasured_s", "idle_s", "cost", "list_cost", "idle_cost", "energy_j",
                  "co2e_g", "co2e_s")
_CAPACITY = ("node", "pool", "gpu_model", "currency")
_CAPACITY_AMOUNTS = ("seconds", "cost", "list_cost", "co2e_g", "co2e_s")
_PLACES = {"energy_j": 3}  # every other amount: 9


class NotIntegerUnits(Exception):
    """The ledger's amounts are not integer units (a SQLite file from before exact amounts): use the rows path."""


def half_even(a: int, b: int) -> int:
    """``a / b`` (b > 0) rounded half-even to an integer: the one rounding of this module."""
    q, r = divmod(a, b)
    twice = 2 * r
    return q + 1 if twice > b or (twice == b and q & 1) else q


@lru_cache(maxsize=65536)
def price_point(cost: int, seconds: int) -> int | None:
    """``amounts.price_point`` of cost / GPU-hours, both in nano-units, as nano-units of price: the shortest
    decimal of 0 to 6 fractional digits within 9e-7 of the exact quotient, else the quotient to 9 digits.
    None when no time was booked. The quotient is the exact rational ``cost x 3600 / seconds``."""
    if seconds <= 0:
        return None
    numerator = cost * 3600
    for k in range(7):
        step: int = 10**k
        scaled = numerator * step
        m = half_even(scaled, seconds)
        if abs(m * seconds - scaled) * 10**7 <= TOLERANCE * seconds * step:
            return m * (NANO // step)
    return half_even(numerator * NANO, seconds)


def _units_sql(column: str, *, dialect: str, places: int = 9, present: bool = True) -> str:
    if not present:
        return "0"
    return column if dialect == "sqlite" else f"CAST({column} * {10**places} AS BIGINT)"


def _select(names: Sequence[str], amounts: Sequence[str], *, table: str, layout: LedgerLayout, dialect: str) -> str:
    exprs = list(names)
    for a in amounts:
        source = list_cost_sql(layout, table) if a == "list_cost" else a
        present = layout.carbon or a not in ("co2e_g", "co2e_s")
        exprs.append(_units_sql(source, dialect=dialect, places=_PLACES.get(a, 9), present=present) + f" AS u_{a}")
    return ", ".join(exprs)


class Record(NamedTuple):
    """One usage or capacity row of the ledger, amounts in nano-units (energy: nano-joules)."""

    kind: str  # "Allocated" (a holder) or the capacity state
    node: str
    pool: str
    gpu_model: str
    currency: str
    namespace: str | None
    pod: str | None
    workload: str | None
    mig_profile: str
    priority_class: str | None
    seconds: int
    used_s: int
    unmeasured_s: int
    idle_s: int
    cost: int
    list_cost: int
    idle_cost: int
    energy: int | None
    co2e_g: int
    co2e_s: int
    hour: int


class Priced(NamedTuple):
    """A record's computed amounts (nano-units; ``ratio`` in 1e-12)."""

    co2e_kg: int | None
    hours: int
    ratio: int
    list_price: int | None
    contracted: int | None
    list_cost: int
    contracted_cost: int


def _ints(values: Sequence[Any]) -> None:
    for v in values:
        if type(v) is not int:
            raise NotIntegerUnits(f"amount {v!r} is not in integer units")


_USAGE_ORDER = attrgetter("node", "pool", "gpu_model", "currency", "namespace", "pod", "mig_profile", "workload",
                          "priority_class")
_ORIGIN = attrgetter("hour", "node", "pool", "gpu_model", "currency")


def read_hour(query: Query, layout: LedgerLayout, *, hour: int, dialect: str) -> list[Record]:
    """The hour's usage and capacity rows in export order (``rows.hour_rows``'s)."""
    scope, scope_params = layout.scope()
    usage = query(f"SELECT {_select(_USAGE, _USAGE_AMOUNTS, table='usage', layout=layout, dialect=dialect)} "
                  f"FROM usage WHERE hour = ?{scope}", (hour, *scope_params))
    held: list[Record] = []
    for (namespace, pod, workload, node, pool, model, mig, priority, currency, allocated, used, unmeasured, idle,
         cost, list_cost, idle_cost, energy_mj, co2e_g, co2e_s) in usage:
        _ints((allocated, used, unmeasured, idle, cost, list_cost, idle_cost, energy_mj, co2e_g, co2e_s))
        held.append(Record("Allocated", node, pool, model, currency, namespace, pod, workload, mig, priority,
                           allocated, used, unmeasured, idle, cost, list_cost, idle_cost, energy_mj * 10**6, co2e_g,
                           co2e_s, hour))
    records = sorted(held, key=_USAGE_ORDER)
    for cap in layout.capacity:
        free: list[Record] = []
        for node, pool, model, currency, seconds, cost, list_cost, co2e_g, co2e_s in query(
                f"SELECT {_select(_CAPACITY, _CAPACITY_AMOUNTS, table=cap.table, layout=layout, dialect=dialect)}"
                f" FROM {cap.table} WHERE hour = ?{scope}", (hour, *scope_params)):
            _ints((seconds, cost, list_cost, co2e_g, co2e_s))
            free.append(Record(cap.state, node, pool, model, currency, None, None, None, "", None, seconds, 0, 0, 0,
                               cost, list_cost, 0, None, co2e_g, co2e_s, hour))
        records += sorted(free, key=_ORIGIN)
    # origins in order, holders before the capacity of the same origin (stable: each part keeps its order)
    records.sort(key=lambda r: (r.node, r.pool, r.gpu_model, r.currency, r.kind != "Allocated"))
    return records


def _origin(records: Sequence[Record]) -> list[tuple[Record, Priced]]:
    """Ratios, quantities, prices and extended costs of one origin's rows (``rows.origin_rows``, in ints)."""
    costs = [r.cost for r in records]
    basis = costs if sum(costs) > 0 else [r.seconds for r in records]
    total = sum(basis)
    if total <= 0:
        basis = [1 for _ in records]  # neither cost nor time: equal shares
        total = len(basis)
    ratios = [b * RATIO_ONE // total for b in basis]  # rounded down: the remainder is never negative
    largest = ratios.index(max(ratios))
    ratios[largest] += RATIO_ONE - sum(ratios)
    prices = [price_point(r.list_cost, r.seconds) for r in records]
    fallback = next((p for p in prices if p is not None), None)
    out = []
    for r, ratio, price in zip(records, ratios, prices, strict=True):
        hours = half_even(r.seconds, 3600)
        list_price = price if price is not None else (fallback if r.mig_profile == "" else None)
        booked = price_point(r.cost, r.seconds)
        contracted = booked if booked is not None else list_price
        if list_price is None or contracted is None:
            list_cost, contracted_cost = r.list_cost, r.cost
        else:
            list_cost, contracted_cost = half_even(list_price * hours, NANO), half_even(contracted * hours, NANO)
        co2e = half_even(r.co2e_g, 1000) if r.co2e_s > 0 else None
        out.append((r, Priced(co2e, hours, ratio, list_price, contracted, list_cost, contracted_cost)))
    return out


def _json_strings(values: pa.Array) -> pa.Array:
    """Each string as a JSON string literal (``json.dumps``, ``ensure_ascii=False``)."""
    special = pc.match_substring_regex(values, r'["\\\x00-\x1f]')
    plain = pc.binary_join_element_wise('"', values, '"', "")
    if not pc.any(special).as_py():
        return plain
    encoded = pa.array([None if v is None else json_object({"": v})[4:-1] for v in values.to_pylist()], pa.string())
    return pc.if_else(special, encoded, plain)


def _cached(keys: Sequence[Any], make: Any) -> pa.Array:
    cache: dict[Any, Any] = {}
    out = []
    for k in keys:
        v = cache.get(k, cache)
        if v is cache:
            v = cache[k] = make(k)
        out.append(v)
    return pa.array(out, pa.string())


def _join(*parts: Any) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def hours_frame(records: Sequence[Record], s: FocusSettings, *,
                teams: Mapping[tuple[int, str], str]) -> tuple[Frame, int]:
    """The FOCUS columns of the usage and capacity rows of one or more hours (``read_hour``, hour after hour);
    ``teams`` each (hour, namespace)'s team; the number of rows."""
    rows: list[tuple[Record, Priced]] = []
    for _key, group in groupby(records, key=_ORIGIN):
        rows += _origin(list(group))
    n = len(rows)
    if n == 0:
        return {}, 0
    held, priced_rows = zip(*rows, strict=True)
    (kind, node, pool, model, currency, ns, pod, workload, mig, priority, seconds, used, unmeasured, idle, cost,
     _list, idle_cost, energy, _co2e_g, _co2e_s, hour) = zip(*held, strict=True)
    co2e, hours, ratio, list_price, contracted, list_cost, contracted_cost = zip(*priced_rows, strict=True)
    i64, txt = pa.int64(), pa.string()
    a_kind, a_node, a_model = pa.array(kind, txt), pa.array(node, txt), pa.array(model, txt)
    a_ns, a_pod, a_mig = pa.array(ns, txt), pa.array(pod, txt), pa.array(mig, txt)
    a_pool, a_currency = pa.array(pool, txt), pa.array(currency, txt)
    usage = pc.equal(a_kind, "Allocated")
    a_hours, a_list_price = pa.array(hours, i64), pa.array(list_price, i64)
    priced = pc.is_valid(a_list_price)
    hours_text = decimal_text(a_hours)
    sku = _cached(list(zip(model, mig, pool, strict=True)), lambda k: sku_id(k[0], k[1], pool=k[2]))
    price_text = decimal_text(a_list_price)
    team = [teams.get((h, x)) if k == "Allocated" else None for k, x, h in zip(kind, ns, hour, strict=True)]
    zero, null_text = Fixed(0), pa.nulls(n, txt)
    a_hour = pa.array(hour, i64)
    bounds = [month_bounds(h) for h in hour]  # cached
    host = s.host_provider or s.provider
    billed_zero = s.billed_cost == "zero"
    effective = pa.array(cost, i64)
    pod_tags = _join('{"', TAG_PREFIX, 'namespace":', _json_strings(a_ns), ',"', TAG_PREFIX, 'workload":',
                     _json_strings(pa.array(workload, txt)), ',"', TAG_PREFIX, 'pod":', _json_strings(a_pod),
                     _optional_tag("priority-class", pa.array(priority, txt)),
                     _optional_tag("team", pa.array(team, txt)), "}")
    what = pc.if_else(pc.equal(a_mig, ""), a_model, _join(a_model, ", MIG ", a_mig))
    frame: Frame = {
        "BilledCost": zero if billed_zero else effective, "BillingAccountId": Fixed(s.billing_account),
        "BillingAccountName": Fixed(s.provider), "BillingAccountType": Fixed("Internal Chargeback"),
        "BillingCurrency": a_currency, "BillingPeriodStart": pa.array([b[0] for b in bounds], i64),
        "BillingPeriodEnd": pa.array([b[1] for b in bounds], i64),
        "ChargeCategory": Fixed("Usage"), "ChargeFrequency": Fixed("Usage-Based"),
        "ChargePeriodStart": a_hour, "ChargePeriodEnd": pc.add(a_hour, 3600), "EffectiveCost": effective,
        "HostProviderName": Fixed(host), "InvoiceIssuerName": Fixed(host if billed_zero else s.provider),
        "PricingCategory": Fixed("Standard"), "ProviderName": Fixed(s.provider), "PublisherName": Fixed(s.provider),
        "ServiceProviderName": Fixed(s.provider), "ResourceId": _join(f"k8s://{s.cluster}/nodes/", a_node),
        "ResourceName": a_node, "ResourceType": Fixed("Kubernetes Node"), "ServiceCategory": Fixed("Compute"),
        "ServiceName": Fixed("Kubernetes GPU Compute"), "ServiceSubcategory": Fixed("Containers"),
        "SubAccountId": Fixed(s.cluster), "SubAccountName": Fixed(s.cluster),
        "SubAccountType": Fixed("Kubernetes Cluster"), "AllocatedMethodId": Fixed(METHOD_ID),
        # priced: quantities, unit prices, the SKU
        "ConsumedQuantity": pc.if_else(priced, a_hours, pa.nulls(n, i64)),
        "ConsumedUnit": pc.if_else(priced, PRICING_UNIT, null_text),
        "PricingQuantity": pc.if_else(priced, a_hours, pa.nulls(n, i64)),
        "PricingUnit": pc.if_else(priced, PRICING_UNIT, null_text),
        "ListUnitPrice": a_list_price,
        "ContractedUnitPrice": pc.if_else(priced, pa.array(contracted, i64), pa.nulls(n, i64)),
        "ListCost": pa.array(list_cost, i64), "ContractedCost": pa.array(contracted_cost, i64),
        "SkuId": sku, "SkuMeter": Fixed(SKU_METER),
        "SkuPriceId": _join(sku, "-", pc.utf8_lower(a_currency), "-", price_text),
        "SkuPriceDetails": pc.if_else(priced, _cached(list(zip(model, mig, pool, strict=True)), _price_details),
                                      null_text),
        "Tags": _cached(pool, _pool_tags),
        "AllocatedMethodDetails": _join('{"Elements":[{"AllocatedRatio":',
                                        decimal_text(pa.array(ratio, i64), scale=RATIO_SCALE),
                                        f',"UsageUnit":"{PRICING_UNIT}","UsageQuantity":', hours_text, "}]}"),
        "x_NodePool": pc.if_else(pc.equal(a_pool, ""), null_text, a_pool), "x_GpuModel": a_model,
        "x_MigProfile": pc.if_else(pc.equal(a_mig, ""), null_text, a_mig),
        # the holder's or the capacity's own columns
        "ChargeDescription": pc.if_else(
            usage, _join("GPU time of pod ", a_ns, "/", a_pod, " on node ", a_node, " (", what, ")"),
            _join(a_kind, " GPU capacity on node ", a_node, " (", a_model, ")")),
        "AllocatedResourceId": pc.if_else(usage, _join(f"k8s://{s.cluster}/namespaces/", a_ns, "/pods/", a_pod),
                                          null_text),
        "AllocatedResourceName": a_pod, "AllocatedTags": pc.if_else(usage, pod_tags, null_text),
        "x_CapacityState": a_kind, "x_Namespace": a_ns, "x_Team": pa.array(team, txt),
        "x_WorkloadName": pa.array(workload, txt),
        "x_PodName": a_pod, "x_PriorityClass": pc.if_else(pc.equal(pa.array(priority, txt), ""), null_text,
                                                         pa.array(priority, txt)),
        "x_AllocatedGpuSeconds": pc.if_else(usage, pa.array(seconds, i64), 0), "x_UsedGpuSeconds": pa.array(used, i64),
        "x_IdleGpuSeconds": pa.array(idle, i64), "x_UnmeasuredGpuSeconds": pa.array(unmeasured, i64),
        "x_UnallocatedGpuSeconds": _state_seconds(a_kind, "Unallocated", seconds=seconds),
        "x_UnobservedGpuSeconds": _state_seconds(a_kind, "Unobserved", seconds=seconds),
        "x_UnusedCommitmentGpuSeconds": zero, "x_IdleCost": pa.array(idle_cost, i64),
        "x_EnergyJoules": pa.array(energy, i64), "x_Co2eKg": pa.array(co2e, i64),
    }
    return frame, n


def _optional_tag(name: str, values: pa.Array) -> pa.Array:
    """``,"<prefix><name>":<value>`` where the value is set (not null, not empty), else nothing."""
    given = pc.and_kleene(pc.is_valid(values), pc.not_equal(pc.fill_null(values, ""), ""))
    tag = _join(f',"{TAG_PREFIX}{name}":', _json_strings(pc.fill_null(values, "")))
    return pc.if_else(given, tag, "")


def _state_seconds(kind: pa.Array, state: str, *, seconds: Sequence[int]) -> pa.Array:
    return pc.if_else(pc.equal(kind, state), pa.array(seconds, pa.int64()), 0)


def _price_details(key: tuple[str, str, str]) -> str:
    model, mig, pool = key
    return json_object({k: v for k, v in (("x_GpuModel", model), ("x_MigProfile", mig), ("x_NodePool", pool)) if v})


def _pool_tags(pool: str) -> str | None:
    return json_object({f"{TAG_PREFIX}node-pool": pool}) if pool else None
