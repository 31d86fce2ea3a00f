"""The meter: exact pod boundaries, the conservation buckets, capacity without DCGM, and the cumulative
counters of whole GPUs and MIG, with the arithmetic by hand."""

from __future__ import annotations

import pytest

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import attribute
from exporter.agent.meter import Meter
from exporter.model.holding import PodLifetime
from exporter.model.pod_resources import ContainerDevices

H100 = "NVIDIA H100 80GB HBM3"
DCGM = {(u, ""): DcgmDevice(gpu_uuid=u, index=str(i), model=H100, gr_engine=0.5)
        for i, u in enumerate(("GPU-a", "GPU-b"))}
P = ContainerDevices("ns", "p", "c", "nvidia.com/gpu", ("GPU-a",))


def tick(m: Meter, now: float, held: list[ContainerDevices] | None,
         lives: dict[tuple[str, str], PodLifetime] | None = None, cap: float = 60.0) -> None:
    attribution = None if held is None else attribute(held, DCGM, allocatable=None, mig_known={}, inventory={})
    m.tick(now, attribution, dcgm=DCGM, cap=cap, lifetimes=lives, skew=15.0)


def total(m: Meter) -> float:
    return (sum(h.usage.allocated for h in m.holders.values()) + sum(m.unallocated.values())
            + sum(m.unobserved.values()))


def dev(uuid: str, util: float | None, gi: str | None = None, profile: str | None = None,
        pods: set[tuple[str, str, str]] | None = None, energy: float | None = None) -> DcgmDevice:
    return DcgmDevice(gpu_uuid=uuid, index="0", model=H100, gpu_instance_id=gi, mig_profile=profile,
                      gr_engine=util, pods=pods or set(), energy=energy)


def test_pod_starting_mid_interval_pays_from_its_start_time() -> None:
    """Ticks 0, 15, 30; p starts at 7 (listed from 15): 15 - 7 = 8 s, then 15 s: 23 s, used 11.5.
    Unallocated: 2 GPUs x 30 s - 23 = 37 s. started_at = 0."""
    m = Meter(node="n")
    lives = {("ns", "p"): PodLifetime(start=7.0, requests={"nvidia.com/gpu": 1})}
    tick(m, 0.0, [], lives)
    tick(m, 15.0, [P], lives)
    tick(m, 30.0, [P], lives)
    u = m.holders["ns/p/c/GPU-a"].usage
    assert (u.allocated, u.used) == pytest.approx((23.0, 11.5))
    assert m.unallocated[H100] == pytest.approx(37.0) and m.started_at == 0.0
    assert m.tick_resolution_total == 0


def test_pod_ending_mid_interval_is_charged_to_finished_at_at_its_last_reading() -> None:
    """p listed at 0 and 15, finished at 22, gone at 30: 15 + (22 - 15) = 22 s at 0.5: used 11.
    Unallocated: 2 x 30 - 22 = 38 s."""
    m = Meter(node="n")
    tick(m, 0.0, [P])
    tick(m, 15.0, [P])
    tick(m, 30.0, [], {("ns", "p"): PodLifetime(start=0.0, finished=22.0, requests={"nvidia.com/gpu": 1})})
    h = m.holders["ns/p/c/GPU-a"]
    assert (h.usage.allocated, h.usage.used, h.usage.unmeasured) == pytest.approx((22.0, 11.0, 0.0))
    assert h.active is False and m.unallocated[H100] == pytest.approx(38.0)


def test_without_times_boundaries_fall_back_to_the_tick_and_are_counted() -> None:
    """No watch: p appears at 15 (charged the whole 15 s window) and vanishes at 45 (nothing of
    [30, 45] charged): 30 s, two boundaries counted."""
    m = Meter(node="n")
    tick(m, 0.0, [])
    for t in (15.0, 30.0):
        tick(m, t, [P])
    tick(m, 45.0, [])
    assert m.holders["ns/p/c/GPU-a"].usage.allocated == pytest.approx(30.0)
    assert m.tick_resolution_total == 2


def test_skewed_start_falls_back_to_the_tick() -> None:
    """startTime 100 s in the future (clock skew beyond a tick): charged the whole window, counted."""
    m = Meter(node="n")
    tick(m, 0.0, [])
    tick(m, 15.0, [P], {("ns", "p"): PodLifetime(start=115.0)})
    assert m.holders["ns/p/c/GPU-a"].usage.allocated == pytest.approx(15.0) and m.tick_resolution_total == 1


def test_pod_living_between_two_ticks_is_unmeasured_on_unlisted_devices() -> None:
    """Only the watch saw s (2 GPUs, [3, 8]): 2 holders unlisted/nvidia.com/gpu/0 and /1, 5 s each,
    unmeasured. Unallocated: 2 x 15 - 10 = 20 s. Next tick it is not charged again."""
    m = Meter(node="n")
    lives = {("ns", "s"): PodLifetime(start=3.0, finished=8.0, requests={"nvidia.com/gpu": 2}, container="c")}
    tick(m, 0.0, [], lives)
    tick(m, 15.0, [], lives)
    tick(m, 30.0, [], lives)
    for i in (0, 1):
        h = m.holders[f"ns/s/c/unlisted/nvidia.com/gpu/{i}"]
        assert (h.usage.allocated, h.usage.unmeasured, h.usage.used) == pytest.approx((5.0, 5.0, 0.0))
        assert h.model == H100 and h.active is False
    assert m.unallocated[H100] == pytest.approx(2 * 30 - 10)


def test_cap_excess_and_lost_pod_resources_go_to_unobserved() -> None:
    """Tick 0, then 100 s later with cap 60: 60 s charged (p 60, unallocated 60), 40 s x 2 GPUs = 80
    unobserved. Then pod-resources unreachable beyond the cap for 30 s: 2 x 30 = 60 more unobserved.
    Total 80 + 60 + 60 + 60 = 260 = 2 GPUs x 130 s."""
    m = Meter(node="n")
    tick(m, 0.0, [P])
    tick(m, 100.0, [P])
    assert m.holders["ns/p/c/GPU-a"].usage.allocated == pytest.approx(60.0)
    assert m.unobserved[H100] == pytest.approx(80.0) and m.capped_seconds_total == pytest.approx(40.0)
    tick(m, 130.0, None)
    assert m.unobserved[H100] == pytest.approx(140.0)
    assert total(m) == pytest.approx(2 * 130.0)


def test_capacity_from_allocatable_when_dcgm_never_answered() -> None:
    """No DCGM ever: 2 GPUs from GetAllocatableResources (GPU-a, GPU-b with 4 replicas), model unknown.
    p holds GPU-a for 15 s: unallocated 2 x 15 - 15 = 15 s, all of model 'unknown'."""
    m = Meter(node="n")
    alloc = {"nvidia.com/gpu": ("GPU-a",), "nvidia.com/gpu.shared": tuple(f"GPU-b::{k}" for k in range(4))}
    for t in (0.0, 15.0):
        m.tick(t, attribute([P], None, allocatable=alloc, mig_known={}, inventory={}), dcgm=None, cap=60.0,
               allocatable=alloc)
    assert m.capacity(alloc) == {"unknown": 2.0}
    assert m.unallocated == {"unknown": pytest.approx(15.0)}


def test_meter_whole_gpu_dcgm_down_and_cap() -> None:
    """Ticks at 0, 15, 30 (DCGM down), 100 (cap 60): allocated 15+15+60, used 15x0.4, unmeasured 15."""
    dcgm = {("GPU-a", ""): dev("GPU-a", 0.4, energy=1000.0)}
    held = [ContainerDevices("ns", "p", "c", "nvidia.com/gpu", ("GPU-a",))]
    m = Meter(node="n")
    m.tick(0.0, attribute(held, dcgm, allocatable=None, mig_known={}, inventory={}), dcgm=dcgm, cap=60)
    dcgm[("GPU-a", "")].energy = 1300.0
    m.tick(15.0, attribute(held, dcgm, allocatable=None, mig_known={}, inventory={}), dcgm=dcgm, cap=60)
    m.tick(30.0, attribute(held, None, allocatable=None, mig_known={}, inventory=m.inventory), dcgm=None, cap=60)
    stats = m.tick(100.0, attribute(held, dcgm, allocatable=None, mig_known={}, inventory={}), dcgm=dcgm, cap=60)
    u = m.holders["ns/p/c/GPU-a"].usage
    assert u.allocated == pytest.approx(90.0)
    assert u.used == pytest.approx(15 * 0.4 + 60 * 0.4)
    assert u.unmeasured == pytest.approx(15.0)
    assert u.energy_j == pytest.approx(300.0)
    assert stats.capped_seconds == pytest.approx(10.0) and m.capped_seconds_total == pytest.approx(10.0)


def test_meter_unallocated_counts_uncarved_and_unheld() -> None:
    """GPU p carved 3g.40gb x2 (one held) + 1 slice uncarved; GPU q unheld: 60 s -> 60 x (2 - 3/7)."""
    dcgm = {("GPU-p", "1"): dev("GPU-p", 0.5, "1", "3g.40gb", {("ns", "s", "c")}),
            ("GPU-p", "2"): dev("GPU-p", 0.0, "2", "3g.40gb"), ("GPU-q", ""): dev("GPU-q", 0.0)}
    held = [ContainerDevices("ns", "s", "c", "nvidia.com/mig-3g.40gb", ("MIG-1",))]
    m = Meter(node="n")
    m.tick(0.0, attribute(held, dcgm, allocatable=None, mig_known={}, inventory={}), dcgm=dcgm, cap=120)
    m.tick(60.0, attribute(held, dcgm, allocatable=None, mig_known=dict(m.mig_known), inventory={}), dcgm=dcgm, cap=120)
    assert m.unallocated[H100] == pytest.approx(60 * (2 - 3 / 7))


def test_meter_marks_gone_holders_inactive_and_drops_after_ack() -> None:
    """A pod that disappears keeps its counters until acknowledged and past retention."""
    dcgm = {("GPU-a", ""): dev("GPU-a", 1.0)}
    held = [ContainerDevices("ns", "p", "c", "nvidia.com/gpu", ("GPU-a",))]
    m = Meter(node="n")
    m.tick(0.0, attribute(held, dcgm, allocatable=None, mig_known={}, inventory={}), dcgm=dcgm, cap=60)
    m.tick(15.0, attribute(held, dcgm, allocatable=None, mig_known={}, inventory={}), dcgm=dcgm, cap=60)
    m.tick(30.0, attribute([], dcgm, allocatable=None, mig_known={}, inventory={}), dcgm=dcgm, cap=60)
    assert m.holders["ns/p/c/GPU-a"].active is False
    assert m.drop_acknowledged(100.0, acked_until=None, retention=60, safety=1000) == 0
    assert m.drop_acknowledged(100.0, acked_until=20.0, retention=60, safety=1000) == 1
