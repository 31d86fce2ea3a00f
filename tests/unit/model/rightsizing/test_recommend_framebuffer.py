"""Framebuffer peaks for right-sizing: measured per holder only where the device is the holder's alone."""

from __future__ import annotations

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import attribute
from exporter.agent.meter import Meter
from exporter.agent.publish import snapshot_of
from exporter.agent.state import dump_meter, load_meter
from exporter.model.pod_resources import ContainerDevices

H100 = "NVIDIA H100 80GB HBM3"
MIB = 1048576.0
HOUR = 7200.0  # a clock-hour boundary (2 x 3600)


def _dcgm(fb_a: float, fb_b: float) -> dict[tuple[str, str], DcgmDevice]:
    return {("GPU-a", ""): DcgmDevice(gpu_uuid="GPU-a", index="0", model=H100, gr_engine=0.3, fb_used=fb_a),
            ("GPU-b", ""): DcgmDevice(gpu_uuid="GPU-b", index="1", model=H100, gr_engine=0.3, fb_used=fb_b)}


HELD = [ContainerDevices("ns", "whole", "c", "nvidia.com/gpu", ("GPU-a",)),
        ContainerDevices("ns", "s1", "c", "nvidia.com/gpu.shared", ("GPU-b::0",)),
        ContainerDevices("ns", "s2", "c", "nvidia.com/gpu.shared", ("GPU-b::1",))]
ALLOC: dict[str, tuple[str, ...]] = {"nvidia.com/gpu.shared": ("GPU-b::0", "GPU-b::1")}


def _tick(m: Meter, at: float, fb_a: float) -> None:
    dcgm = _dcgm(fb_a, 9000 * MIB)
    m.tick(at, attribute(HELD, dcgm, allocatable=ALLOC, mig_known={}, inventory={}), dcgm=dcgm, cap=60,
           allocatable=ALLOC)


def test_peak_per_clock_hour_whole_gpu_only_and_survives_restart() -> None:
    """Readings 6000, 8000, 7000 MiB in one hour: peak 8000 MiB; the next hour starts again at its first
    reading (5000). The time-sliced holders' memory is the GPU's, shared: not theirs, so None."""
    m = Meter(node="n")
    for at, fb in ((HOUR + 10, 6000), (HOUR + 25, 8000), (HOUR + 40, 7000)):
        _tick(m, at, fb * MIB)
    whole = m.holders["ns/whole/c/GPU-a"]
    assert (whole.fb_peak_hour, whole.fb_peak_bytes) == (7200, 8000 * MIB)
    snap = {h.pod: h for h in snapshot_of(m, HOUR + 40, dcgm_up=True, podresources_up=True).holders}
    assert snap["whole"].fb_peak_bytes == 8000 * MIB and snap["whole"].fb_peak_hour == 7200
    assert snap["s1"].fb_peak_bytes is None and snap["s2"].fb_peak_bytes is None
    restored = load_meter(dump_meter(m), "n")
    assert restored.holders["ns/whole/c/GPU-a"].fb_peak_bytes == 8000 * MIB
    _tick(restored, HOUR + 3600 + 5, 5000 * MIB)
    nxt = restored.holders["ns/whole/c/GPU-a"]
    assert (nxt.fb_peak_hour, nxt.fb_peak_bytes) == (10800, 5000 * MIB)
