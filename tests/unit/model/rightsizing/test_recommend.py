"""Right-sizing rules, each with its arithmetic written out by hand.

Prices in these examples: A100-80GB 3.00 per GPU-hour, its 1g.10gb instance 0.45, 2g.20gb 0.90,
3g.40gb 1.35; H100 4.00; L4 0.80 (and 0.20 per 1/4 time-sliced replica). A month is 730 hours.
Every workload ran for the whole 24-hour window unless said otherwise.
"""

from __future__ import annotations

import pytest

from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.rightsizing.recommend import evidence_of, recommend, recommend_all
from exporter.model.rightsizing.types import Action, DeviceUse, Offer, Placement, PodUse, RuleSettings, WorkloadUse

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
L4 = "NVIDIA L4"
GIB = 2**30
WINDOW_H = 24.0

A100_WHOLE = Offer(Placement(A100), 3.00)
H100_WHOLE = Offer(Placement(H100), 4.00)
MIG_1G = Offer(Placement(A100, "1g.10gb"), 0.45)
MIG_2G = Offer(Placement(A100, "2g.20gb"), 0.90)
MIG_3G = Offer(Placement(A100, "3g.40gb"), 1.35)
L4_WHOLE = Offer(Placement(L4), 0.80)
L4_SLICE = Offer(Placement(L4, replicas=4), 0.20)


def _device(util: float, fb_gib: float | None, hours: float = WINDOW_H) -> DeviceUse:
    return DeviceUse(UtilHistogram.of([(util, hours * 3600)]),
                     None if fb_gib is None else int(fb_gib * GIB))


def _workload(name: str, placement: Placement, devices: list[DeviceUse], *, price: float) -> WorkloadUse:
    n = placement.gpus
    pods = (PodUse(f"{name}-0", tuple(devices)),)
    return WorkloadUse(namespace="team", workload=name, placement=placement, pods=pods,
                       allocated_device_hours=n * WINDOW_H, booked_cost=n * WINDOW_H * price,
                       hours_observed=WINDOW_H, currency="USD")


def test_inference_at_8_percent_on_a_whole_a100_moves_to_the_smallest_fitting_mig_instance() -> None:
    """8 % falls in the [5 %, 10 %) bucket: p95 reads 10 %. Demand 0.10 x 312 TFLOPS = 31.2; 1g.10gb gives
    1/7 x 312 = 44.57, 80 % of it 35.66 >= 31.2. Memory 6 GiB x 1.2 = 7.2 GiB = 7.73e9 <= 10e9 bytes.
    Now 24 h x 3.00 / 24 h x 730 = 2190.00; after 1 x 0.45 x 730 = 328.50; savings 1861.50. 2g/3g fit
    too but save less (657.00, 985.50 after); the L4 (0.80 x 730 = 584.00 after) also fits
    (0.10 x 312 / 121 = 25.8 % <= 80 %) but saves less than 1g.10gb."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    rec = recommend(use, [A100_WHOLE, MIG_3G, MIG_2G, MIG_1G, L4_WHOLE], window_hours=WINDOW_H)
    assert rec is not None
    assert rec.action is Action.MIG
    assert rec.target == Placement(A100, "1g.10gb", 1)
    assert rec.monthly_cost_now == pytest.approx(2190.00)
    assert rec.monthly_cost_after == pytest.approx(328.50)
    assert rec.monthly_savings == pytest.approx(1861.50)
    assert rec.evidence.util_p95 == pytest.approx(0.10)
    assert rec.evidence.framebuffer_peak_bytes == 6 * GIB
    assert "1g.10gb" in rec.reason


def test_four_gpu_pod_with_two_idle_devices_keeps_two() -> None:
    """Two H100s at 70 % (p95 bucket 80 %), two at 0.5 % (bucket 1 %, below the 5 % idle threshold):
    needs 2. Now 4 x 4.00 x 730 = 11680.00; after 2 x 4.00 x 730 = 5840.00; savings 5840.00."""
    devices = [_device(0.70, 60.0), _device(0.70, 60.0), _device(0.005, 0.5), _device(0.005, 0.5)]
    use = _workload("trainer", Placement(H100, gpus=4), devices, price=4.00)
    rec = recommend(use, [H100_WHOLE, L4_WHOLE], window_hours=WINDOW_H)
    assert rec is not None
    assert rec.action is Action.FEWER_GPUS
    assert rec.target == Placement(H100, None, 2)
    assert rec.monthly_cost_now == pytest.approx(11680.00)
    assert rec.monthly_cost_after == pytest.approx(5840.00)
    assert rec.monthly_savings == pytest.approx(5840.00)


def test_notebook_idle_for_the_window_scales_to_zero() -> None:
    """0 % all window on an H100: p95 bucket 1 % <= 5 %. Now 4.00 x 730 = 2920.00, after 0: saves 2920.00,
    more than any resize (an L4 would still cost 584.00)."""
    use = _workload("notebook", Placement(H100), [_device(0.0, 2.0)], price=4.00)
    rec = recommend(use, [H100_WHOLE, L4_WHOLE, L4_SLICE], window_hours=WINDOW_H)
    assert rec is not None
    assert rec.action is Action.SCALE_TO_ZERO
    assert rec.target.gpus == 0
    assert rec.monthly_savings == pytest.approx(2920.00)
    assert rec.monthly_cost_after == 0.0


def test_busy_training_job_gets_no_row() -> None:
    """8 H100s at 92 % (bucket 100 %): demand 989 TFLOPS per GPU; nothing cheaper holds it."""
    devices = [_device(0.92, 70.0) for _ in range(8)]
    use = _workload("pretrain", Placement(H100, gpus=8), devices, price=4.00)
    assert recommend(use, [H100_WHOLE, A100_WHOLE, MIG_3G, L4_WHOLE, L4_SLICE], window_hours=WINDOW_H) is None


def test_thirty_gib_workload_without_a_fitting_profile_gets_no_mig_row() -> None:
    """30 GiB x 1.2 = 36 GiB = 38.65e9 bytes > 20e9 (2g.20gb) and > 10e9 (1g.10gb): no MIG. The L4's
    24e9 bytes are too small as well, so nothing at all is proposed."""
    use = _workload("embedder", Placement(A100), [_device(0.08, 30.0)], price=3.00)
    assert recommend(use, [A100_WHOLE, MIG_1G, MIG_2G, L4_WHOLE], window_hours=WINDOW_H) is None


def test_thirty_gib_workload_fits_3g_40gb_when_the_cluster_offers_it() -> None:
    """36 GiB = 38.65e9 <= 40e9: 3g.40gb fits; after 1.35 x 730 = 985.50, savings 2190.00 - 985.50 = 1204.50."""
    use = _workload("embedder", Placement(A100), [_device(0.08, 30.0)], price=3.00)
    rec = recommend(use, [A100_WHOLE, MIG_1G, MIG_2G, MIG_3G], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.MIG and rec.target.mig_profile == "3g.40gb"
    assert rec.monthly_savings == pytest.approx(1204.50)


def test_smaller_gpu_when_no_mig_is_offered() -> None:
    """A100 at 25 % (bucket 30 %): demand 0.30 x 312 = 93.6 TFLOPS <= 0.8 x 121 = 96.8 on an L4; 10 GiB x 1.2 =
    12 GiB = 12.9e9 <= 24e9. After 0.80 x 730 = 584.00; savings 2190.00 - 584.00 = 1606.00. A 1/4 L4 slice
    (capacity 30.25 TFLOPS) does not hold 93.6."""
    use = _workload("ranker", Placement(A100), [_device(0.25, 10.0)], price=3.00)
    rec = recommend(use, [A100_WHOLE, L4_WHOLE, L4_SLICE], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.SMALLER_GPU
    assert rec.target == Placement(L4, None, 1)
    assert rec.monthly_savings == pytest.approx(1606.00)


def test_time_slice_when_memory_is_unmeasured_and_compute_is_low() -> None:
    """L4 at 8 % (bucket 10 %), memory not measured: demand 0.10 x 121 = 12.1 <= 0.8 x 121/4 = 24.2.
    MIG and smaller GPUs need memory evidence, a shared slice only needs none against it.
    After 0.20 x 730 = 146.00; now 0.80 x 730 = 584.00; savings 438.00."""
    use = _workload("batch-ocr", Placement(L4), [_device(0.08, None)], price=0.80)
    rec = recommend(use, [L4_WHOLE, L4_SLICE, MIG_1G], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.TIME_SLICE
    assert rec.target == Placement(L4, None, 1, 4)
    assert rec.monthly_savings == pytest.approx(438.00)


def test_time_slice_refused_when_memory_evidence_speaks_against_sharing() -> None:
    """20 GiB x 1.2 = 24 GiB = 25.8e9 > 24e9 / 4 = 6e9 bytes: the share's memory cannot hold it."""
    use = _workload("batch-ocr", Placement(L4), [_device(0.08, 20.0)], price=0.80)
    assert recommend(use, [L4_WHOLE, L4_SLICE], window_hours=WINDOW_H) is None


def test_never_a_target_the_cluster_does_not_offer() -> None:
    """The 8 % A100 workload with no MIG profile and no other model offered: nothing to move to."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    assert recommend(use, [A100_WHOLE], window_hours=WINDOW_H) is None


def test_too_little_evidence_gives_no_row() -> None:
    use = _workload("notebook", Placement(H100), [_device(0.0, 2.0)], price=4.00)
    assert recommend(use, [H100_WHOLE], window_hours=WINDOW_H, settings=RuleSettings(min_evidence_hours=48)) is None


def test_part_time_workload_is_costed_at_its_pace() -> None:
    """Held 12 of 24 hours (12 device-hours, 36.00 booked): now 36.00 / 24 x 730 = 1095.00;
    after 12 / 24 x 0.45 x 730 = 164.25; savings 930.75."""
    use = WorkloadUse(namespace="team", workload="llm-serve", placement=Placement(A100),
                      pods=(PodUse("p", (_device(0.08, 6.0, hours=12.0),)),), allocated_device_hours=12.0,
                      booked_cost=36.0, hours_observed=24.0, currency="USD")
    rec = recommend(use, [MIG_1G], window_hours=WINDOW_H)
    assert rec is not None
    assert rec.monthly_cost_now == pytest.approx(1095.00)
    assert rec.monthly_cost_after == pytest.approx(164.25)
    assert rec.monthly_savings == pytest.approx(930.75)


def test_pooled_pods_p95_and_peak() -> None:
    """Two pods of one workload: 90 s at 3 % and 10 s at 45 % -> p50 bucket 5 %, p95 bucket 50 %
    (90 % of seconds are at or below 5 %, the 95th lies in [40 %, 50 %)). Peak is the larger pod's."""
    pods = (PodUse("a", (DeviceUse(UtilHistogram.of([(0.03, 90.0)]), 4 * GIB),)),
            PodUse("b", (DeviceUse(UtilHistogram.of([(0.45, 10.0)]), 5 * GIB),)))
    use = WorkloadUse(namespace="n", workload="w", placement=Placement(A100), pods=pods,
                      allocated_device_hours=1.0, booked_cost=3.0, hours_observed=1.0, currency="USD")
    ev = evidence_of(use)
    assert ev.util_p50 == pytest.approx(0.05)
    assert ev.util_p95 == pytest.approx(0.50)
    assert ev.framebuffer_peak_bytes == 5 * GIB


def test_rows_sorted_by_savings_and_one_per_workload() -> None:
    notebook = _workload("notebook", Placement(H100), [_device(0.0, 2.0)], price=4.00)
    serve = _workload("llm-serve", Placement(A100), [_device(0.08, 6.0)], price=3.00)
    rows = recommend_all([serve, notebook], [MIG_1G, L4_WHOLE], window_hours=WINDOW_H)
    assert [(r.workload, r.action) for r in rows] == [("notebook", Action.SCALE_TO_ZERO), ("llm-serve", Action.MIG)]


def test_framebuffer_margin_pushes_to_the_next_profile() -> None:
    """8.5 GiB x 1.2 = 10.2 GiB = 10.95e9 > 10e9: 1g.10gb is too small (without the margin 9.13e9 would fit);
    2g.20gb holds it. After 0.90 x 730 = 657.00; savings 2190.00 - 657.00 = 1533.00."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, 8.5)], price=3.00)
    rec = recommend(use, [MIG_1G, MIG_2G, MIG_3G], window_hours=WINDOW_H)
    assert rec is not None and rec.target.mig_profile == "2g.20gb"
    assert rec.monthly_savings == pytest.approx(1533.00)


def test_compute_headroom_pushes_to_the_next_profile() -> None:
    """22 % -> p95 bucket 25 %: demand 0.25 x 312 = 78.0. 2g.20gb gives 2/7 x 312 = 89.14, 80 % = 71.31 < 78.0;
    3g.40gb gives 133.71, 80 % = 106.97 >= 78.0. After 1.35 x 730 = 985.50; savings 1204.50."""
    use = _workload("llm-serve", Placement(A100), [_device(0.22, 6.0)], price=3.00)
    rec = recommend(use, [MIG_1G, MIG_2G, MIG_3G], window_hours=WINDOW_H)
    assert rec is not None and rec.target.mig_profile == "3g.40gb"
    assert rec.monthly_savings == pytest.approx(1204.50)


def test_no_mig_or_smaller_gpu_without_memory_evidence() -> None:
    """8 % on an A100 whose framebuffer was not measured: compute fits 1g.10gb and an L4, memory is unknown,
    so neither is proposed (a time-sliced share would be, but none is offered)."""
    use = _workload("llm-serve", Placement(A100), [_device(0.08, None)], price=3.00)
    assert recommend(use, [MIG_1G, L4_WHOLE], window_hours=WINDOW_H) is None


def test_time_sliced_replica_is_only_ever_scaled_to_zero() -> None:
    """A 1/4 L4 replica's 8 % is its whole GPU's (shared): an 1/8 slice at 0.10 is not proposed. Idle (0 %),
    it scales to zero: now 0.20 x 730 = 146.00."""
    eighth = Offer(Placement(L4, replicas=8), 0.10)
    busy = _workload("dev", Placement(L4, replicas=4), [_device(0.08, None)], price=0.20)
    assert recommend(busy, [L4_SLICE, eighth], window_hours=WINDOW_H) is None
    idle = _workload("dev", Placement(L4, replicas=4), [_device(0.0, None)], price=0.20)
    rec = recommend(idle, [L4_SLICE, eighth], window_hours=WINDOW_H)
    assert rec is not None and rec.action is Action.SCALE_TO_ZERO
    assert rec.monthly_savings == pytest.approx(146.00)
