"""Commitments over one hour: coverage blending, spot exclusion, unused amounts, by hand-computed examples."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.model.pricing.commitments import EligibleSeconds, commitment_hour
from exporter.model.pricing.document import Pricing, parse_pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts
from exporter.model.pricing.resolve import PriceSource

H100 = "NVIDIA H100 80GB HBM3"
HOUR = datetime(2026, 6, 1, 10, tzinfo=UTC).timestamp()


def _pricing(commitments: str, *, extra: str = "") -> Pricing:
    return parse_pricing(f"""
default_price: 1.0
models: {{"{H100}": 4.0}}
capacity_types: {{spot: 0.35}}
commitments:
{commitments}
{extra}
""", "p.yaml")


ONE = '  - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: %d, hourly: 2.10, ' \
      'start: "2026-01-01T00:00:00Z", end: "2027-01-01T00:00:00Z"}'


def test_six_of_eight_covered_blends_three_quarters() -> None:
    """6 committed GPUs, 8 eligible all hour: c = 6/8 = 0.75; rate = 0.75 * 2.10 + 0.25 * 4.00 = 2.575."""
    p = _pricing(ONE % 6)
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR,
                           eligible=[EligibleSeconds(H100, "train", 8 * 3600.0)])
    cover = hour.models[H100]
    assert (cover.committed_gpu_seconds, cover.eligible_gpu_seconds, cover.covered_gpu_seconds) == \
        (6 * 3600.0, 8 * 3600.0, 6 * 3600.0)
    assert cover.coverage == 0.75 and cover.rate == 2.10
    rate = hour.apply(p.rate(NodeFacts("n", H100, pool="train"), at=HOUR))
    assert rate.source is PriceSource.COMMITMENT
    assert rate.effective_per_gpu_hour == pytest.approx(2.575)
    assert rate.list_per_gpu_hour == 4.0
    assert hour.unused == ()
    # 8 GPU-hours at 2.575 = 20.60 = 6 * 2.10 (commitment) + 2 * 4.00 (pay as you go)
    assert 8 * rate.effective_per_gpu_hour == pytest.approx(6 * 2.10 + 2 * 4.00)


def test_spot_gpus_are_not_counted_and_not_blended() -> None:
    """A spot node beside the 8 on-demand GPUs: still c = 0.75, and the spot GPU keeps 4.00 * 0.35 = 1.40."""
    p = _pricing(ONE % 6)
    spot = p.rate(NodeFacts.from_labels("s", H100, labels={"eks.amazonaws.com/capacityType": "SPOT"}), at=HOUR)
    on_demand = p.rate(NodeFacts("n", H100), at=HOUR)
    assert spot.commitment_model is None and on_demand.commitment_model == H100
    # booking counts only GPUs whose rate names a commitment model: the 8 on-demand GPUs
    eligible = [EligibleSeconds(H100, "train", 3600.0) for r in [on_demand] * 8 + [spot] * 8 if r.commitment_model]
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR, eligible=eligible)
    assert hour.models[H100].coverage == 0.75
    assert hour.apply(spot) is spot
    assert hour.apply(spot).effective_per_gpu_hour == pytest.approx(1.40)


def test_unused_part_of_a_commitment_larger_than_the_fleet() -> None:
    """8 committed, 6 present (4 in pool a, 2 in pool b): covered 6 * 2.10 = 12.60, unused 2 * 2.10 = 4.20."""
    p = _pricing(ONE % 8)
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR, eligible=[
        EligibleSeconds(H100, "a", 4 * 3600.0), EligibleSeconds(H100, "b", 2 * 3600.0)])
    assert hour.models[H100].coverage == 1.0
    assert hour.apply(p.rate(NodeFacts("n", H100), at=HOUR)).effective_per_gpu_hour == pytest.approx(2.10)
    [unused] = hour.unused
    assert (unused.name, unused.model, unused.gpu_seconds) == ("h100-1yr", H100, 2 * 3600.0)
    assert unused.cost == pytest.approx(4.20)
    assert [(c.pool, c.covered_gpu_seconds) for c in hour.pools] == [("a", 4 * 3600.0), ("b", 2 * 3600.0)]
    assert [c.covered_cost for c in hour.pools] == pytest.approx([8.40, 4.20])  # 4 * 2.10, 2 * 2.10
    assert hour.contract_cost == pytest.approx(16.80)  # 8 * 2.10: the hour's invoice line


def test_no_eligible_gpus_leaves_the_whole_commitment_unused() -> None:
    """Nothing present: coverage 0, the full 8 * 2.10 = 16.80 is unused."""
    p = _pricing(ONE % 8)
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR, eligible=[])
    assert hour.models[H100].coverage == 0.0
    assert [u.cost for u in hour.unused] == pytest.approx([16.80])


def test_two_commitments_of_one_model_add_up() -> None:
    """4 @ 2.00 + 4 @ 2.40: N = 8, R = (4 * 2.00 + 4 * 2.40) / 8 = 2.20. With 10 present c = 0.8 and the
    rate is 0.8 * 2.20 + 0.2 * 4.00 = 2.56; with 6 present the 2 unused GPU-hours split 1 + 1: 2.00 + 2.40 = 4.40."""
    p = _pricing(
        '  - {name: a, model: "NVIDIA H100 80GB HBM3", gpus: 4, hourly: 2.00, start: "2026-01-01T00:00:00Z", '
        'end: "2027-01-01T00:00:00Z"}\n'
        '  - {name: b, model: "NVIDIA H100 80GB HBM3", gpus: 4, hourly: 2.40, start: "2026-03-01T00:00:00Z", '
        'end: "2027-03-01T00:00:00Z"}')
    prices = p.book.at(HOUR)
    ten = commitment_hour(prices, hour_start=HOUR, eligible=[EligibleSeconds(H100, "x", 10 * 3600.0)])
    assert ten.models[H100].rate == pytest.approx(2.20) and ten.models[H100].coverage == pytest.approx(0.8)
    assert ten.apply(p.rate(NodeFacts("n", H100), at=HOUR)).effective_per_gpu_hour == pytest.approx(2.56)
    six = commitment_hour(prices, hour_start=HOUR, eligible=[EligibleSeconds(H100, "x", 6 * 3600.0)])
    assert [(u.name, u.gpu_seconds) for u in six.unused] == [("a", 3600.0), ("b", 3600.0)]
    assert [u.cost for u in six.unused] == pytest.approx([2.00, 2.40])
    assert six.contract_cost == pytest.approx(4 * 2.00 + 4 * 2.40)


def test_commitment_starting_mid_hour_counts_its_seconds() -> None:
    """8 GPUs from 10:30: 8 * 1800 = 14400 committed GPU-seconds of 28800 eligible, c = 0.5, rate
    0.5 * 2.10 + 0.5 * 4.00 = 3.05 (8 GPU-hours: 4 * 4.00 before + 4 * 2.10 after = 24.40 = 8 * 3.05)."""
    p = _pricing('  - {name: late, model: "NVIDIA H100 80GB HBM3", gpus: 8, hourly: 2.10, '
                 'start: "2026-06-01T10:30:00Z", end: "2026-07-01T00:00:00Z"}')
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR, eligible=[EligibleSeconds(H100, "x", 8 * 3600.0)])
    assert hour.models[H100].committed_gpu_seconds == 14400.0 and hour.models[H100].coverage == 0.5
    assert hour.apply(p.rate(NodeFacts("n", H100), at=HOUR)).effective_per_gpu_hour == pytest.approx(3.05)
    before = commitment_hour(p.book.at(HOUR - 3600), hour_start=HOUR - 3600,
                             eligible=[EligibleSeconds(H100, "x", 8 * 3600.0)])
    assert before.models == {} and before.unused == ()  # end is exclusive and start inclusive


def test_a_model_without_commitments_is_untouched() -> None:
    """A100 GPUs beside an H100 commitment keep their pay-as-you-go rate."""
    p = _pricing(ONE % 8, extra='pools: {x: 0.5}')
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR, eligible=[EligibleSeconds("NVIDIA A100", "x", 3600.0)])
    rate = p.rate(NodeFacts("n", "NVIDIA A100", pool="x"), at=HOUR)
    assert hour.apply(rate) is rate and rate.effective_per_gpu_hour == 0.5  # default 1.0 * pool 0.5
    assert hour.pools == ()


MODELS = ["M-a", "M-b", "M-c"]
_price = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)
_multiplier = st.floats(min_value=0.01, max_value=1.0, allow_nan=False)


@dataclass(frozen=True)
class Gpus:
    """Some GPUs of one node in the hour: where they are, which MIG profile, how many GPU-seconds."""

    node: NodeFacts
    mig: str | None
    seconds: float


_gpus = st.builds(
    Gpus,
    node=st.builds(NodeFacts, name=st.just("n"), gpu_model=st.sampled_from([*MODELS, "M-unlisted", "M-owned"]),
                   instance_type=st.sampled_from([None, "i-8", "i-4", "i-none"]),
                   capacity_type=st.sampled_from(list(CapacityType)), pool=st.sampled_from([None, "p1", "p2", "p3"])),
    mig=st.sampled_from([None, "1g.10gb", "3g.40gb"]),
    seconds=st.floats(min_value=0.0, max_value=3600.0, allow_nan=False))


@settings(max_examples=150, deadline=None)
@given(fleet=st.lists(_gpus, min_size=1, max_size=12), model_prices=st.lists(_price, min_size=3, max_size=3),
       instance_prices=st.lists(_price, min_size=2, max_size=2), mig_price=_price,
       spot=_multiplier, reserved=_multiplier, pools=st.lists(_multiplier, min_size=2, max_size=2),
       commitment_gpus=st.lists(st.integers(min_value=1, max_value=16), min_size=1, max_size=4),
       discounts=st.lists(st.floats(min_value=0.01, max_value=0.99), min_size=4, max_size=4))
def test_list_is_never_below_effective(fleet: list[Gpus], model_prices: list[float],
                                       instance_prices: list[float], mig_price: float, spot: float,
                                       reserved: float, pools: list[float], commitment_gpus: list[int],
                                       discounts: list[float]) -> None:
    """No multiplier above 1 and every commitment rate below the list price: list >= effective on every
    GPU; and the commitment money on the rows plus the unused rows adds up to committed GPUs * rate."""
    base: dict[str, object] = {
        "default_price": 3.0,
        "models": dict(zip(MODELS, model_prices, strict=True)),
        "mig_profiles": {"M-a": {"1g.10gb": mig_price}},
        "instance_types": {"i-8": {"gpus": 8, "hourly": instance_prices[0] * 8},
                           "i-4": {"gpus": 4, "hourly": instance_prices[1] * 4}},
        "capacity_types": {"spot": spot, "reserved": reserved},
        "pools": {"p1": pools[0], "p2": pools[1]},
        "on_prem": [{"model": "M-owned", "capex_per_gpu": 20000, "years": 5, "energy_price_kwh": 0.1, "pue": 1.2}],
    }
    plain = parse_pricing(json.dumps(base), "p.json")
    lowest: dict[str, float] = {}
    for g in fleet:
        rate = plain.rate(g.node, at=HOUR, mig_profile=g.mig)
        if rate.commitment_model:
            lowest[rate.commitment_model] = min(lowest.get(rate.commitment_model, 1e9), rate.list_per_gpu_hour)
    base["commitments"] = [
        {"name": f"c{i}", "model": model, "gpus": commitment_gpus[i % len(commitment_gpus)],
         "hourly": lowest[model] * discounts[i], "start": "2026-01-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"}
        for i, model in enumerate(sorted(lowest))]
    p = parse_pricing(json.dumps(base), "p.json")
    rates = [(p.rate(g.node, at=HOUR, mig_profile=g.mig), g) for g in fleet]
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR, eligible=[
        EligibleSeconds(r.commitment_model, g.node.pool or "", g.seconds) for r, g in rates if r.commitment_model])
    for rate, _ in rates:
        final = hour.apply(rate)
        assert final.list_per_gpu_hour >= final.effective_per_gpu_hour - 1e-9
    committed = sum(c.gpus * 3600 * c.hourly for c in p.doc.commitments) / 3600
    assert hour.contract_cost == pytest.approx(committed)
    # the commitment part of every eligible row's blended rate, plus the unused rows, is the invoice line
    covers = [(hour.models.get(r.commitment_model or ""), g.seconds) for r, g in rates]
    on_rows = sum(cover.coverage * cover.rate * seconds / 3600 for cover, seconds in covers if cover is not None)
    assert on_rows + sum(u.cost for u in hour.unused) == pytest.approx(committed)
