"""The meter (cumulative per-holder counters), table-tested by hand on attributions of real shapes."""

from __future__ import annotations

import pytest

from exporter.agent.attribution import attribute
from exporter.agent.dcgm_devices import DcgmDevice
from exporter.agent.meter import Meter
from exporter.clients.podresources import ContainerDevices

H100 = "NVIDIA H100 80GB HBM3"


def dev(uuid: str, util: float | None, gi: str | None = None, profile: str | None = None,
        pods: set[tuple[str, str, str]] | None = None, energy: float | None = None) -> DcgmDevice:
    return DcgmDevice(gpu_uuid=uuid, index="0", model=H100, gpu_instance_id=gi, mig_profile=profile,
                      gr_engine=util, pods=pods or set(), energy=energy)


def test_meter_whole_gpu_dcgm_down_and_cap() -> None:
    """Ticks at 0, 15, 30 (DCGM down), 100 (cap 60): allocated 15+15+60, used 15x0.4, unmeasured 15."""
    dcgm = {("GPU-a", ""): dev("GPU-a", 0.4, energy=1000.0)}
    held = [ContainerDevices("ns", "p", "c", "nvidia.com/gpu", ("GPU-a",))]
    m = Meter(node="n")
    m.tick(0.0, attribute(held, dcgm, None, {}, {}), dcgm, cap=60)
    dcgm[("GPU-a", "")].energy = 1300.0
    m.tick(15.0, attribute(held, dcgm, None, {}, {}), dcgm, cap=60)
    m.tick(30.0, attribute(held, None, None, {}, m.inventory), None, cap=60)
    stats = m.tick(100.0, attribute(held, dcgm, None, {}, {}), dcgm, cap=60)
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
    m.tick(0.0, attribute(held, dcgm, None, {}, {}), dcgm, cap=120)
    m.tick(60.0, attribute(held, dcgm, None, dict(m.mig_known), {}), dcgm, cap=120)
    assert m.unallocated[H100] == pytest.approx(60 * (2 - 3 / 7))


def test_meter_marks_gone_holders_inactive_and_drops_after_ack() -> None:
    """A pod that disappears keeps its counters until acknowledged and past retention."""
    dcgm = {("GPU-a", ""): dev("GPU-a", 1.0)}
    held = [ContainerDevices("ns", "p", "c", "nvidia.com/gpu", ("GPU-a",))]
    m = Meter(node="n")
    m.tick(0.0, attribute(held, dcgm, None, {}, {}), dcgm, cap=60)
    m.tick(15.0, attribute(held, dcgm, None, {}, {}), dcgm, cap=60)
    m.tick(30.0, attribute([], dcgm, None, {}, {}), dcgm, cap=60)
    assert m.holders["ns/p/c/GPU-a"].active is False
    assert m.drop_acknowledged(100.0, acked_until=None, retention=60, safety=1000) == 0
    assert m.drop_acknowledged(100.0, acked_until=20.0, retention=60, safety=1000) == 1
