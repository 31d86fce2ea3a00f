"""Every field of an hour's commitment coverage, by hand: pools summed and left out, fractions of a second,
and a commitment with nothing to cover leaving rates untouched."""

from __future__ import annotations

import pytest

from exporter.model.pricing.commitments import (
    EligibleSeconds,
    ModelCoverage,
    PoolCoverage,
    UnusedCommitment,
    commitment_hour,
)
from exporter.model.pricing.labels import NodeFacts
from exporter.model.pricing.resolve import PriceSource
from tests.unit.model.pricing.test_pricing_commitments import H100, HOUR, ONE, _pricing


def test_six_of_eight_covered_field_by_field_in_every_pool() -> None:
    """6 GPUs committed at 2.10 for the hour; 3 + 1 GPU-hours eligible in pool a, 4 in pool b, none in c:
    coverage 6/8 = 0.75 in each pool, 4 x 0.75 = 3 GPU-hours covered each, 3 x 2.10 = 6.30."""
    hour = commitment_hour(_pricing(ONE % 6).book.at(HOUR), hour_start=HOUR, eligible=[
        EligibleSeconds(H100, "a", 3 * 3600.0), EligibleSeconds(H100, "b", 4 * 3600.0),
        EligibleSeconds(H100, "a", 3600.0), EligibleSeconds(H100, "c", 0.0)])
    assert hour.hour_start == HOUR
    assert hour.models == {H100: ModelCoverage(H100, 6 * 3600.0, 8 * 3600.0, 6 * 3600.0, 0.75, 2.10)}
    assert [(p.model, p.pool, p.eligible_gpu_seconds, p.covered_gpu_seconds) for p in hour.pools] == [
        (H100, "a", 4 * 3600.0, 3 * 3600.0), (H100, "b", 4 * 3600.0, 3 * 3600.0)]
    assert all(isinstance(p, PoolCoverage) and p.covered_cost == pytest.approx(6.30) for p in hour.pools)
    assert hour.unused == ()


def test_fractions_of_a_second() -> None:
    """One committed GPU and half an eligible second: that half second is covered (coverage 1), the other
    3599.5 s are unused. With 3599.5 s eligible, the unused half second is still booked: 0.5 / 3600 x 2.10."""
    prices = _pricing(ONE % 1).book.at(HOUR)
    sliver = commitment_hour(prices, hour_start=HOUR, eligible=[EligibleSeconds(H100, "a", 0.5)])
    assert sliver.models[H100].coverage == 1.0
    assert [u.gpu_seconds for u in sliver.unused] == [3599.5]
    almost = commitment_hour(prices, hour_start=HOUR, eligible=[EligibleSeconds(H100, "a", 3599.5)])
    (unused,) = almost.unused
    assert unused == UnusedCommitment("h100-1yr", H100, 0.5, unused.cost)
    assert unused.cost == pytest.approx(0.5 / 3600 * 2.10)


def test_a_commitment_with_nothing_eligible_leaves_the_rate_as_it_was() -> None:
    """Coverage 0: the H100's rate keeps its list price and its source (not "commitment")."""
    p = _pricing(ONE % 6)
    hour = commitment_hour(p.book.at(HOUR), hour_start=HOUR, eligible=[])
    assert hour.models[H100].coverage == 0.0
    rate = p.rate(NodeFacts("n", H100), at=HOUR)
    assert hour.apply(rate) == rate and rate.source is PriceSource.MODEL
