"""Right-sizing rules: from a workload's utilisation and memory evidence to one action and its savings.

Money: ``now = booked cost / window hours x 730`` (what the workload costs at its observed pace);
``after = average devices held x (target gpus / current gpus) x target price per device-hour x 730``.
Compute is compared in "TFLOPS actually used": ``p95 x share of the GPU x dense FP16 TFLOPS of the
model`` (``recommend_gpus``); a target fits when that is at most ``headroom`` (80 %) of the target's
``share x TFLOPS``, and its memory holds ``framebuffer peak x 1.2``. Only offers the cluster already
provides are targets (held by a workload or free in the window); of all candidate actions the one saving most
wins (within a cent, a free one), and none that saves nothing.
A time-sliced replica's utilisation is its GPU's (shared with others), so only ``scale_to_zero`` is
proposed for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.rightsizing.gpus import gpu_spec, mig_profile_memory_bytes
from exporter.model.rightsizing.types import (
    HOURS_PER_MONTH,
    Action,
    DeviceUse,
    Evidence,
    Offer,
    Placement,
    Recommendation,
    RuleSettings,
    WorkloadUse,
)

__all__ = ["evidence_of", "recommend", "recommend_all"]


@dataclass(frozen=True, slots=True)
class _Candidate:
    action: Action
    target: Placement
    hourly_price: float
    reason: str
    free: bool = False  # a device the cluster had free: wins a tie


def _pooled(use: WorkloadUse) -> UtilHistogram:
    hist = UtilHistogram.empty()
    for pod in use.pods:
        for device in pod.devices:
            hist = hist.merge(device.utilization)
    return hist


def _fb_peak(devices: Iterable[DeviceUse]) -> int | None:
    """Peak over devices; unknown (None) as soon as one device's memory was not measured."""
    peaks = [d.framebuffer_peak_bytes for d in devices]
    if not peaks or any(p is None for p in peaks):
        return None
    return max(p for p in peaks if p is not None)


def evidence_of(use: WorkloadUse) -> Evidence:
    """The pooled p50/p95 (bucket upper bounds), framebuffer peak and observed hours of a workload."""
    hist = _pooled(use)
    return Evidence(util_p50=hist.quantile(0.5), util_p95=hist.quantile(0.95),
                    framebuffer_peak_bytes=_fb_peak(d for pod in use.pods for d in pod.devices),
                    hours_observed=use.hours_observed)


def _device_p95(device: DeviceUse) -> float:
    p95 = device.utilization.quantile(0.95)
    return 1.0 if p95 is None else p95  # no evidence for a device: treat it as busy, never shrink on it


def _demand_tflops(placement: Placement, p95: float) -> float | None:
    spec = gpu_spec(placement.gpu_model)
    return None if spec is None else p95 * placement.share * spec.fp16_dense_tflops


def _capacity(placement: Placement) -> tuple[float, int] | None:
    """(TFLOPS, memory bytes) one device of ``placement`` gives, None for a model not in the table."""
    spec = gpu_spec(placement.gpu_model)
    if spec is None:
        return None
    if placement.mig_profile:
        memory = mig_profile_memory_bytes(placement.mig_profile)
        if memory is None:
            return None
    elif placement.replicas:
        memory = spec.memory_bytes // placement.replicas
    else:
        memory = spec.memory_bytes
    return placement.share * spec.fp16_dense_tflops, memory


def _fits(target: Placement, *, demand: float, fb_peak: int | None, settings: RuleSettings,
          memory_required: bool) -> bool:
    capacity = _capacity(target)
    if capacity is None:
        return False
    tflops, memory = capacity
    if demand > settings.headroom * tflops + 1e-9:
        return False
    if fb_peak is None:
        return not memory_required
    return fb_peak * settings.memory_margin <= memory


def _scale_to_zero(use: WorkloadUse, ev: Evidence, *, settings: RuleSettings) -> list[_Candidate]:
    if ev.util_p95 is None or ev.util_p95 > settings.idle_threshold:
        return []
    target = Placement(use.placement.gpu_model, use.placement.mig_profile, 0, use.placement.replicas)
    unknown = "; its memory is not measured (a shared GPU's memory is not one pod's)" if use.placement.replicas else ""
    return [_Candidate(Action.SCALE_TO_ZERO, target, 0.0,
                       f"p95 utilisation stayed below {settings.idle_threshold:.0%} for the whole window{unknown}")]


def _fewer_gpus(use: WorkloadUse, current_price: float, *, settings: RuleSettings) -> list[_Candidate]:
    held = use.placement.gpus
    if held <= 1:
        return []
    busy = max(sum(1 for d in pod.devices if _device_p95(d) > settings.idle_threshold) for pod in use.pods)
    needed = max(busy, 1)
    if needed >= held:
        return []
    target = Placement(use.placement.gpu_model, use.placement.mig_profile, needed, use.placement.replicas)
    return [_Candidate(Action.FEWER_GPUS, target, current_price,
                       f"at most {needed} of its {held} GPUs were ever busy (p95 above "
                       f"{settings.idle_threshold:.0%}) in any pod")]


def _resized(use: WorkloadUse, offers: Sequence[Offer], *, ev: Evidence, settings: RuleSettings) -> list[_Candidate]:
    """mig, time_slice and smaller_gpu: one device per pod (or each device, for smaller_gpu) moved elsewhere."""
    current = use.placement
    worst = max((_device_p95(d) for pod in use.pods for d in pod.devices), default=1.0)
    demand = _demand_tflops(current, worst)
    current_spec = gpu_spec(current.gpu_model)
    if demand is None or current_spec is None:
        return []
    out: list[_Candidate] = []
    fb = ev.framebuffer_peak_bytes
    for offer in offers:
        target = offer.placement
        target_spec = gpu_spec(target.gpu_model)
        if target == Placement(current.gpu_model, current.mig_profile, 1, current.replicas) or (
                target_spec is not None and target_spec.vendor != current_spec.vendor):  # no CUDA <-> ROCm moves
            continue
        fits = _fits(target, demand=demand, fb_peak=fb, settings=settings, memory_required=not target.replicas)
        if not fits:
            continue
        if target.mig_profile and current.gpus == 1:
            out.append(_Candidate(Action.MIG, Placement(target.gpu_model, target.mig_profile, 1), offer.hourly_price,
                                  f"p95 {worst:.0%} and a {_gib(fb)} framebuffer peak fit a {target.mig_profile} "
                                  "MIG instance with 20 % headroom", offer.free))
        elif target.replicas and current.gpus == 1:
            out.append(_Candidate(Action.TIME_SLICE, Placement(target.gpu_model, None, 1, target.replicas),
                                  offer.hourly_price,
                                  f"p95 {worst:.0%} fits a 1/{target.replicas} time-sliced share and "
                                  + ("its memory was not measured" if fb is None else
                                     f"its {_gib(fb)} framebuffer peak fits its share of the memory"), offer.free))
        elif not target.mig_profile and not target.replicas:
            out.append(_Candidate(Action.SMALLER_GPU, Placement(target.gpu_model, None, current.gpus),
                                  offer.hourly_price,
                                  f"p95 {worst:.0%} rescaled by FP16 throughput and a {_gib(fb)} framebuffer peak "
                                  f"fit {target.gpu_model} with 20 % headroom", offer.free))
    return out


def _gib(value: int | None) -> str:
    return "unmeasured" if value is None else f"{value / 2**30:.1f} GiB"


def _monthly_after(use: WorkloadUse, window_hours: float, *, candidate: _Candidate) -> float:
    average_devices = use.allocated_device_hours / window_hours
    scale = candidate.target.gpus / use.placement.gpus
    return average_devices * scale * candidate.hourly_price * HOURS_PER_MONTH


def recommend(use: WorkloadUse, offers: Sequence[Offer], *, window_hours: float,
              settings: RuleSettings | None = None) -> Recommendation | None:
    """The one action saving most for ``use``, or None (too little evidence, nothing fits, nothing saved)."""
    rules = settings or RuleSettings()
    if use.hours_observed < rules.min_evidence_hours or not use.pods or use.allocated_device_hours <= 0:
        return None
    ev = evidence_of(use)
    current_price = use.booked_cost / use.allocated_device_hours
    candidates = _scale_to_zero(use, ev, settings=rules)
    if not use.placement.replicas:  # a replica's utilisation is its whole GPU's: only idleness is certain
        candidates += _fewer_gpus(use, current_price, settings=rules) + _resized(use, offers, ev=ev, settings=rules)
    now = use.booked_cost / window_hours * HOURS_PER_MONTH
    best: Recommendation | None = None
    best_free = False
    for candidate in candidates:
        after = _monthly_after(use, window_hours, candidate=candidate)
        if now - after <= 0.005 or (best is not None and not _better(now - after, best.monthly_savings,
                                                                     free=(candidate.free, best_free))):
            continue
        reason = candidate.reason + ("; the cluster has it free" if candidate.free else "")
        best = Recommendation(namespace=use.namespace, workload=use.workload, action=candidate.action,
                              current=use.placement, target=candidate.target, evidence=ev, monthly_cost_now=now,
                              monthly_cost_after=after, currency=use.currency, reason=reason)
        best_free = candidate.free
    return best


def _better(savings: float, best: float, *, free: tuple[bool, bool]) -> bool:
    """More savings wins; within a cent, capacity the cluster has free wins (``free``: the candidate's, the
    best's), since it is already paid for and needs no new device."""
    if abs(savings - best) <= 0.005 and free[0] != free[1]:
        return free[0]
    return savings > best


def recommend_all(uses: Iterable[WorkloadUse], offers: Sequence[Offer], *, window_hours: float,
                  settings: RuleSettings | None = None) -> list[Recommendation]:
    """Every workload's recommendation, largest monthly savings first."""
    rows = [r for u in uses if (r := recommend(u, offers, window_hours=window_hours, settings=settings))]
    return sorted(rows, key=lambda r: (-r.monthly_savings, r.namespace, r.workload))
