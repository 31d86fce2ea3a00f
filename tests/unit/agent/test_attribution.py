"""Attribution (who holds which device, at which fraction), table-tested by hand."""

from __future__ import annotations

import pytest

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import MigLocation, attribute
from exporter.agent.meter import Meter
from exporter.model.devices import DeviceKind
from exporter.model.pod_resources import ContainerDevices

H100 = "NVIDIA H100 80GB HBM3"


def dev(uuid: str, util: float | None, gi: str | None = None, profile: str | None = None,
        pods: set[tuple[str, str, str]] | None = None, energy: float | None = None) -> DcgmDevice:
    return DcgmDevice(gpu_uuid=uuid, index="0", model=H100, gpu_instance_id=gi, mig_profile=profile,
                      gr_engine=util, pods=pods or set(), energy=energy)


def test_whole_gpu_and_replicas() -> None:
    """A whole GPU is fraction 1; time-sliced replicas are 1/r with r from the allocatable IDs."""
    dcgm = {("GPU-a", ""): dev("GPU-a", 0.5), ("GPU-b", ""): dev("GPU-b", 0.8)}
    held = [ContainerDevices("ns", "p1", "c", "nvidia.com/gpu", ("GPU-a",)),
            ContainerDevices("ns", "p2", "c", "nvidia.com/gpu.shared", ("GPU-b::0", "GPU-b::1")),
            ContainerDevices("ns", "p3", "c", "example.com/fpga", ("fpga-0",))]
    alloc = {"nvidia.com/gpu.shared": tuple(f"GPU-b::{k}" for k in range(4))}
    res = attribute(held, dcgm, allocatable=alloc, mig_known={}, inventory={})
    by = {a.device_id: a for a in res.assignments}
    assert set(by) == {"GPU-a", "GPU-b::0", "GPU-b::1"}  # fpga not accounted unless configured
    assert by["GPU-a"].fraction == 1.0 and by["GPU-a"].dcgm_key == ("GPU-a", "")
    assert by["GPU-b::0"].fraction == 0.25 and by["GPU-b::0"].kind is DeviceKind.REPLICA
    assert by["GPU-b::0"].charge_group == by["GPU-b::1"].charge_group


def test_mig_resolved_through_dcgm_pod_labels_and_learned() -> None:
    """MIG-<uuid> resolves via DCGM's pod labels on the instance sample; the mapping is learned."""
    dcgm = {("GPU-p", "1"): dev("GPU-p", 0.6, "1", "3g.40gb", {("inf", "serve-a", "main")}),
            ("GPU-p", "2"): dev("GPU-p", 0.2, "2", "3g.40gb", {("inf", "serve-b", "main")})}
    held = [ContainerDevices("inf", "serve-b", "main", "nvidia.com/mig-3g.40gb", ("MIG-bbb",)),
            ContainerDevices("inf", "serve-a", "main", "nvidia.com/mig-3g.40gb", ("MIG-aaa",))]
    res = attribute(held, dcgm, allocatable=None, mig_known={}, inventory={})
    by = {a.device_id: a for a in res.assignments}
    assert by["MIG-aaa"].dcgm_key == ("GPU-p", "1") and by["MIG-bbb"].dcgm_key == ("GPU-p", "2")
    assert by["MIG-aaa"].fraction == pytest.approx(3 / 7) and by["MIG-aaa"].mig_profile == "3g.40gb"
    assert res.learned["MIG-aaa"] == MigLocation("GPU-p", "1", "3g.40gb")
    # Later, DCGM lost its pod labels: the learned mapping still resolves the instance.
    dcgm_nolabels = {k: dev("GPU-p", 0.6, k[1], "3g.40gb") for k in dcgm}
    res2 = attribute(held, dcgm_nolabels, allocatable=None, mig_known=dict(res.learned), inventory={})
    assert {a.dcgm_key for a in res2.assignments} == {("GPU-p", "1"), ("GPU-p", "2")}
    assert res2.unresolved == []


def test_unresolvable_mig_is_unmeasured_and_counted() -> None:
    """With no resolver, no labels and nothing learned, the instance is held but unresolved."""
    dcgm = {("GPU-p", "7"): dev("GPU-p", 0.9, "7", "1g.10gb")}
    held = [ContainerDevices("ns", "p", "c", "nvidia.com/mig-1g.10gb", ("MIG-x",))]
    res = attribute(held, dcgm, allocatable=None, mig_known={}, inventory={})
    (a,) = res.assignments
    assert res.unresolved == ["MIG-x"] and a.dcgm_key is None
    assert a.fraction == pytest.approx(1 / 7) and a.model == H100  # the node's one model
    m = Meter(node="n")
    m.tick(0.0, res, dcgm=dcgm, cap=60)
    m.tick(15.0, res, dcgm=dcgm, cap=60)
    u = m.holders["ns/p/c/MIG-x"].usage
    assert (u.allocated, u.used, u.unmeasured) == pytest.approx((15 / 7, 0.0, 15 / 7))


def test_resolver_is_used_first() -> None:
    """A resolver (NVML on a real node) wins over labels."""
    dcgm = {("GPU-p", "9"): dev("GPU-p", 0.5, "9", "1g.10gb")}
    held = [ContainerDevices("ns", "p", "c", "nvidia.com/mig-1g.10gb", ("MIG-y",))]
    res = attribute(held, dcgm, allocatable=None, mig_known={}, inventory={},
                    resolver=lambda u: MigLocation("GPU-p", "9", "1g.10gb"))
    assert res.assignments[0].dcgm_key == ("GPU-p", "9")


def test_unreadable_mig_profile_counts_one_slice() -> None:
    """A MIG resource whose profile cannot be read (found by fuzzing) is one slice, not a crash."""
    held = [ContainerDevices("ns", "p", "c", "nvidia.com/mig-bogus", ("MIG-z",))]
    res = attribute(held, {("GPU-p", "1"): dev("GPU-p", 0.5, "1", "1g.10gb")}, allocatable=None, mig_known={},
                    inventory={})
    (a,) = res.assignments
    assert a.fraction == pytest.approx(1 / 7) and a.mig_profile is None and res.unresolved == ["MIG-z"]
