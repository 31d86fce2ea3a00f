"""AMD Instinct models in the right-sizing table (datasheet figures), and no recommendation across vendors."""

from __future__ import annotations

import pytest

from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.rightsizing.gpus import GB, gpu_spec
from exporter.model.rightsizing.recommend import recommend
from exporter.model.rightsizing.types import Action, DeviceUse, Offer, Placement, PodUse, WorkloadUse

MI300X = "AMD Instinct MI300X OAM"
MI325X = "AMD Instinct MI325X OAM"
L4 = "NVIDIA L4"
H = 24.0


@pytest.mark.parametrize(("model", "name", "tflops", "gb"), [
    (MI300X, "MI300X", 1307.4, 192), ("Aqua Vanjaram [Instinct MI300X VF]", "MI300X", 1307.4, 192),
    (MI325X, "MI325X", 1307.4, 256), ("AMD Instinct MI250X", "MI250X", 383.0, 128),
    ("AMD Instinct MI210", "MI210", 181.0, 64)])
def test_amd_rows(model: str, name: str, tflops: float, gb: int) -> None:
    spec = gpu_spec(model)
    assert spec is not None and (spec.name, spec.fp16_dense_tflops, spec.memory_bytes, spec.vendor) == (
        name, tflops, gb * GB, "amd")
    assert gpu_spec("102-G30211-0C") is None  # a board number alone names no row: never a target


def _use(model: str, util: float, fb_gib: float, price: float) -> WorkloadUse:
    device = DeviceUse(UtilHistogram.of([(util, H * 3600)]), int(fb_gib * 2**30))
    return WorkloadUse(namespace="t", workload="w", placement=Placement(model), pods=(PodUse("w-0", (device,)),),
                       allocated_device_hours=H, booked_cost=H * price, hours_observed=H, currency="USD")


def test_smaller_amd_gpu_within_the_vendor() -> None:
    """An MI325X at 25 % (bucket 30 %): 0.30 x 1307.4 = 392 TFLOPS <= 0.8 x 1307.4 on an MI300X, 10 GiB fits 192 GB:
    moved to the cheaper MI300X."""
    rec = recommend(_use(MI325X, 0.25, 10.0, 4.0), [Offer(Placement(MI300X), 3.0)], window_hours=H)
    assert rec is not None and rec.action is Action.SMALLER_GPU and rec.target == Placement(MI300X, None, 1)


def test_never_across_vendors() -> None:
    """An L4 at 8 % (bucket 10 %: 12.1 TFLOPS) fits a cheaper MI300X, and an MI300X at 7 % (0.10 x 1307.4 = 130.7
    TFLOPS <= 0.8 x 989) a cheaper H100: neither is proposed, CUDA and ROCm builds differ."""
    assert recommend(_use(L4, 0.08, 2.0, 3.0), [Offer(Placement(MI300X), 0.5)], window_hours=H) is None
    assert recommend(_use(MI300X, 0.07, 2.0, 3.2), [Offer(Placement("NVIDIA H100 80GB HBM3"), 0.5)],
                     window_hours=H) is None
