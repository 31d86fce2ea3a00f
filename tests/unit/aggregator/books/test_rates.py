"""A tick's rates by hand: hour slices of an interval, commitment coverage ``c = min(N, n) / n`` over the GPUs
that can take it (MIG instances with their own price cannot), and the blend ``c x R + (1 - c) x E`` at each
moment of the tick, since commitments start and end within it."""

from __future__ import annotations

import pytest

from exporter.aggregator.books.rates import Coverage, FleetNode, Slice, TickRates, fleet_node, in_force, slices
from exporter.model.pricing.document import parse_pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts
from exporter.model.pricing.resolve import PriceSource

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z, an hour boundary
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
# a100-small is in force for [08:00, 10:00), a100-big from 09:00: N = 4, then 16, then 12.
PRICING = parse_pricing(f"""
default_price: 1
models: {{"{A100}": 4.0, "{H100}": 6.0}}
mig_profiles: {{"{A100}": {{"1g.10gb": 0.45}}}}
commitments:
  - {{name: a100-small, model: "{A100}", gpus: 4, hourly: 2.0,
     start: "2027-01-15T08:00:00Z", end: "2027-01-15T10:00:00Z"}}
  - {{name: a100-big, model: "{A100}", gpus: 12, hourly: 3.0,
     start: "2027-01-15T09:00:00Z", end: "2028-01-01T00:00:00Z"}}
""", "p.yaml")


def _facts(name: str, model: str = A100, *, spot: bool = False) -> NodeFacts:
    return NodeFacts(name, model, capacity_type=CapacityType.SPOT if spot else CapacityType.ON_DEMAND)


def _four_nodes_of_eight() -> list[FleetNode]:
    """n = 32 eligible A100s, beside a spot A100 node and an H100 node that never count for A100."""
    return [*(FleetNode(_facts(f"a{i}"), 8) for i in range(4)), FleetNode(_facts("s", spot=True), 8),
            FleetNode(_facts("h", H100), 8)]


def test_an_interval_is_cut_at_each_hour_by_its_share() -> None:
    """[3590, 7300] is 3710 s: 10 s in hour 0, 3600 s in hour 3600, 100 s in hour 7200, each from its start."""
    assert slices(3590.0, 7300.0) == [Slice(0, 10 / 3710, 3590.0), Slice(3600, 3600 / 3710, 3600),
                                      Slice(7200, 100 / 3710, 7200)]
    assert slices(3600.0, 7200.0) == [Slice(3600, 1.0, 3600.0)]


def test_an_empty_or_backwards_interval_is_one_whole_slice_at_its_end() -> None:
    assert slices(5000.0, 5000.0) == [Slice(3600, 1.0, 5000.0)]
    assert slices(8000.0, 5000.0) == [Slice(3600, 1.0, 5000.0)]


def test_coverage_and_unused_share_by_hand() -> None:
    """c = min(N, n) / n and unused = max(0, N - n) / N; no eligible GPU covers nothing, no commitment wastes none."""
    assert (Coverage(12, 8, 2.0).fraction, Coverage(12, 8, 2.0).unused_share) == (1.0, 4 / 12)
    assert (Coverage(4, 8, 2.0).fraction, Coverage(4, 8, 2.0).unused_share) == (0.5, 0.0)
    assert (Coverage(4, 0, 2.0).fraction, Coverage(4, 0, 2.0).unused_share) == (0.0, 1.0)
    assert (Coverage(0, 8, 2.0).fraction, Coverage(0, 8, 2.0).unused_share) == (0.0, 0.0)


def test_a_commitment_is_in_force_from_its_start_until_just_before_its_end() -> None:
    prices = PRICING.book.at(T0)

    def names(at: float) -> list[str]:
        return [c.name for c in in_force(prices, at)]

    assert names(T0 - 0.5) == []
    assert names(T0) == ["a100-small"]
    assert names(T0 + 3600) == ["a100-small", "a100-big"]
    assert names(T0 + 7199.5) == ["a100-small", "a100-big"]
    assert names(T0 + 7200) == ["a100-big"]


def test_held_mig_instances_with_their_own_price_are_not_eligible() -> None:
    """8 A100s, two 1g.10gb instances held (listed at 0.45 each: 2/7 of a GPU, never blended) and one 3g.40gb
    (no listed price: it takes the blend like a whole GPU): n = 8 - 2/7. The spot and H100 nodes count 0."""
    a = fleet_node(_facts("a"), 8, held_mig=[("1g.10gb", 1 / 7), ("1g.10gb", 1 / 7), ("3g.40gb", 3 / 7)])
    assert a.held_mig == {"1g.10gb": pytest.approx(2 / 7), "3g.40gb": 3 / 7}
    rates = TickRates(PRICING, [a, FleetNode(_facts("s", spot=True), 8), FleetNode(_facts("h", H100), 8)])
    assert rates.eligible(PRICING.book.at(T0), A100) == pytest.approx(8 - 2 / 7)


def test_no_eligible_gpu_is_zero_never_less() -> None:
    """A model nobody has: 0. One GPU with more listed MIG instances held than it has (a stale inventory): 0."""
    prices = PRICING.book.at(T0)
    assert TickRates(PRICING, _four_nodes_of_eight()).eligible(prices, "NVIDIA L4") == 0.0
    over = FleetNode(_facts("a"), 1, held_mig={"1g.10gb": 9 / 7})
    assert TickRates(PRICING, [over]).eligible(prices, A100) == 0.0


def test_coverage_weighs_the_commitments_in_force_by_their_gpus() -> None:
    """At 09:00 both are in force: N = 4 + 12 = 16, R = (4 x 2.00 + 12 x 3.00) / 16 = 2.75, n = 32."""
    rates = TickRates(PRICING, _four_nodes_of_eight())
    assert rates.coverage(PRICING.book.at(T0), T0 + 3600) == {A100: Coverage(16, 32, 2.75)}
    assert rates.coverage(PRICING.book.at(T0), T0) == {A100: Coverage(4, 32, 2.0)}


def test_the_blend_follows_the_commitments_in_force_at_each_moment() -> None:
    """E = 4.00 on demand. 08:00: c = 4/32, 0.125 x 2.00 + 0.875 x 4.00 = 3.75; 09:00: c = 16/32,
    0.5 x 2.75 + 0.5 x 4.00 = 3.375; 10:00: c = 12/32, 0.375 x 3.00 + 0.625 x 4.00 = 3.625. The list price
    stays 4.00, and before any commitment the rate is the plain one."""
    rates = TickRates(PRICING, _four_nodes_of_eight())
    a0 = _facts("a0")
    blended = [rates.rate(a0, mig_profile=None, at=at) for at in (T0, T0 + 3600, T0 + 7200)]
    assert [r.effective_per_gpu_hour for r in blended] == [pytest.approx(3.75), pytest.approx(3.375),
                                                          pytest.approx(3.625)]
    assert {(r.source, r.list_per_gpu_hour) for r in blended} == {(PriceSource.COMMITMENT, 4.0)}
    before = rates.rate(a0, mig_profile=None, at=T0 - 60)
    assert (before.effective_per_gpu_hour, before.source) == (4.0, PriceSource.MODEL)


def test_spot_gpus_and_listed_mig_instances_keep_their_own_rate() -> None:
    """A spot A100 and a 1g.10gb instance (0.45 / (1/7) = 3.15 a GPU-hour) are not covered: no blend."""
    rates = TickRates(PRICING, _four_nodes_of_eight())
    spot = rates.rate(_facts("s", spot=True), mig_profile=None, at=T0 + 3600)
    assert (spot.effective_per_gpu_hour, spot.source) == (4.0, PriceSource.MODEL)
    mig = rates.rate(_facts("a0"), mig_profile="1g.10gb", at=T0 + 3600)
    assert mig.effective_per_gpu_hour == pytest.approx(3.15)
    assert mig.source is PriceSource.MODEL


def test_a_nodes_facts_are_made_once_per_tick_and_model() -> None:
    rates, made = TickRates(PRICING, []), []

    def make() -> NodeFacts:
        made.append(1)
        return _facts("a0")

    first = rates.facts_of("a0", A100, make=make)
    assert rates.facts_of("a0", A100, make=make) is first
    rates.facts_of("a0", H100, make=make)
    assert len(made) == 2


def test_a_new_document_within_the_tick_brings_its_own_coverage() -> None:
    """The same commitment (16 A100s of 32 eligible, c = 0.5) is 2.00 in the document of 08:00 and 3.00 in the
    one of 09:00: 0.5 x 2.00 + 0.5 x 4.00 = 3.00, then 0.5 x 3.00 + 0.5 x 4.00 = 3.50, in one tick."""
    versioned = parse_pricing("versions:\n" + "".join(f"""
  - effective_from: "{start}"
    default_price: 1
    models: {{"{A100}": 4.0}}
    commitments:
      - {{name: a100, model: "{A100}", gpus: 16, hourly: {hourly},
         start: "2027-01-01T00:00:00Z", end: "2028-01-01T00:00:00Z"}}""" for start, hourly in (
        ("2027-01-15T08:00:00Z", 2.0), ("2027-01-15T09:00:00Z", 3.0))), "p.yaml")
    rates = TickRates(versioned, _four_nodes_of_eight())
    assert [rates.rate(_facts("a0"), mig_profile=None, at=at).effective_per_gpu_hour
            for at in (T0, T0 + 3600)] == [pytest.approx(3.0), pytest.approx(3.5)]


def test_nothing_eligible_blends_nothing() -> None:
    """A commitment in force but no eligible GPU in the fleet (c = 0): the plain rate and its own source."""
    rate = TickRates(PRICING, []).rate(_facts("a0"), mig_profile=None, at=T0)
    assert (rate.effective_per_gpu_hour, rate.source) == (4.0, PriceSource.MODEL)


def test_one_node_with_two_models_has_a_rate_for_each() -> None:
    """The rates are cached per node and model: the node's H100s are not priced as its A100s."""
    rates = TickRates(PRICING, _four_nodes_of_eight())
    a100 = rates.rate(_facts("a0"), mig_profile=None, at=T0 - 60)
    h100 = rates.rate(_facts("a0", H100), mig_profile=None, at=T0 - 60)
    assert (a100.effective_per_gpu_hour, h100.effective_per_gpu_hour) == (4.0, 6.0)
