"""The edges of right-sizing's choice: when no row is owed at all, how many GPUs a pod set keeps, which of
two near-equal candidates wins, and the order of rows. Prices and helpers are ``test_recommend``'s; a month is
730 hours and the window 24 hours.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from exporter.model.rightsizing.recommend import recommend, recommend_all
from exporter.model.rightsizing.types import Action, Offer, Placement, PodUse, RuleSettings, WorkloadUse
from tests.unit.model.rightsizing.test_recommend import A100, H100, L4, MIG_1G, WINDOW_H, _device, _workload

BUSY, IDLE = 0.70, 0.005  # p95 buckets 80 % and 1 %: above and below the 5 % idle threshold


def _pods(*utils: list[float], model: str = H100, price: float = 4.00) -> WorkloadUse:
    """One pod per list, each device at its utilisation for the whole window."""
    pods = tuple(PodUse(f"p{i}", tuple(_device(u, 10.0) for u in us)) for i, us in enumerate(utils))
    devices = sum(len(us) for us in utils)
    return WorkloadUse(namespace="team", workload="trainer", placement=Placement(model, gpus=len(utils[0])),
                       pods=pods, allocated_device_hours=devices * WINDOW_H,
                       booked_cost=devices * WINDOW_H * price, hours_observed=WINDOW_H, currency="USD")


def test_the_busiest_pod_sets_how_many_gpus_every_pod_keeps() -> None:
    """Pods of four H100s, one with two busy GPUs, the other with one: both keep two. Now 8 GPUs x 4.00 x 730
    = 23360.00; after 8 x 2/4 x 4.00 x 730 = 11680.00."""
    rec = recommend(_pods([BUSY, IDLE, BUSY, IDLE], [IDLE, BUSY, IDLE, IDLE]), [], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.FEWER_GPUS
    assert rec.target == Placement(H100, None, 2)
    assert rec.monthly_cost_now == pytest.approx(23360.00)
    assert rec.monthly_cost_after == pytest.approx(11680.00)
    assert rec.reason == "at most 2 of its 4 GPUs were ever busy (p95 above 5%) in any pod"


def test_one_busy_gpu_of_two_keeps_one_and_its_kind() -> None:
    """Two 1g.10gb instances, one busy: one instance of the same profile. Now 2 x 0.45 x 730 = 657.00, after
    2 x 1/2 x 0.45 x 730 = 328.50. A single busy device of four keeps one, never less."""
    use = _workload("serve", Placement(A100, "1g.10gb", 2), [_device(0.08, 2.0), _device(IDLE, 2.0)], price=0.45)
    rec = recommend(use, [], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.FEWER_GPUS
    assert rec.target == Placement(A100, "1g.10gb", 1)
    assert rec.monthly_cost_now == pytest.approx(657.00)
    assert rec.monthly_cost_after == pytest.approx(328.50)
    assert rec.reason == "at most 1 of its 2 GPUs were ever busy (p95 above 5%) in any pod"
    single = recommend(_pods([BUSY, IDLE, IDLE, IDLE]), [], window_hours=WINDOW_H)
    assert single is not None and single.target == Placement(H100, None, 1)


def test_no_row_without_pods_or_device_hours_but_one_for_a_fraction_of_an_hour() -> None:
    """Half a device-hour booked at 4.00 (2.00), idle: now 2.00 / 24 x 730 = 60.83, saved in full."""
    use = _workload("notebook", Placement(H100), [_device(0.0, 2.0)], price=4.00)
    assert recommend(replace(use, pods=()), [], window_hours=WINDOW_H) is None
    assert recommend(replace(use, allocated_device_hours=0.0, booked_cost=0.0), [], window_hours=WINDOW_H) is None
    rec = recommend(replace(use, allocated_device_hours=0.5, booked_cost=2.0), [], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.SCALE_TO_ZERO
    assert rec.monthly_cost_now == pytest.approx(2.00 / 24 * 730)


def test_a_saving_above_half_a_cent_is_a_row_and_below_it_none() -> None:
    """An idle workload whose month costs 0.01 is worth scaling to zero; one whose month costs 0.004 is not."""
    use = _workload("notebook", Placement(H100), [_device(0.0, 2.0)], price=4.00)
    cent = recommend(replace(use, booked_cost=0.01 * 24 / 730), [], window_hours=WINDOW_H)
    assert cent is not None and cent.monthly_savings == pytest.approx(0.01)
    assert recommend(replace(use, booked_cost=0.004 * 24 / 730), [], window_hours=WINDOW_H) is None


@pytest.mark.parametrize(("less", "free_wins"), [(0.004, True), (0.006, False)])
def test_a_free_target_saving_up_to_half_a_cent_less_still_wins(less: float, free_wins: bool) -> None:
    """The held 1g.10gb saves 1861.50; a free 2g.20gb priced ``less / 730`` more an hour saves ``less`` less:
    within half a cent the free one wins, beyond it the larger saving."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    free = Offer(Placement(A100, "2g.20gb"), 0.45 + less / 730, free=True)
    rec = recommend(use, [MIG_1G, free], window_hours=WINDOW_H)
    assert rec is not None
    assert rec.target.mig_profile == ("2g.20gb" if free_wins else "1g.10gb")
    assert rec.reason.endswith("; the cluster has it free") is free_wins


def test_a_free_target_seen_second_does_not_beat_a_far_larger_saving() -> None:
    """Held 1g.10gb first (saves 1861.50), then a free 2g.20gb at 0.90 (saves 1533.00): the held one stays."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    rec = recommend(use, [MIG_1G, Offer(Placement(A100, "2g.20gb"), 0.90, free=True)], window_hours=WINDOW_H)
    assert rec is not None and rec.target == Placement(A100, "1g.10gb", 1)
    assert rec.monthly_savings == pytest.approx(1861.50)


def test_rows_saving_the_same_are_ordered_by_namespace_then_workload() -> None:
    """Four idle H100 notebooks, each saving 2920.00: namespace first, then workload name."""
    base = _workload("x", Placement(H100), [_device(0.0, 2.0)], price=4.00)
    uses = [replace(base, namespace=ns, workload=w) for ns, w in (("b", "a"), ("a", "z"), ("a", "m"), ("b", "0"))]
    rows = recommend_all(uses, [], window_hours=WINDOW_H)
    assert [(r.namespace, r.workload) for r in rows] == [("a", "m"), ("a", "z"), ("b", "0"), ("b", "a")]



def test_a_tie_between_two_held_targets_keeps_the_first_offered() -> None:
    """1g.10gb and 2g.20gb both at 0.45 save 1861.50 each: the first in the list stays, in either order."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    second = Offer(Placement(A100, "2g.20gb"), 0.45)
    for offers, profile in (([MIG_1G, second], "1g.10gb"), ([second, MIG_1G], "2g.20gb")):
        rec = recommend(use, offers, window_hours=WINDOW_H)
        assert rec is not None and rec.target.mig_profile == profile


def test_recommend_all_applies_the_settings_to_every_workload() -> None:
    """24 hours of evidence is enough by default and not when 48 are required."""
    use = _workload("notebook", Placement(H100), [_device(0.0, 2.0)], price=4.00)
    assert len(recommend_all([use], [], window_hours=WINDOW_H)) == 1
    assert recommend_all([use], [], window_hours=WINDOW_H, settings=RuleSettings(min_evidence_hours=48)) == []


def test_a_gpu_at_exactly_the_idle_threshold_is_idle() -> None:
    """70 % and 3 % (p95 bucket 5 %, the threshold itself): one of two H100s is kept."""
    rec = recommend(_pods([BUSY, 0.03]), [], window_hours=WINDOW_H)
    assert rec is not None and rec.target == Placement(H100, None, 1)


def test_free_smaller_gpus_and_shares_say_so() -> None:
    """The reason of a move to a device the cluster has free ends with that, for every kind of move."""
    ranker = _workload("ranker", Placement(A100), [_device(0.25, 10.0)], price=3.00)
    rec = recommend(ranker, [Offer(Placement(L4), 0.80, free=True)], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.SMALLER_GPU
    assert rec.reason.endswith("with 20 % headroom; the cluster has it free")
    ocr = _workload("ocr", Placement(L4), [_device(0.08, 4.0)], price=0.80)
    rec = recommend(ocr, [Offer(Placement(L4, replicas=4), 0.20, free=True)], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.TIME_SLICE
    assert rec.reason.endswith("fits its share of the memory; the cluster has it free")


def test_a_dearer_target_is_never_advised_and_hides_no_cheaper_one_after_it() -> None:
    """An H100 at 4.00 holds the 8 % A100 workload but costs more than its 3.00: no row for it alone; offered
    before a 1g.10gb, the 1g.10gb is still found."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    dearer = Offer(Placement(H100), 4.00)
    assert recommend(use, [dearer], window_hours=WINDOW_H) is None
    rec = recommend(use, [dearer, MIG_1G], window_hours=WINDOW_H)
    assert rec is not None and rec.target == Placement(A100, "1g.10gb", 1)


def test_a_held_target_saving_a_little_more_than_another_held_one_wins() -> None:
    """Neither free: a 2g.20gb priced 0.004 / 730 less an hour than the 1g.10gb saves 0.004 more a month, and
    more wins however little."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    cheaper = Offer(Placement(A100, "2g.20gb"), 0.45 - 0.004 / 730)
    rec = recommend(use, [MIG_1G, cheaper], window_hours=WINDOW_H)
    assert rec is not None and rec.target.mig_profile == "2g.20gb"
