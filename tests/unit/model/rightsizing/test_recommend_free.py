"""A target the cluster has free wins a tie with one some workload holds: it is already paid for and needs
no new device. The inference pod of ``test_recommend`` (A100 at 3.00, 8 %, 6 GiB): a 1g.10gb on the A100
(1/7 x 312 x 0.8 = 35.66 TFLOPS >= 31.2) and a 2g.20gb priced the same 0.45 an hour both fit and save
2190.00 - 0.45 x 730 = 1861.50."""

from __future__ import annotations

import pytest

from exporter.model.rightsizing.recommend import recommend
from exporter.model.rightsizing.types import Offer, Placement
from tests.unit.model.rightsizing.test_recommend import A100, WINDOW_H, _device, _workload

HELD_1G = Offer(Placement(A100, "1g.10gb"), 0.45)
FREE_2G = Offer(Placement(A100, "2g.20gb"), 0.45, free=True)


@pytest.mark.parametrize("offers", [[HELD_1G, FREE_2G], [FREE_2G, HELD_1G]], ids=["held-first", "free-first"])
def test_a_free_target_wins_a_tie_in_either_order(offers: list[Offer]) -> None:
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    rec = recommend(use, offers, window_hours=WINDOW_H)
    assert rec is not None
    assert rec.target == Placement(A100, "2g.20gb", 1)
    assert rec.monthly_savings == pytest.approx(1861.50)
    assert rec.reason.endswith("; the cluster has it free")


def test_more_savings_still_beats_a_free_target() -> None:
    """A held 1g.10gb at 0.45 against a free 2g.20gb at 0.90: 1861.50 saved beats 2190.00 - 657.00 = 1533.00."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    rec = recommend(use, [Offer(Placement(A100, "2g.20gb"), 0.90, free=True), HELD_1G], window_hours=WINDOW_H)
    assert rec is not None and rec.target == Placement(A100, "1g.10gb", 1)
    assert rec.monthly_savings == pytest.approx(1861.50) and "free" not in rec.reason
