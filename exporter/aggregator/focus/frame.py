"""The FOCUS columns of a batch of ledger rows (``columnar.read_batch``), each made by Arrow kernels over the whole
column: ids, JSON cells and descriptions are joined from their parts, values repeated across rows (SKUs, price
details, pool tags, the nodes' pricing categories) are made once per distinct value and taken by index.

Each column is what ``rows.origin_rows`` writes for the same record (its docstring and docs/focus.md say why).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from exporter.aggregator.focus.cells import Fixed, Frame, Unquoted, decimal_text, plain_text, quote_one
from exporter.aggregator.focus.columnar import Amounts, half_even
from exporter.aggregator.focus.format import json_object, month_bounds
from exporter.aggregator.focus.rate_card import PRICING_UNIT, SKU_METER, sku_id
from exporter.aggregator.focus.rows import METHOD_ID, TAG_PREFIX, FocusSettings, pricing_category

_TXT, _I64 = pa.string(), pa.int64()
TEXT_KEYS = ("node", "gpu_model", "mig_profile", "pool", "currency", "namespace", "pod", "workload", "priority_class",
             "sharing", "scheduler", "queue", "state")
#: columns made of the ledger's texts (``TEXT_KEYS``), the team, the cluster and words without a comma, quote or
#: line break: none needs quoting when those texts hold none (ChargeDescription has ", MIG ", the JSON cells quotes)
PLAIN_COLUMNS = ("BillingCurrency", "PricingCategory", "ResourceId", "ResourceName", "ConsumedUnit", "PricingUnit",
                 "SkuId", "SkuPriceId", "x_NodePool", "x_GpuModel", "x_MigProfile", "AllocatedResourceId",
                 "AllocatedResourceName", "x_CapacityState", "x_Namespace", "x_Team", "x_WorkloadName", "x_PodName",
                 "x_PriorityClass", "x_Sharing", "x_Queue")


def _json_strings(values: pa.Array) -> pa.Array:
    """Each string as a JSON string literal (``json.dumps``, ``ensure_ascii=False``)."""
    special = pc.match_substring_regex(values, r'["\\\x00-\x1f]')
    plain = pc.binary_join_element_wise('"', values, '"', "")
    if not pc.any(special).as_py():
        return plain
    encoded = pa.array([None if v is None else json_object({"": v})[4:-1] for v in values.to_pylist()], _TXT)
    return pc.if_else(special, encoded, plain)


def _join(*parts: Any) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def _per_distinct(values: pa.Array, make: Callable[[Any], Any], *, kind: pa.DataType = _TXT) -> pa.Array:
    """``make`` of each row's value, called once per distinct value (a batch has few: pools, models, hours)."""
    encoded = pc.dictionary_encode(values)
    return pc.take(pa.array([make(v) for v in encoded.dictionary.to_pylist()], kind), encoded.indices)


def _key(*arrays: pa.Array) -> pa.Array:
    """Several text columns as one (NUL-separated: no ledger key holds a NUL), for ``_per_distinct``."""
    return pc.binary_join_element_wise(*arrays, "\x00")


def _empty_null(values: pa.Array) -> pa.Array:
    """"" as null (the row exporter's ``x or None``)."""
    empty = pc.equal(pc.fill_null(values, ""), "")
    if not pc.any(empty).as_py():
        return values
    return pa.nulls(len(values), _TXT) if pc.all(empty).as_py() else pc.if_else(empty, pa.nulls(len(values), _TXT),
                                                                                values)


def _pod_tags(cols: Mapping[str, pa.Array], *, team: pa.Array, plain: bool) -> pa.Array:
    """AllocatedTags' JSON (``rows._usage_row``'s keys, in its order); ``plain`` (no value holds a character JSON
    escapes or CSV quotes): written as its CSV cell, the whole quoted and each quote doubled."""
    q = '""' if plain else '"'  # a JSON quote as the cell holds it

    def tag(name: str, values: pa.Array) -> list[Any]:  # the parts of ``"<prefix><name>":"<value>"``
        if plain:
            return [f"{q}{TAG_PREFIX}{name}{q}:{q}", values, q]
        return [f"{q}{TAG_PREFIX}{name}{q}:", _json_strings(values)]

    def optional(*tags: tuple[str, pa.Array], when: pa.Array) -> Any:
        given = pc.not_equal(pc.fill_null(when, ""), "")
        if not pc.any(given).as_py():
            return ""  # no row has it: nothing to join
        parts = [p for name, values in tags for p in [",", *tag(name, pc.fill_null(values, ""))]]
        return pc.if_else(given, _join(*parts), "")

    return _join('"{' if plain else "{", *tag("namespace", cols["namespace"]), ",", *tag("workload", cols["workload"]),
                 ",", *tag("pod", cols["pod"]), optional(("priority-class", cols["priority_class"]),
                                                          when=cols["priority_class"]),
                 optional(("team", team), when=team),
                 optional(("scheduler", cols["scheduler"]), ("queue", cols["queue"]), when=cols["queue"]),
                 '}"' if plain else "}")


def _teams(hour: pa.Array, ns: pa.Array, *, teams: Mapping[tuple[int, str], str]) -> pa.Array:
    """Each holder's team in its hour (null where booking saw none), looked up by hour and namespace at once."""
    if not teams:
        return pa.nulls(len(hour), _TXT)
    keys = pa.array([f"{h}\x00{ns}" for h, ns in teams], _TXT)
    found = pc.index_in(_join(pc.cast(hour, _TXT), "\x00", ns), value_set=keys)
    return pc.take(pa.array(list(teams.values()), _TXT), found)


def _sku(key: str) -> str:
    model, mig, pool = key.split("\x00")
    return sku_id(model, mig, pool=pool)


def _price_details(key: str) -> str:
    model, mig, pool = key.split("\x00")
    return json_object({k: v for k, v in (("x_GpuModel", model), ("x_MigProfile", mig), ("x_NodePool", pool)) if v})


def _pool_tags(pool: str) -> str | None:
    return json_object({f"{TAG_PREFIX}node-pool": pool}) if pool else None


def _price_id_prefix(key: str) -> str:
    sku, currency = key.split("\x00")
    return f"{sku}-{currency.lower()}-"  # rate_card.sku_price_id's, the price appended


def _as_cell(make: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """``make``'s text as its CSV cell (``quote_one`` is exact for any text; called once per distinct value)."""
    return lambda key: None if (text := make(key)) is None else quote_one(text)


def batch_frame(t: pa.Table, a: Amounts, *, s: FocusSettings, teams: Mapping[tuple[int, str], str],
                capacity_types: Mapping[str, str], csv: bool = True) -> Frame:
    """The FOCUS columns of the batch's rows (``read_batch``'s table, ``columnar.amounts`` of it); ``csv``: for a
    CSV file, where JSON cells and texts checked plain are made as their CSV cells (``Unquoted``) at once."""
    n = t.num_rows
    arrays = {name: t.column(name).combine_chunks() for name in t.column_names}
    col = arrays.__getitem__
    node, model, mig, pool, currency = col("node"), col("gpu_model"), col("mig_profile"), col("pool"), col("currency")
    ns, pod, state, hour = col("namespace"), col("pod"), col("state"), col("hour")
    usage = pc.equal(col("kind"), 0)
    hours, list_price = pa.array(a.hours, _I64), pa.array(a.list_price, _I64)
    priced = pc.is_valid(list_price)
    null_text, null_int = pa.nulls(n, _TXT), pa.nulls(n, _I64)
    sku_key = _key(model, mig, pool)
    sku = _per_distinct(sku_key, _sku)
    host = s.host_provider or s.provider
    billed_zero = s.billed_cost == "zero"
    effective = col("cost")
    team = pc.if_else(usage, _teams(hour, ns, teams=teams), null_text)
    plain = csv and plain_text(*(arrays[k] for k in TEXT_KEYS), team, pa.array([s.cluster]))
    cell, q = (Unquoted, '""') if csv else (_same, '"')  # q: a JSON quote as the cell holds it
    pod_tags = _pod_tags(arrays, team=team, plain=plain)
    what = pc.if_else(pc.equal(mig, ""), model, _join(model, ", MIG ", mig))
    category = _per_distinct(node, lambda k: pricing_category(capacity_types.get(k)))
    frame: Frame = {
        "BilledCost": Fixed(0) if billed_zero else effective, "BillingAccountId": Fixed(s.billing_account),
        "BillingAccountName": Fixed(s.provider), "BillingAccountType": Fixed("Internal Chargeback"),
        "BillingCurrency": currency,
        "BillingPeriodStart": _per_distinct(hour, lambda h: month_bounds(h)[0], kind=_I64),
        "BillingPeriodEnd": _per_distinct(hour, lambda h: month_bounds(h)[1], kind=_I64),
        "ChargeCategory": Fixed("Usage"), "ChargeFrequency": Fixed("Usage-Based"),
        "ChargePeriodStart": hour, "ChargePeriodEnd": pc.add(hour, 3600), "EffectiveCost": effective,
        "HostProviderName": Fixed(host), "InvoiceIssuerName": Fixed(host if billed_zero else s.provider),
        "PricingCategory": pc.if_else(priced, category, null_text),  # FOCUS 1.3: null wherever SkuPriceId is
        "ProviderName": Fixed(s.provider), "PublisherName": Fixed(s.provider),
        "ServiceProviderName": Fixed(s.provider), "ResourceId": _join(f"k8s://{s.cluster}/nodes/", node),
        "ResourceName": node, "ResourceType": Fixed("Kubernetes Node"), "ServiceCategory": Fixed("Compute"),
        "ServiceName": Fixed("Kubernetes GPU Compute"), "ServiceSubcategory": Fixed("Containers"),
        "SubAccountId": Fixed(s.cluster), "SubAccountName": Fixed(s.cluster),
        "SubAccountType": Fixed("Kubernetes Cluster"), "AllocatedMethodId": Fixed(METHOD_ID),
        # priced: quantities, unit prices, the SKU
        "ConsumedQuantity": pc.if_else(priced, hours, null_int),
        "ConsumedUnit": pc.if_else(priced, PRICING_UNIT, null_text),
        "PricingQuantity": pc.if_else(priced, hours, null_int),
        "PricingUnit": pc.if_else(priced, PRICING_UNIT, null_text),
        "ListUnitPrice": list_price,
        "ContractedUnitPrice": pc.if_else(priced, pa.array(a.contracted, _I64), null_int),
        "ListCost": pa.array(a.list_cost, _I64), "ContractedCost": pa.array(a.contracted_cost, _I64),
        "SkuId": sku, "SkuMeter": Fixed(SKU_METER),
        "SkuPriceId": _join(_per_distinct(_key(sku, currency), _price_id_prefix), decimal_text(list_price)),
        "SkuPriceDetails": cell(pc.if_else(priced, _per_distinct(
            sku_key, _as_cell(_price_details) if csv else _price_details), null_text)),
        "Tags": cell(_per_distinct(pool, _as_cell(_pool_tags) if csv else _pool_tags)),
        # CSV quotes it always (it holds quotes): made as its cell at once (q[1:]: the cell's own quote, or none)
        "AllocatedMethodDetails": cell(_join(f'{q[1:]}{{{q}Elements{q}:[{{{q}AllocatedRatio{q}:',
                                             decimal_text(pa.array(a.ratio, _I64)),
                                             f',{q}UsageUnit{q}:{q}{PRICING_UNIT}{q},{q}UsageQuantity{q}:',
                                             decimal_text(hours), f"}}]}}{q[1:]}")),
        "x_NodePool": _empty_null(pool), "x_GpuModel": model, "x_MigProfile": _empty_null(mig),
        # the holder's or the capacity's own columns
        "ChargeDescription": _description(usage, what=what, plain=plain, parts=(ns, pod, node, model, state)),
        "AllocatedResourceId": pc.if_else(usage, _join(f"k8s://{s.cluster}/namespaces/", ns, "/pods/", pod),
                                          null_text),
        "AllocatedResourceName": pod,
        "AllocatedTags": (Unquoted if plain else _same)(pc.if_else(usage, pod_tags, null_text)),
        "x_CapacityState": state, "x_Namespace": ns, "x_Team": team, "x_WorkloadName": col("workload"),
        "x_PodName": pod, "x_PriorityClass": _empty_null(col("priority_class")),
        "x_Sharing": _empty_null(col("sharing")), "x_Queue": _empty_null(col("queue")),
        "x_AllocatedGpuSeconds": pc.if_else(usage, col("seconds"), 0), "x_UsedGpuSeconds": col("used_s"),
        "x_IdleGpuSeconds": col("idle_s"), "x_UnmeasuredGpuSeconds": col("unmeasured_s"),
        "x_UnallocatedGpuSeconds": pc.if_else(pc.equal(state, "Unallocated"), col("seconds"), 0),
        "x_UnobservedGpuSeconds": pc.if_else(pc.equal(state, "Unobserved"), col("seconds"), 0),
        "x_UnusedCommitmentGpuSeconds": Fixed(0), "x_IdleCost": col("idle_cost"),
        "x_EnergyJoules": col("energy_j"),
        "x_Co2eKg": _co2e_kg(col("co2e_g"), col("co2e_s")),
    }
    if plain:
        frame |= {k: Unquoted(frame[k]) for k in PLAIN_COLUMNS}
    return frame


def _same(values: pa.Array) -> pa.Array:
    return values


def _description(usage: pa.Array, *, what: pa.Array, plain: bool, parts: tuple[pa.Array, ...]) -> Any:
    """ChargeDescription; ``plain``: as its CSV cell (quoted where ", MIG " puts a comma in it)."""
    ns, pod, node, model, state = parts
    text = pc.if_else(usage, _join("GPU time of pod ", ns, "/", pod, " on node ", node, " (", what, ")"),
                      _join(state, " GPU capacity on node ", node, " (", model, ")"))
    if not plain:
        return text
    return Unquoted(pc.if_else(pc.match_substring(text, ","), _join('"', text, '"'), text))


def _co2e_kg(grams: pa.Array, known_s: pa.Array) -> pa.Array:
    """Kilograms of CO2e in nano-units (grams / 1000 rounded half-even), null where none is known."""
    known = pc.greater(known_s, 0)
    if not pc.any(known).as_py():
        return pa.nulls(len(grams), _I64)
    return pc.if_else(known, pa.array([half_even(g, 1000) for g in grams.to_pylist()], _I64),
                      pa.nulls(len(grams), _I64))
