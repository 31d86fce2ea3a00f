"""FOCUS rows for one hour of the ledger: each node's GPU charge split among its holders (FOCUS 1.3 split cost
allocation), plus the capacity no holder is charged for as allocated charges with no ``AllocatedResourceId``.

The origin charge is one node's GPU time for one hour (node, pool, model, currency). Its ratios are the
rows' shares of its effective cost, so they sum to 1 exactly (the largest share absorbs the rounding) and
each row's cost is its own booked cost, never a ratio times a total. Amounts have 9 fractional digits
(``amounts``): ``PricingQuantity`` is the GPU-hours rounded, the unit prices the booked prices recovered
from cost / GPU-hours, ``ListCost`` and ``ContractedCost`` their products rounded, ``EffectiveCost`` the
booked cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from functools import lru_cache
from itertools import groupby

from exporter.aggregator.focus.amounts import CostCarry, exact_hours, extended, nano, unit_price
from exporter.aggregator.focus.format import Scalar, allocation_details, json_object, month_bounds
from exporter.aggregator.focus.ledger_source import CapacityRecord, CommitmentRecord, UsageRecord
from exporter.aggregator.focus.rate_card import PRICING_UNIT, SKU_METER, commitment_sku_id, sku_id, sku_price_id

Row = dict[str, Scalar]
TAG_PREFIX = "gpu-cost-exporter/"
METHOD_ID = "gpu-cost-exporter/gpu-cost-share/v1"
METHOD_DOC = (
    "Each row splits one origin charge: one Kubernetes node's GPU time for one UTC hour (node, pool, GPU model, "
    "currency), priced by the pricing file in force when it was booked. A pod's allocated charge is the GPU time "
    "it held (whole GPUs count 1, a MIG instance its slices over the GPU's slices, a time-sliced share 1/replicas) "
    "times the price; capacity no pod held (Unallocated) or no agent observed (Unobserved) is an allocated charge "
    "with a null AllocatedResourceId. AllocatedRatio is the row's share of the origin's EffectiveCost (its share "
    "of GPU-seconds when one price applied to the whole node-hour, which is the usual case); the ratios of one "
    "origin sum to exactly 1. AllocatedTags carry the pod's namespace, workload, pod, priority class and, where "
    "booking saw the namespace's team label in that hour, its team. Idle, used and unmeasured GPU-seconds and "
    "idle cost are in x_ columns. The unused "
    "part of a GPU commitment (committed GPUs the fleet did not have, paid all the same) is a charge of its own, "
    "not split from a node: CommitmentDiscountStatus Unused, no ResourceId and no Allocated* values.")
COMMITMENT_TYPE = "GPU Commitment"
RATIO_QUANTUM = Decimal("1e-9")  # 9 digits, as every amount: 0.125, not 0.125000000012
#: FOCUS PricingCategory by the node's capacity type (``node_billing``): spot is priced as the market moves
#: (Dynamic), capacity reserved ahead is Committed, on-demand (and a node whose type nobody recorded) Standard.
PRICING_CATEGORY = {"on-demand": "Standard", "spot": "Dynamic", "reserved": "Committed"}


def pricing_category(capacity_type: str | None) -> str:
    """The FOCUS PricingCategory of a node's GPU time, from its capacity type."""
    return PRICING_CATEGORY.get(capacity_type or "", "Standard")


@dataclass(frozen=True, slots=True)
class FocusSettings:
    """Who the charges are from and how they are billed (``--billed-cost``, ``--cluster``, ``--host-provider``)."""

    version: str = "1.3"
    cluster: str = "default"
    billed_cost: str = "effective"  # "effective": internal chargeback; "zero": next to the cloud's own FOCUS data
    host_provider: str | None = None
    provider: str = "GPU Platform"
    billing_account: str = "gpu-platform"

    def check(self) -> None:
        """Refuse settings that cannot make a valid export (ValueError), before any row is read."""
        if self.billed_cost not in ("effective", "zero"):
            raise ValueError(f"billed cost {self.billed_cost!r}: use effective or zero")
        if self.billed_cost == "zero" and not self.host_provider:
            raise ValueError("billed cost zero needs the host provider (the cloud whose invoice has these GPUs)")
        if not self.cluster:
            raise ValueError("cluster name must not be empty")


@dataclass(frozen=True, slots=True)
class Share:
    """One allocated charge of an origin, before it becomes a row."""

    usage: UsageRecord | None
    capacity: CapacityRecord | None
    cost: Decimal  # as booked (exact)
    effective: Decimal  # the booked cost to 9 digits: the row's EffectiveCost
    list_cost: Decimal
    seconds: Decimal


def _share(record: UsageRecord | CapacityRecord, carry: CostCarry) -> Share:
    if isinstance(record, UsageRecord):
        return Share(record, None, record.cost, carry.book(record.cost), record.list_cost, record.allocated_s)
    return Share(None, record, record.cost, carry.book(record.cost), record.list_cost, record.seconds)


def _one_price(costs: Sequence[Decimal], seconds: Sequence[Decimal]) -> bool:
    """Whether one price per GPU-second applied to every share (to within the 9-digit rounding of each cost):
    then the shares of cost are the shares of GPU-seconds, which are exact where the costs' rounding is not."""
    total_c, total_s = sum(costs, Decimal(0)), sum(seconds, Decimal(0))
    if total_c <= 0 or total_s <= 0:
        return False
    return all(abs(c * total_s - total_c * s) <= Decimal("1e-6") * total_s for c, s in zip(costs, seconds, strict=True))


def allocation_ratios(costs: Sequence[Decimal], seconds: Sequence[Decimal]) -> list[Decimal]:
    """Shares of the origin's cost (of its GPU-seconds if it cost nothing, or if one price applied to all of it;
    equal if it had neither), to 9 digits and summing to 1."""
    basis = seconds if sum(costs) <= 0 or _one_price(costs, seconds) else costs
    total = sum(basis, Decimal(0))
    if total <= 0:
        basis, total = [Decimal(1)] * len(costs), Decimal(len(costs))
    # Each share to the nearest 9-digit value (0.12499999975 reads 0.125), the largest taking what the rounding
    # left over so they sum to exactly 1. When that would leave the largest below another share or below 0 (a
    # million tiny shares' roundings add up), each is rounded down instead: the remainder is never negative then.
    nearest = [(b / total).quantize(RATIO_QUANTUM, rounding=ROUND_HALF_EVEN) for b in basis]
    down = [(b / total).quantize(RATIO_QUANTUM, rounding=ROUND_DOWN) for b in basis]
    for ratios in (nearest, down):
        largest = max(range(len(ratios)), key=lambda i: (ratios[i], basis[i]))  # a tie: the larger basis
        fixed = ratios[largest] + Decimal(1) - sum(ratios, Decimal(0))
        if fixed >= 0 and all(fixed >= r for i, r in enumerate(ratios) if i != largest):
            break
    ratios[largest] = fixed
    return ratios


def _common(s: FocusSettings, *, hour: int, node: str, currency: str, effective: Decimal,
            category: str = "Standard") -> Row:
    start, end = month_bounds(hour)
    zero = s.billed_cost == "zero"
    host = s.host_provider or s.provider
    return {
        "BilledCost": Decimal("0.0") if zero else effective, "BillingAccountId": s.billing_account,
        "BillingAccountName": s.provider, "BillingAccountType": "Internal Chargeback", "BillingCurrency": currency,
        "BillingPeriodStart": start, "BillingPeriodEnd": end, "ChargeCategory": "Usage", "ChargeClass": None,
        "ChargeFrequency": "Usage-Based", "ChargePeriodStart": hour, "ChargePeriodEnd": hour + 3600,
        "EffectiveCost": effective, "HostProviderName": host, "InvoiceId": None,
        "InvoiceIssuerName": host if zero else s.provider, "PricingCategory": category,
        "ProviderName": s.provider, "PublisherName": s.provider, "ServiceProviderName": s.provider,
        "ResourceId": f"k8s://{s.cluster}/nodes/{node}", "ResourceName": node, "ResourceType": "Kubernetes Node",
        "ServiceCategory": "Compute", "ServiceName": "Kubernetes GPU Compute", "ServiceSubcategory": "Containers",
        "SubAccountId": s.cluster, "SubAccountName": s.cluster, "SubAccountType": "Kubernetes Cluster",
        "AllocatedMethodId": METHOD_ID, "x_UnallocatedGpuSeconds": Decimal("0.0"),
        "x_UnobservedGpuSeconds": Decimal("0.0"), "x_UnusedCommitmentGpuSeconds": Decimal("0.0"),
    }


@lru_cache(maxsize=4096)
def _price_details(model: str, mig_profile: str, *, pool: str) -> str:
    return json_object({k: v for k, v in (("x_GpuModel", model), ("x_MigProfile", mig_profile), ("x_NodePool", pool))
                        if v})


@lru_cache(maxsize=4096)
def _pool_tags(pool: str) -> str | None:
    return json_object({f"{TAG_PREFIX}node-pool": pool}) if pool else None


def _priced(share: Share, *, model: str, mig_profile: str, pool: str, currency: str, booked_list: Decimal | None,
            fallback: Decimal | None, ratio: Decimal) -> Row:
    """Quantities, unit prices and the SKU: ListCost = ListUnitPrice x PricingQuantity and ContractedCost =
    ContractedUnitPrice x PricingQuantity, each rounded half-even to 9 digits. The prices are worked out against
    the unrounded GPU-hours, so they are the booked prices, not the quantity's rounding."""
    unrounded = exact_hours(share.seconds)
    hours = nano(unrounded)
    list_price = booked_list if booked_list is not None else fallback
    booked = unit_price(share.cost, unrounded)
    contracted = booked if booked is not None else list_price
    sku = sku_id(model, mig_profile, pool=pool)
    if list_price is None or contracted is None:  # no time and no price in the origin: the costs as booked
        list_cost, contracted_cost = nano(share.list_cost), share.effective
    else:
        list_cost, contracted_cost = extended(list_price, hours), extended(contracted, hours)
    has_price = list_price is not None
    return {
        "ConsumedQuantity": hours if has_price else None, "ConsumedUnit": PRICING_UNIT if has_price else None,
        "PricingQuantity": hours if has_price else None, "PricingUnit": PRICING_UNIT if has_price else None,
        "ListUnitPrice": list_price, "ContractedUnitPrice": contracted if has_price else None,
        "ListCost": list_cost, "ContractedCost": contracted_cost,
        "SkuId": sku, "SkuMeter": SKU_METER,
        "SkuPriceId": sku_price_id(sku, currency, price=list_price) if list_price is not None else None,
        "SkuPriceDetails": _price_details(model, mig_profile, pool=pool) if list_price is not None else None,
        "Tags": _pool_tags(pool),
        "AllocatedMethodDetails": allocation_details(ratio, PRICING_UNIT, quantity=hours),
        "x_NodePool": pool or None, "x_GpuModel": model, "x_MigProfile": mig_profile or None,
    }


def _usage_row(u: UsageRecord, s: FocusSettings, *, team: str | None) -> Row:
    what = f"{u.gpu_model}, MIG {u.mig_profile}" if u.mig_profile else u.gpu_model
    tags: dict[str, Scalar] = {f"{TAG_PREFIX}namespace": u.namespace, f"{TAG_PREFIX}workload": u.workload,
                               f"{TAG_PREFIX}pod": u.pod}
    if u.priority_class:
        tags[f"{TAG_PREFIX}priority-class"] = u.priority_class
    if team:
        tags[f"{TAG_PREFIX}team"] = team
    if u.queue:
        tags.update({f"{TAG_PREFIX}scheduler": u.scheduler, f"{TAG_PREFIX}queue": u.queue})
    return {
        "ChargeDescription": f"GPU time of pod {u.namespace}/{u.pod} on node {u.node} ({what})",
        "AllocatedResourceId": f"k8s://{s.cluster}/namespaces/{u.namespace}/pods/{u.pod}",
        "AllocatedResourceName": u.pod, "AllocatedTags": json_object(tags),
        "x_CapacityState": "Allocated", "x_Namespace": u.namespace, "x_Team": team, "x_WorkloadName": u.workload,
        "x_PodName": u.pod, "x_PriorityClass": u.priority_class or None, "x_Sharing": u.sharing or None,
        "x_Queue": u.queue or None,
        "x_AllocatedGpuSeconds": nano(u.allocated_s), "x_UsedGpuSeconds": nano(u.used_s),
        "x_IdleGpuSeconds": nano(u.idle_s), "x_UnmeasuredGpuSeconds": nano(u.unmeasured_s),
        "x_IdleCost": nano(u.idle_cost), "x_EnergyJoules": nano(u.energy_j),
        "x_Co2eKg": co2e_kg(u.co2e_g, known_s=u.co2e_s),
    }


def _capacity_row(c: CapacityRecord) -> Row:
    zero = Decimal("0.0")
    return {
        "ChargeDescription": f"{c.state} GPU capacity on node {c.node} ({c.gpu_model})",
        "AllocatedResourceId": None, "AllocatedResourceName": None, "AllocatedTags": None,
        "x_CapacityState": c.state, "x_Namespace": None, "x_WorkloadName": None, "x_PodName": None,
        "x_PriorityClass": None, "x_Queue": None, "x_AllocatedGpuSeconds": zero, "x_UsedGpuSeconds": zero,
        "x_IdleGpuSeconds": zero,
        "x_UnmeasuredGpuSeconds": zero, f"x_{c.state}GpuSeconds": nano(c.seconds), "x_IdleCost": zero,
        "x_EnergyJoules": None, "x_Co2eKg": co2e_kg(c.co2e_g, known_s=c.co2e_s),
    }


def co2e_kg(grams: Decimal, *, known_s: Decimal) -> Decimal | None:
    """Kilograms CO2e to 9 digits, or None (empty) where none is known: no ``emissions:`` section, no energy
    measured."""
    return nano(grams / 1000) if known_s > 0 else None


def origin_rows(records: Sequence[UsageRecord | CapacityRecord], s: FocusSettings, *,
                teams: Mapping[str, str] | None = None, carry: CostCarry | None = None,
                capacity_types: Mapping[str, str] | None = None) -> list[Row]:
    """The allocated charges of one origin (all records share node, pool, model, currency and hour); ``teams``
    the namespaces' teams in that hour (a namespace missing has no known team); ``carry`` the export's
    rounding of booked costs (a fresh one: these rows alone); ``capacity_types`` each node's capacity type (its
    rows' PricingCategory; a node missing is on-demand)."""
    teams = teams or {}
    capacity_types = capacity_types or {}
    carry = carry or CostCarry()
    shares = [_share(r, carry) for r in records]
    ratios = allocation_ratios([x.effective for x in shares], [x.seconds for x in shares])
    prices = [unit_price(x.list_cost, exact_hours(x.seconds)) for x in shares]
    fallback = next((p for p in prices if p is not None), None)
    rows: list[Row] = []
    for share, ratio, record, price in zip(shares, ratios, records, prices, strict=True):
        mig = record.mig_profile if isinstance(record, UsageRecord) else ""
        row = _common(s, hour=record.hour, node=record.node, currency=record.currency, effective=share.effective,
                      category=pricing_category(capacity_types.get(record.node)))
        row |= _priced(share, model=record.gpu_model, mig_profile=mig, pool=record.pool, currency=record.currency,
                       booked_list=price, fallback=fallback if mig == "" else None, ratio=ratio)
        if row["SkuPriceId"] is None:  # FOCUS 1.3: PricingCategory is null wherever SkuPriceId is
            row["PricingCategory"] = None
        row |= (_usage_row(record, s, team=teams.get(record.namespace)) if isinstance(record, UsageRecord)
                else _capacity_row(record))
        rows.append(row)
    return rows


def _origin(r: UsageRecord | CapacityRecord) -> tuple[str, str, str, str]:
    return (r.node, r.pool, r.gpu_model, r.currency)


def commitment_id(cluster: str, name: str) -> str:
    """The commitment's ``CommitmentDiscountId``: stable for its name within the cluster's pricing."""
    return f"gpu-cost-exporter://{cluster}/commitments/{name}"


def unused_commitment_row(c: CommitmentRecord, s: FocusSettings, *, carry: CostCarry | None = None) -> Row:
    """A commitment's unused part in one hour: a Usage charge with CommitmentDiscountStatus Unused (FOCUS
    DiscountHandling), no consumed quantity, no resource, priced at the commitment's rate. Its list cost is the
    ledger's (0: nothing ran, so nothing was priced at list), so ListUnitPrice = ListCost / PricingQuantity."""
    unrounded = exact_hours(c.seconds)
    hours = nano(unrounded)
    zero = Decimal("0.0")
    list_price = unit_price(c.list_cost, unrounded)
    list_price = zero if list_price is None else list_price
    contracted = unit_price(c.cost, unrounded)
    contracted = zero if contracted is None else contracted
    list_cost, cost = extended(list_price, hours), extended(contracted, hours)
    sku = commitment_sku_id(c.commitment)
    row = _common(s, hour=c.hour, node="", currency=c.currency, effective=(carry or CostCarry()).book(c.cost))
    row |= {
        "ResourceId": None, "ResourceName": None, "ResourceType": None, "PricingCategory": "Committed",
        "ChargeDescription": f"Unused part of GPU commitment {c.commitment} ({c.gpu_model})",
        "ConsumedQuantity": None, "ConsumedUnit": None, "PricingQuantity": hours, "PricingUnit": PRICING_UNIT,
        "ListUnitPrice": list_price, "ContractedUnitPrice": contracted, "ListCost": list_cost, "ContractedCost": cost,
        "SkuId": sku, "SkuMeter": SKU_METER, "SkuPriceId": sku_price_id(sku, c.currency, price=list_price),
        "SkuPriceDetails": json_object({"x_GpuModel": c.gpu_model, "x_Commitment": c.commitment}),
        "CommitmentDiscountId": commitment_id(s.cluster, c.commitment), "CommitmentDiscountName": c.commitment,
        "CommitmentDiscountType": COMMITMENT_TYPE, "CommitmentDiscountCategory": "Usage",
        "CommitmentDiscountStatus": "Unused", "CommitmentDiscountQuantity": hours,
        "CommitmentDiscountUnit": PRICING_UNIT, "Tags": None, "AllocatedMethodId": None,
        "AllocatedMethodDetails": None, "AllocatedResourceId": None, "AllocatedResourceName": None,
        "AllocatedTags": None, "x_CapacityState": "UnusedCommitment", "x_GpuModel": c.gpu_model,
        "x_AllocatedGpuSeconds": zero, "x_UsedGpuSeconds": zero, "x_IdleGpuSeconds": zero,
        "x_UnmeasuredGpuSeconds": zero, "x_UnusedCommitmentGpuSeconds": nano(c.seconds), "x_IdleCost": zero,
    }
    return row


def hour_rows(usage: Sequence[UsageRecord], capacity: Sequence[CapacityRecord], *, s: FocusSettings,
              unused: Sequence[CommitmentRecord] = (), teams: Mapping[str, str] | None = None,
              carry: CostCarry | None = None, capacity_types: Mapping[str, str] | None = None) -> list[Row]:
    """All rows of one hour, origin by origin: holders first, then the capacity no holder is charged for; then
    the commitments' unused parts. ``carry``: the export's, so its Σ EffectiveCost is the books' (a fresh one:
    this hour's)."""
    carry = carry or CostCarry()
    records: list[UsageRecord | CapacityRecord] = [*usage, *capacity]
    records.sort(key=lambda r: (_origin(r), isinstance(r, CapacityRecord)))
    rows: list[Row] = []
    for _key, group in groupby(records, key=_origin):
        rows += origin_rows(list(group), s, teams=teams, carry=carry, capacity_types=capacity_types)
    rows += [unused_commitment_row(c, s, carry=carry) for c in unused]
    return rows

