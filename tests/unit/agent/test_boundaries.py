"""The meter's exact boundaries, conservation buckets and state migration, with the arithmetic by hand."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.agent.attribution import attribute
from exporter.agent.dcgm_devices import DcgmDevice
from exporter.agent.lifecycle import PodLifetimes, finished_at
from exporter.agent.meter import Meter
from exporter.agent.state import dump_meter, load_meter
from exporter.clients.podresources import ContainerDevices
from exporter.model.holding import PodLifetime, free_capacity, request_fraction

H100 = "NVIDIA H100 80GB HBM3"
DCGM = {(u, ""): DcgmDevice(gpu_uuid=u, index=str(i), model=H100, gr_engine=0.5)
        for i, u in enumerate(("GPU-a", "GPU-b"))}
P = ContainerDevices("ns", "p", "c", "nvidia.com/gpu", ("GPU-a",))


def tick(m: Meter, now: float, held: list[ContainerDevices] | None,
         lives: dict[tuple[str, str], PodLifetime] | None = None, cap: float = 60.0) -> None:
    attribution = None if held is None else attribute(held, DCGM, None, {}, {})
    m.tick(now, attribution, DCGM, cap, lifetimes=lives, skew=15.0)


def total(m: Meter) -> float:
    return (sum(h.usage.allocated for h in m.holders.values()) + sum(m.unallocated.values())
            + sum(m.unobserved.values()))


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


def test_request_fractions() -> None:
    """Whole GPU 1; MIG 3g.40gb on an H100 3/7, 2g.12gb on an A30 2/4; a replica of 4 1/4."""
    assert request_fraction("nvidia.com/gpu", model=H100, replicas=1) == 1.0
    assert request_fraction("nvidia.com/mig-3g.40gb", model=H100, replicas=1) == pytest.approx(3 / 7)
    assert request_fraction("nvidia.com/mig-2g.12gb", model="NVIDIA A30", replicas=1) == pytest.approx(2 / 4)
    assert request_fraction("nvidia.com/gpu.shared", model=H100, replicas=4) == 0.25


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
        m.tick(t, attribute([P], None, alloc, {}, {}), None, 60.0, allocatable=alloc)
    assert m.capacity(alloc) == {"unknown": 2.0}
    assert m.unallocated == {"unknown": pytest.approx(15.0)}


def test_free_capacity_edge_cases() -> None:
    """8 GPUs x 10 s = 80. Held 30 of H100 + 20 of an unknown model: unallocated 80 - 30 - 20 = 30.
    Held 100 > 80: unallocated 0, oversubscribed 20 (30 + 0 ... = 100 - 80), identity kept:
    held + unallocated - oversubscribed = 80."""
    f = free_capacity({H100: 8.0}, {H100: 30.0, "unknown": 20.0}, 10.0)
    assert f.unallocated == {H100: pytest.approx(30.0)} and f.oversubscribed == 0.0
    f = free_capacity({H100: 8.0}, {H100: 70.0, "unknown": 30.0}, 10.0)
    assert f.unallocated == {H100: 0.0} and f.oversubscribed == pytest.approx(20.0)
    assert 100.0 + 0.0 - f.oversubscribed == pytest.approx(80.0)


def test_version_1_state_is_migrated_not_reset() -> None:
    """A version-1 file keeps its epoch and counters; started_at becomes its last tick; unobserved 0."""
    v1 = {"version": 1, "node": "n", "epoch": "e1", "seq": 7, "last_tick": 105.0, "capped_seconds_total": 3.0,
          "holders": [["ns", "p", "c", "GPU-a", "GPU-a", H100, None, 1.0, 90.0, 45.0, 0.0, 12.0, True, 105.0]],
          "unallocated": {H100: 90.0}, "energy_last": {}, "mig_known": {}, "inventory": {"GPU-a": H100}}
    m = load_meter(v1, "n")
    assert (m.epoch, m.seq, m.last_tick, m.started_at) == ("e1", 7, 105.0, 105.0)
    assert m.holders["ns/p/c/GPU-a"].usage.as_tuple() == (90.0, 45.0, 0.0, 12.0)
    assert dict(m.unobserved) == {} and dict(m.unallocated) == {H100: 90.0}
    again = load_meter(dump_meter(m), "n")
    assert dump_meter(again) == dump_meter(m) and dump_meter(m)["version"] == 2


def test_watch_events_give_start_finish_and_requests() -> None:
    """startTime and the last container's finishedAt (only once all terminated); GPU requests summed."""
    pod: dict[str, Any] = {"metadata": {"namespace": "ns", "name": "p"},
           "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}},
                                   {"name": "b", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}}]},
           "status": {"phase": "Running", "startTime": "2027-01-15T08:00:00Z", "containerStatuses": [
               {"state": {"terminated": {"finishedAt": "2027-01-15T08:00:30Z"}}},
               {"state": {"running": {}}}]}}
    lives = PodLifetimes()
    lives.on_event("ADDED", pod, now=0.0)
    life = lives.pods[("ns", "p")]
    assert life.finished is None and life.requests == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 1}
    assert life.container == "a"
    pod["status"]["containerStatuses"][1] = {"state": {"terminated": {"finishedAt": "2027-01-15T08:00:42Z"}}}
    pod["status"]["phase"] = "Succeeded"
    assert life.start is not None and finished_at(pod["status"]) == life.start + 42
    lives.on_event("MODIFIED", pod, now=0.0)
    assert ("ns", "p") in lives.finished and lives.pods[("ns", "p")].end == life.start + 42


def test_deleted_while_running_ends_when_the_deletion_was_seen() -> None:
    """No finishedAt: the pod's end is when DELETED arrived (a deletionTimestamp not after the start,
    as some servers send, is ignored)."""
    pod = {"metadata": {"namespace": "ns", "name": "p", "deletionTimestamp": "2027-01-15T08:00:00Z"},
           "spec": {"containers": []}, "status": {"startTime": "2027-01-15T08:00:00Z"}}
    lives = PodLifetimes()
    lives.on_event("DELETED", pod, now=1_800_000_123.0)
    assert lives.pods[("ns", "p")].end == 1_800_000_123.0
    lives.prune(1_800_000_200.0)
    assert lives.pods == {}
