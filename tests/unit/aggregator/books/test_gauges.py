"""The held-now gauges: a holder's GPU priced as booking prices it (version-2 rules, not by model alone),
and the cardinality guard that folds the cheapest pods into one overflow series."""

from __future__ import annotations

from decimal import Decimal

import pytest

from exporter.aggregator.books.gauges import PodGauge, fold_overflow, hourly_rate, utilization_ratio
from exporter.aggregator.kube.state import KubeState
from exporter.model.books import UsageAmounts
from exporter.model.pricing.document import parse_pricing

PRICING = parse_pricing("""
currency: USD
default_price: 1.0
models: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.5}
mig_profiles: {"NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.45}}
instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}
capacity_types: {spot: 0.35}
""", "p.yaml")
H100 = "NVIDIA H100 80GB HBM3"


def kube() -> KubeState:
    k = KubeState()
    k.nodes["spot-p5"] = {"node.kubernetes.io/instance-type": "p5.48xlarge", "karpenter.sh/capacity-type": "spot"}
    k.nodes["plain"] = {}
    return k


def test_hourly_rate_follows_instance_type_capacity_type_and_mig_price() -> None:
    """A spot p5.48xlarge GPU: 55.04 / 8 x 0.35 = 2.408 per hour (the model's list 4.00 was shown before);
    a plain node: the model's 4.00; a 1g.10gb instance: 0.45 per instance-hour = 0.45 x 7 = 3.15 per
    GPU-equivalent hour (a holder's fraction 1/7 makes it 0.45)."""
    k = kube()
    spot = hourly_rate(node="spot-p5", model=H100, mig_profile=None, kube=k, pricing=PRICING, now=1.8e9, booked={})
    assert spot == pytest.approx(55.04 / 8 * 0.35) == pytest.approx(2.408)
    assert hourly_rate(node="plain", model=H100, mig_profile=None, kube=k, pricing=PRICING, now=1.8e9,
                       booked={}) == pytest.approx(4.0)
    mig = hourly_rate(node="plain", model="NVIDIA A100-SXM4-80GB", mig_profile="1g.10gb", kube=k, pricing=PRICING,
                      now=1.8e9, booked={})
    assert mig * (1 / 7) == pytest.approx(0.45)


def test_cardinality_guard_folds_cheapest_pods() -> None:
    """With a limit of 3 pods per namespace, the two most expensive keep their series and the rest fold
    into one __overflow__ pod whose GPUs and cost are the sum of what it replaced."""
    pods = {("ns", f"p{i}"): PodGauge("wl", 1.0, "M", 0.5, float(i), float(i)) for i in range(6)}
    pods[("other", "x")] = PodGauge("wl", 1.0, "M", 0.5, 0.0, 1.0)
    out, folded = fold_overflow(pods, 3)
    assert set(out) == {("ns", "p5"), ("ns", "p4"), ("ns", "__overflow__"), ("other", "x")}
    assert folded == {"ns": 4}
    over = out[("ns", "__overflow__")]
    assert (over.gpus, over.hourly_cost, over.idle_seconds) == (4.0, 0 + 1 + 2 + 3, 3.0)


def test_utilization_of_booked_deltas_reads_to_six_digits() -> None:
    """A tick's delta booked to the nanosecond: 7.5 s used of 15.000000001 s held is 0.49999999997 as a
    quotient, and 0.5 on the gauge (6 digits); 2 s of 3 s is 0.666667; nothing measured is no ratio at all."""
    assert utilization_ratio(UsageAmounts(allocated_s=Decimal("15.000000001"), used_s=Decimal("7.5"))) == 0.5
    assert utilization_ratio(UsageAmounts(allocated_s=Decimal(3), used_s=Decimal(2))) == 0.666667
    assert utilization_ratio(UsageAmounts(allocated_s=Decimal(3), unmeasured_s=Decimal(3))) is None
