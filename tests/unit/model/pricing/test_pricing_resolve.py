"""The version-2 price resolver: list and effective price per GPU-hour of a node, by hand-computed examples."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from exporter.model.pricing.document import Pricing, parse_pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts, capacity_type_of
from exporter.model.pricing.resolve import EnergyTariff, PriceSource

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "pricing_v2_example.yaml"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"
DEC_2026 = datetime(2026, 12, 15, tzinfo=UTC).timestamp()


def _example() -> Pricing:
    return parse_pricing(FIXTURE.read_text(), "pricing.yaml")


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_instance_type_price_is_shared_by_its_gpus() -> None:
    """p5.48xlarge at 55.04 per instance-hour with 8 GPUs: 55.04 / 8 = 6.88 per GPU-hour, list = effective."""
    node = NodeFacts.from_labels("p5-a", H100, labels={"node.kubernetes.io/instance-type": "p5.48xlarge"})
    rate = _example().rate(node, at=DEC_2026)
    assert rate.source is PriceSource.INSTANCE_TYPE and rate.known
    assert rate.list_per_gpu_hour == pytest.approx(6.88)
    assert rate.effective_per_gpu_hour == pytest.approx(6.88)
    assert rate.capacity_type is CapacityType.ON_DEMAND and rate.commitment_model == H100


def test_model_then_default_when_no_instance_type_matches() -> None:
    """An unlisted instance type falls back to the model (4.00); an unlisted model to default_price (1.00)."""
    p = _example()
    by_model = p.rate(NodeFacts.from_labels("n", H100, labels={"node.kubernetes.io/instance-type": "x9.huge"}),
                      at=DEC_2026)
    assert (by_model.source, by_model.list_per_gpu_hour, by_model.known) == (PriceSource.MODEL, 4.00, True)
    default = p.rate(NodeFacts("n", L4), at=DEC_2026)
    assert (default.source, default.list_per_gpu_hour, default.known) == (PriceSource.DEFAULT, 1.00, False)


def test_spot_and_pool_multipliers() -> None:
    """Spot p5 in pool batch: E = 6.88 * 0.35 * 0.8 = 1.9264; L stays 6.88; spot never takes commitments."""
    node = NodeFacts.from_labels("p5-spot", H100, labels={"node.kubernetes.io/instance-type": "p5.48xlarge",
                                                           "karpenter.sh/capacity-type": "spot"}, pool="batch")
    rate = _example().rate(node, at=DEC_2026)
    assert rate.capacity_type is CapacityType.SPOT
    assert rate.list_per_gpu_hour == pytest.approx(6.88)
    assert rate.effective_per_gpu_hour == pytest.approx(1.9264)
    assert rate.commitment_model is None
    on_demand_pool = _example().rate(NodeFacts("n", H100, pool="batch"), at=DEC_2026)
    assert on_demand_pool.effective_per_gpu_hour == pytest.approx(3.20)  # 4.00 * 0.8, no capacity multiplier


@pytest.mark.parametrize(("labels", "expected"), [
    ({}, CapacityType.ON_DEMAND),
    ({"karpenter.sh/capacity-type": "spot"}, CapacityType.SPOT),
    ({"karpenter.sh/capacity-type": "on-demand"}, CapacityType.ON_DEMAND),
    ({"karpenter.sh/capacity-type": "reserved"}, CapacityType.RESERVED),
    ({"eks.amazonaws.com/capacityType": "SPOT"}, CapacityType.SPOT),
    ({"eks.amazonaws.com/capacityType": "ON_DEMAND"}, CapacityType.ON_DEMAND),
    ({"eks.amazonaws.com/capacityType": "CAPACITY_BLOCK"}, CapacityType.RESERVED),
    ({"cloud.google.com/gke-spot": "true"}, CapacityType.SPOT),
    ({"cloud.google.com/gke-spot": "false"}, CapacityType.ON_DEMAND),
    ({"cloud.google.com/gke-preemptible": "true"}, CapacityType.SPOT),
    ({"kubernetes.azure.com/scalesetpriority": "spot"}, CapacityType.SPOT),
    ({"kubernetes.azure.com/scalesetpriority": "regular"}, CapacityType.ON_DEMAND),
    # the first label present decides: Karpenter's on-demand wins over a stale GKE spot label
    ({"karpenter.sh/capacity-type": "on-demand", "cloud.google.com/gke-spot": "true"}, CapacityType.ON_DEMAND),
    # an unrecognised value is passed over, so the next label still decides
    ({"cloud.google.com/gke-spot": "false", "cloud.google.com/gke-preemptible": "true"}, CapacityType.SPOT),
])
def test_capacity_type_labels(labels: dict[str, str], expected: CapacityType) -> None:
    """Each provider's capacity label and value maps to one capacity type; none means on-demand."""
    assert capacity_type_of(labels) is expected


def test_reserved_capacity_has_its_own_multiplier() -> None:
    """capacity_types.reserved: 0.6 on a 4.00 model = 2.40; reserved capacity stays commitment-eligible."""
    p = parse_pricing('default_price: 1\nmodels: {"NVIDIA H100 80GB HBM3": 4.0}\ncapacity_types: {reserved: 0.6}\n',
                      "p.yaml")
    rate = p.rate(NodeFacts.from_labels("n", H100, labels={"karpenter.sh/capacity-type": "reserved"}), at=0.0)
    assert rate.effective_per_gpu_hour == pytest.approx(2.40) and rate.commitment_model == H100


def test_mig_listed_price_times_multipliers_and_no_commitment() -> None:
    """1g.10gb at 0.45 per instance-hour on a 7-slice A100: 0.45 * 7 = 3.15 per GPU-equivalent hour; on spot
    0.45 * 0.35 = 0.1575 per instance-hour = 1.1025 per GPU-equivalent hour; never blended with commitments."""
    p = parse_pricing(f"""
default_price: 2.0
models: {{"{A100}": 2.5}}
mig_profiles: {{"{A100}": {{"1g.10gb": 0.45}}}}
capacity_types: {{spot: 0.35}}
""", "p.yaml")
    spot = NodeFacts.from_labels("m", A100, labels={"cloud.google.com/gke-spot": "true"})
    on_demand = NodeFacts("m2", A100)
    listed = p.rate(on_demand, at=0.0, mig_profile="1g.10gb")
    assert listed.list_per_gpu_hour == pytest.approx(3.15) and listed.commitment_model is None
    assert p.rate(spot, at=0.0, mig_profile="1g.10gb").effective_per_gpu_hour == pytest.approx(1.1025)
    # 3g.40gb is not listed: the fraction of the parent's rate, so the per-GPU-equivalent rate is the parent's 2.50
    unlisted = p.rate(on_demand, at=0.0, mig_profile="3g.40gb")
    assert unlisted.effective_per_gpu_hour == 2.5 and unlisted.commitment_model == A100


def test_owned_hardware_capital_rate_and_energy() -> None:
    """17520 / (4 * 8760) = 0.50 per GPU-hour; 7.2e6 J = 2 kWh, * 0.12 * PUE 1.5 = 0.36; no multipliers apply."""
    node = NodeFacts.from_labels("dc-1", A100, labels={"karpenter.sh/capacity-type": "spot"}, pool="batch")
    rate = _example().rate(node, at=DEC_2026)
    assert rate.source is PriceSource.ON_PREM and rate.known
    assert rate.list_per_gpu_hour == pytest.approx(0.50)
    assert rate.effective_per_gpu_hour == pytest.approx(0.50)
    assert rate.commitment_model is None
    assert rate.energy == EnergyTariff(price_kwh=0.12, pue=1.5)
    assert rate.energy.cost(7.2e6) == pytest.approx(0.36)
    # a 1g.10gb instance on an owned A100 pays its fraction of the capital rate, not the listed 0.45
    assert _example().rate(node, at=DEC_2026, mig_profile="1g.10gb").effective_per_gpu_hour == pytest.approx(0.50)


DATED = f"""
versions:
  - currency: USD
    default_price: 1.0
    models: {{"{H100}": 4.0}}
    effective_from: "2026-11-01T00:00:00Z"
  - currency: USD
    default_price: 1.0
    models: {{"{H100}": 3.0}}
    effective_from: "2026-12-01T00:00:00Z"
"""


def test_price_change_mid_run_with_effective_from() -> None:
    """2 H100s booked 22:00-02:00 across a 4.00 -> 3.00 change at midnight: 2*4*2 + 2*3*2 = 16 + 12 = 28."""
    p = parse_pricing(DATED, "p.yaml")
    node = NodeFacts("n", H100)
    hours = [_ts(f"2026-11-30T{h:02d}:00:00+00:00") for h in (22, 23)] + \
            [_ts(f"2026-12-01T{h:02d}:00:00+00:00") for h in (0, 1)]
    cost = sum(2 * 1.0 * p.rate(node, at=start).effective_per_gpu_hour for start in hours)
    assert cost == pytest.approx(28.0)
    assert p.rate(node, at=_ts("2026-11-30T23:59:59+00:00")).list_per_gpu_hour == 4.0
    assert p.rate(node, at=_ts("2026-12-01T00:00:00+00:00")).list_per_gpu_hour == 3.0
    # before the oldest document: the oldest prices it (a GPU-hour is never free)
    assert p.rate(node, at=_ts("2026-10-01T00:00:00+00:00")).list_per_gpu_hour == 4.0
    assert p.doc.models[H100] == 3.0  # the newest document is what the version-1 metrics show


def test_adding_a_version_never_reprices_the_past() -> None:
    """A third document from 2027-01-01 at 2.00 leaves every earlier hour's price as it was."""
    before = parse_pricing(DATED, "p.yaml")
    after = parse_pricing(DATED + f"""  - currency: USD
    default_price: 1.0
    models: {{"{H100}": 2.0}}
    effective_from: "2027-01-01T00:00:00Z"
""", "p.yaml")
    node = NodeFacts("n", H100)
    for start in range(int(_ts("2026-10-31T00:00:00+00:00")), int(_ts("2027-01-01T00:00:00+00:00")), 3600 * 7):
        assert after.rate(node, at=start) == before.rate(node, at=start)
    assert after.rate(node, at=_ts("2027-01-01T00:00:00+00:00")).list_per_gpu_hour == 2.0
    assert after.price(H100, at=_ts("2026-11-15T00:00:00+00:00")).per_gpu_hour == 4.0


V1 = """
currency: EUR
default_price: 1.5
models: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.1, "NVIDIA L4": 0}
mig_profiles: {"NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.35}}
pools: {spot: 0.4, free: 0}
"""


@pytest.mark.parametrize(("model", "mig", "pool", "expected"), [
    (H100, None, None, 4.0),
    (H100, None, "spot", 1.6),  # 4.0 * 0.4
    ("NVIDIA B200", None, None, 1.5),  # default
    (A100, "1g.10gb", None, 2.45),  # 0.35 / (1/7)
    (A100, "1g.10gb", "spot", 0.98),  # 2.45 * 0.4
    (A100, "3g.40gb", None, 2.1),  # parent rate
    (L4, None, None, 0.0),  # a zero price stays valid in a version-1 file
    (H100, None, "free", 0.0),
])
def test_version_1_file_prices_unchanged(model: str, mig: str | None, pool: str | None, expected: float) -> None:
    """A version-1 file gives today's prices through the old lookup and through the resolver alike."""
    p = parse_pricing(V1, "p.yaml")
    assert p.currency == "EUR"
    assert p.price(model, mig, pool=pool).per_gpu_hour == pytest.approx(expected)
    rate = p.rate(NodeFacts("n", model, pool=pool), at=DEC_2026, mig_profile=mig)
    assert rate.effective_per_gpu_hour == pytest.approx(expected)
    assert rate.known == (model in p.doc.models or mig == "1g.10gb")
    assert rate.capacity_type is CapacityType.ON_DEMAND


def test_resolved_rates_are_cached_per_node_and_profile() -> None:
    """Booking may ask per (node, hour): the second ask returns the very same object."""
    p = _example()
    node = NodeFacts("n", H100, pool="batch")
    assert p.rate(node, at=DEC_2026) is p.rate(node, at=DEC_2026 + 3600)
