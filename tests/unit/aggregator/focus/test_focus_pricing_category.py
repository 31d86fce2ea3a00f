"""FOCUS PricingCategory as FOCUS 1.3 defines it, from the node's capacity type: on-demand GPU time is
``Standard``, spot (priced as the market moves) ``Dynamic``, capacity reserved ahead ``Committed``; null where the
row has no SkuPriceId (a row with neither time nor a price). AllocatedRatio of one price's node-hour is the exact
share of its GPU-seconds."""

from __future__ import annotations

import json
from decimal import Decimal

from exporter.aggregator.focus.ledger_source import UsageRecord
from exporter.aggregator.focus.rows import FocusSettings, origin_rows

HOUR = 1_796_000_400
D0 = Decimal(0)


def _usage(pod: str, *, node: str, seconds: str, cost: str) -> UsageRecord:
    return UsageRecord(hour=HOUR, namespace="ml", pod=pod, workload=pod, node=node, pool="", gpu_model="NVIDIA H100",
                       mig_profile="", priority_class="", currency="USD", allocated_s=Decimal(seconds), used_s=D0,
                       unmeasured_s=D0, idle_s=Decimal(seconds), cost=Decimal(cost), list_cost=Decimal(cost),
                       idle_cost=Decimal(cost), energy_j=D0, co2e_g=D0, co2e_s=D0)


def test_pricing_category_follows_the_nodes_capacity_type() -> None:
    kinds = {"spot-0": "spot", "rsv-0": "reserved", "od-0": "on-demand"}
    for node, want in (("spot-0", "Dynamic"), ("rsv-0", "Committed"), ("od-0", "Standard"), ("unknown-0", "Standard")):
        (row,) = origin_rows([_usage("p", node=node, seconds="3600", cost="4.000000000")], FocusSettings(),
                             capacity_types=kinds)
        assert row["PricingCategory"] == want, node


def test_no_price_no_category() -> None:
    """No GPU-seconds and no cost: no unit price, so no SkuPriceId, and FOCUS 1.3 wants PricingCategory null."""
    (row,) = origin_rows([_usage("p", node="spot-0", seconds="0", cost="0")], FocusSettings(),
                         capacity_types={"spot-0": "spot"})
    assert row["SkuPriceId"] is None and row["PricingCategory"] is None


def test_one_price_ratio_is_the_share_of_gpu_seconds() -> None:
    """1 of 8 H100s for an hour at 4.00 beside 7: 3600 of 28800 GPU-s = 0.125 exactly, though its booked cost
    4.000000020 of 32.000000000 (the roundings of many ticks) is 0.125000000625, 0.125000001 to 9 digits."""
    rows = origin_rows([_usage("a", node="od-0", seconds="3600", cost="4.000000020"),
                        _usage("b", node="od-0", seconds="25200", cost="27.999999980")], FocusSettings())
    ratios = [json.loads(str(r["AllocatedMethodDetails"]))["Elements"][0]["AllocatedRatio"] for r in rows]
    assert ratios == [0.125, 0.875]
