"""Every field of an advised row, and the reason's text word for word: an operator sees the reason, and the
target placement is what they would apply. Also the edges of each rule (exactly the idle threshold, exactly
the memory and compute a target gives). Prices and helpers are ``test_recommend``'s; a month is 730 hours.
"""

from __future__ import annotations

import dataclasses

import pytest

from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.rightsizing.recommend import recommend
from exporter.model.rightsizing.types import (
    Action,
    DeviceUse,
    Evidence,
    Offer,
    Placement,
    PodUse,
    Recommendation,
    RuleSettings,
    WorkloadUse,
)
from tests.unit.model.rightsizing.test_recommend import (
    A100,
    GIB,
    H100,
    L4,
    L4_SLICE,
    MIG_1G,
    WINDOW_H,
    _device,
    _workload,
)

L40S = "NVIDIA L40S"


def _check(rec: Recommendation | None, expected: Recommendation) -> None:
    """All fields equal, the two amounts to float precision."""
    assert rec is not None
    assert rec.monthly_cost_now == pytest.approx(expected.monthly_cost_now)
    assert rec.monthly_cost_after == pytest.approx(expected.monthly_cost_after)
    assert dataclasses.replace(rec, monthly_cost_now=0.0, monthly_cost_after=0.0) == dataclasses.replace(
        expected, monthly_cost_now=0.0, monthly_cost_after=0.0)


def _row(use: WorkloadUse, *, action: Action, target: Placement, evidence: Evidence, money: tuple[float, float],
         reason: str) -> Recommendation:
    return Recommendation(namespace=use.namespace, workload=use.workload, action=action, current=use.placement,
                          target=target, evidence=evidence, monthly_cost_now=money[0], monthly_cost_after=money[1],
                          currency=use.currency, reason=reason)


def test_mig_row_field_by_field_and_its_reason() -> None:
    """8 % -> p50 and p95 bucket 10 %; 6 GiB peak. Now 3.00 x 730 = 2190.00, after 0.45 x 730 = 328.50."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    expected = _row(use, action=Action.MIG, target=Placement(A100, "1g.10gb", 1),
                    evidence=Evidence(0.10, 0.10, 6 * GIB, 24.0), money=(2190.00, 328.50),
                    reason="p95 10% and a 6.0 GiB framebuffer peak fit a 1g.10gb MIG instance with 20 % headroom")
    _check(recommend(use, [MIG_1G], window_hours=WINDOW_H), expected)
    free = Offer(Placement(A100, "1g.10gb"), 0.45, free=True)
    _check(recommend(use, [free], window_hours=WINDOW_H),
           dataclasses.replace(expected, reason=expected.reason + "; the cluster has it free"))


def test_time_slice_reasons_with_and_without_memory() -> None:
    """L4 at 8 %: demand 0.10 x 121 = 12.1 <= 0.8 x 121 / 4 = 24.2. Now 0.80 x 730 = 584.00, after 0.20 x 730."""
    measured = _workload("ocr", Placement(L4), [_device(0.08, 4.0)], price=0.80)
    _check(recommend(measured, [L4_SLICE], window_hours=WINDOW_H),
           _row(measured, action=Action.TIME_SLICE, target=Placement(L4, None, 1, 4),
                evidence=Evidence(0.10, 0.10, 4 * GIB, 24.0), money=(584.00, 146.00),
                reason="p95 10% fits a 1/4 time-sliced share and its 4.0 GiB framebuffer peak fits its share of "
                       "the memory"))
    unmeasured = _workload("ocr", Placement(L4), [_device(0.08, None)], price=0.80)
    rec = recommend(unmeasured, [L4_SLICE], window_hours=WINDOW_H)
    assert rec is not None
    assert rec.reason == "p95 10% fits a 1/4 time-sliced share and its memory was not measured"


def test_smaller_gpu_keeps_the_gpu_count_and_a_multi_gpu_pod_is_never_split_into_slices() -> None:
    """Two H100s at 8 %: demand 0.10 x 989 = 98.9 per GPU. An L40S gives 0.8 x 362 = 289.6 and 48e9 bytes
    (10 GiB x 1.2 = 12.9e9): two L40S, after 2 x 1.50 x 730 = 2190.00 against now 2 x 4.00 x 730 = 5840.00.
    A 3g.40gb of an H100 (3/7 x 989 x 0.8 = 339.1) and a 1/2 H100 share (395.6, 40e9 bytes) would hold one
    GPU's work and cost less (730.00, 365.00 after), but a pod of two GPUs is not moved to one slice."""
    use = _workload("trainer", Placement(H100, gpus=2), [_device(0.08, 10.0), _device(0.08, 10.0)], price=4.00)
    offers = [Offer(Placement(H100, "3g.40gb"), 1.00), Offer(Placement(H100, replicas=2), 0.50),
              Offer(Placement(L40S), 1.50)]
    _check(recommend(use, offers, window_hours=WINDOW_H),
           _row(use, action=Action.SMALLER_GPU, target=Placement(L40S, None, 2),
                evidence=Evidence(0.10, 0.10, 10 * GIB, 24.0), money=(5840.00, 2190.00),
                reason=f"p95 10% rescaled by FP16 throughput and a 10.0 GiB framebuffer peak fit {L40S} with 20 % "
                       "headroom"))


def test_the_current_placement_is_never_its_own_target_even_when_offered_cheaper() -> None:
    """An A100 booked at 3.00 while the cluster prices A100s at 2.00: moving to the same kind is no advice.
    Likewise a 1g.10gb instance offered at 0.30 to a workload holding one at 0.45."""
    whole = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    assert recommend(whole, [Offer(Placement(A100), 2.00)], window_hours=WINDOW_H) is None
    mig = _workload("llm-serve", Placement(A100, "1g.10gb"), [_device(0.08, 2.0)], price=0.45)
    assert recommend(mig, [Offer(Placement(A100, "1g.10gb"), 0.30)], window_hours=WINDOW_H) is None


def test_unknown_models_and_profiles_are_never_targets_nor_sources() -> None:
    """A model the table lacks has no throughput: no target on it, and nothing rescaled from it; a MIG
    profile whose memory cannot be read is no target either."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    assert recommend(use, [Offer(Placement("Acme X1"), 0.01)], window_hours=WINDOW_H) is None
    assert recommend(use, [Offer(Placement(A100, "1g.big"), 0.01)], window_hours=WINDOW_H) is None
    unknown = _workload("llm-serve", Placement("Acme X1"), [_device(0.08, 6.0)], price=3.00)
    assert recommend(unknown, [Offer(Placement(L4), 0.01), L4_SLICE], window_hours=WINDOW_H) is None


def test_memory_exactly_at_the_margin_fits_and_one_byte_more_does_not() -> None:
    """Margin 1.25: 8e9 x 1.25 = 10e9 bytes, exactly 1g.10gb's (7.45 GiB peak, shown as 7.5 GiB).
    Margin 1.5 on a 1/4 L4 (24e9 / 4 = 6e9 bytes): 4e9 x 1.5 = 6e9 fits (3.7 GiB)."""
    mig = RuleSettings(memory_margin=1.25)
    fits = _workload("llm-serve", Placement(A100), [DeviceUse(UtilHistogram.of([(0.08, 86400.0)]), 8 * 10**9)],
                     price=3.00)
    rec = recommend(fits, [MIG_1G], window_hours=WINDOW_H, settings=mig)
    assert rec is not None and rec.target == Placement(A100, "1g.10gb", 1)
    assert rec.reason == "p95 10% and a 7.5 GiB framebuffer peak fit a 1g.10gb MIG instance with 20 % headroom"
    over = _workload("llm-serve", Placement(A100), [DeviceUse(UtilHistogram.of([(0.08, 86400.0)]), 8 * 10**9 + 1)],
                     price=3.00)
    assert recommend(over, [MIG_1G], window_hours=WINDOW_H, settings=mig) is None

    share = RuleSettings(memory_margin=1.5)
    l4 = _workload("ocr", Placement(L4), [DeviceUse(UtilHistogram.of([(0.08, 86400.0)]), 4 * 10**9)], price=0.80)
    rec = recommend(l4, [L4_SLICE], window_hours=WINDOW_H, settings=share)
    assert rec is not None and rec.target == Placement(L4, None, 1, 4)
    assert "its 3.7 GiB framebuffer peak" in rec.reason
    l4_over = _workload("ocr", Placement(L4), [DeviceUse(UtilHistogram.of([(0.08, 86400.0)]), 4 * 10**9 + 1)],
                        price=0.80)
    assert recommend(l4_over, [L4_SLICE], window_hours=WINDOW_H, settings=share) is None


def test_compute_exactly_at_the_headroom_fits() -> None:
    """Headroom 0.7: 1g.10gb gives 0.7 x 312 / 7 = 31.2 TFLOPS, the demand 0.10 x 312 = 31.2 (the two differ in
    the last bit; 1e-9 of tolerance covers it). Headroom 0.69 gives 30.75 < 31.2: nothing."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    rec = recommend(use, [MIG_1G], window_hours=WINDOW_H, settings=RuleSettings(headroom=0.7))
    assert rec is not None and rec.action is Action.MIG
    assert recommend(use, [MIG_1G], window_hours=WINDOW_H, settings=RuleSettings(headroom=0.69)) is None


def test_scale_to_zero_at_exactly_the_idle_threshold_and_its_reasons() -> None:
    """3 % falls in [2 %, 5 %): p95 reads 5 %, the threshold itself, which is idle. Now 4.00 x 730 = 2920.00."""
    use = _workload("notebook", Placement(H100), [_device(0.03, 2.0)], price=4.00)
    _check(recommend(use, [], window_hours=WINDOW_H),
           _row(use, action=Action.SCALE_TO_ZERO, target=Placement(H100, None, 0, None),
                evidence=Evidence(0.05, 0.05, 2 * GIB, 24.0), money=(2920.00, 0.0),
                reason="p95 utilisation stayed below 5% for the whole window"))
    lax = recommend(_workload("notebook", Placement(H100), [_device(0.08, 2.0)], price=4.00), [],
                    window_hours=WINDOW_H, settings=RuleSettings(idle_threshold=0.10))
    assert lax is not None and lax.reason == "p95 utilisation stayed below 10% for the whole window"
    replica = _workload("dev", Placement(L4, replicas=4), [_device(0.0, None)], price=0.20)
    rec = recommend(replica, [], window_hours=WINDOW_H)
    assert rec is not None and rec.target == Placement(L4, None, 0, 4)
    assert rec.reason == ("p95 utilisation stayed below 5% for the whole window; its memory is not measured "
                          "(a shared GPU's memory is not one pod's)")
    mig = recommend(_workload("dev", Placement(A100, "1g.10gb"), [_device(0.0, 1.0)], price=0.45), [],
                    window_hours=WINDOW_H)
    assert mig is not None and mig.target == Placement(A100, "1g.10gb", 0)


def test_no_utilisation_evidence_is_never_idle_and_counts_as_busy() -> None:
    """A device whose histogram is empty: p50 and p95 unknown, not idle, and a GPU that was busy: of four
    H100s (70 %, unknown, 0.5 %, 0.5 %) two are kept. Now 4 x 4.00 x 730 = 11680.00, after half."""
    empty = DeviceUse(UtilHistogram.empty(), 2 * GIB)
    alone = _workload("job", Placement(H100), [empty], price=4.00)
    assert recommend(alone, [Offer(Placement(L40S), 1.50)], window_hours=WINDOW_H) is None
    devices = [_device(0.70, 60.0), empty, _device(0.005, 0.5), _device(0.005, 0.5)]
    use = _workload("trainer", Placement(H100, gpus=4), devices, price=4.00)
    _check(recommend(use, [], window_hours=WINDOW_H),
           _row(use, action=Action.FEWER_GPUS, target=Placement(H100, None, 2),
                evidence=Evidence(0.01, 0.80, 60 * GIB, 24.0), money=(11680.00, 5840.00),
                reason="at most 2 of its 4 GPUs were ever busy (p95 above 5%) in any pod"))


def test_a_mig_instance_is_rescaled_by_its_own_share() -> None:
    """8 % of a 3g.40gb (3/7 of an A100) is 0.10 x 3/7 x 312 = 13.37 TFLOPS, which a 1g.10gb holds
    (0.8 x 312 / 7 = 35.66). Now 1.35 x 730 = 985.50, after 0.45 x 730 = 328.50."""
    use = _workload("llm-serve", Placement(A100, "3g.40gb"), [_device(0.08, 6.0)], price=1.35)
    rec = recommend(use, [MIG_1G], window_hours=WINDOW_H)
    assert rec is not None and rec.target == Placement(A100, "1g.10gb", 1)
    assert rec.monthly_cost_after == pytest.approx(328.50)


def test_a_device_without_evidence_counts_as_fully_busy_not_more() -> None:
    """An H100 with no utilisation samples is taken at 100 %: 989 TFLOPS, which an H200 (989) holds with
    headroom 1.0; with no device at all the same. A 1/2 share of an H100 (494.5) holds it at headroom 2.0."""
    h200 = Offer(Placement("NVIDIA H200"), 3.00)
    full = RuleSettings(headroom=1.0)
    use = _workload("job", Placement(H100), [DeviceUse(UtilHistogram.empty(), 2 * GIB)], price=4.00)
    rec = recommend(use, [h200], window_hours=WINDOW_H, settings=full)
    assert rec is not None and rec.action is Action.SMALLER_GPU
    assert rec.reason.startswith("p95 100% rescaled by FP16 throughput")
    bare = dataclasses.replace(use, pods=(PodUse("p", ()),))
    rec = recommend(bare, [Offer(Placement(H100, replicas=2), 2.00)], window_hours=WINDOW_H,
                    settings=RuleSettings(headroom=2.0))
    assert rec is not None and rec.action is Action.TIME_SLICE and rec.evidence.util_p95 is None


def test_a_replicas_memory_is_the_gpus_divided_and_rounded_down() -> None:
    """An L4 in 7 replicas gives 24e9 // 7 = 3428571428 bytes each; a 2857142857-byte peak x 1.2 =
    3428571428.4 does not fit, one byte less (3428571427.2) does."""
    def ocr(peak: int) -> WorkloadUse:
        return _workload("ocr", Placement(L4), [DeviceUse(UtilHistogram.of([(0.08, 86400.0)]), peak)], price=0.80)
    seventh = [Offer(Placement(L4, replicas=7), 0.10)]
    assert recommend(ocr(2857142857), seventh, window_hours=WINDOW_H) is None
    rec = recommend(ocr(2857142856), seventh, window_hours=WINDOW_H)
    assert rec is not None and rec.target == Placement(L4, None, 1, 7)
