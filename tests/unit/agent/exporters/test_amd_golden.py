"""Golden AMD nodes through attribution and the meter for one hour: whole MI300X GPUs, and a CPX-partitioned
MI300X with the `single` and the `mixed` naming strategy, with allocated, used, unmeasured and cost per
namespace worked by hand."""

from __future__ import annotations

import pytest

from exporter.agent.exporters.amd import amd_devices
from exporter.agent.holders.attribution import attribute
from exporter.agent.meter import Meter
from exporter.clients.exposition import parse_exposition
from exporter.model.devices import DeviceKind
from exporter.model.pod_resources import ContainerDevices
from exporter.model.pricing.document import parse_pricing

OAM = "AMD Instinct MI300X OAM"
PRICING = parse_pricing('{"currency": "USD", "default_price": 1.0, "models": {"AMD Instinct MI300X OAM": 3.2}}',
                        "test")
LINE = ('gpu_gfx_activity{{card_series="{series}",gpu_compute_partition_type="{mode}",gpu_id="{gid}",'
        'gpu_partition_id="{part}",gpu_uuid="{uuid}",serial_number="{serial}",namespace="{ns}",pod="{pod}",'
        'container="{ctr}"}} {value}')


def line(gid: int, value: float, *, mode: str = "spx", part: str = "NA", serial: str = "", uuid: str = "",
         holder: tuple[str, str, str] = ("", "", "")) -> str:
    ns, pod, ctr = holder
    return LINE.format(series=OAM, mode=mode, gid=gid, part=part, uuid=uuid, serial=serial, ns=ns, pod=pod, ctr=ctr,
                       value=value)


def run_hour(body: str, held: list[ContainerDevices], allocatable: dict[str, tuple[str, ...]]) -> Meter:
    devices = amd_devices(parse_exposition(body).samples).devices
    meter = Meter(node="n")
    for now in (0.0, 3600.0):
        attribution = attribute(held, devices, allocatable=allocatable, mig_known=meter.mig_known,
                                inventory=meter.inventory)
        meter.tick(now, attribution, dcgm=devices, cap=3600.0)
    return meter


def per_namespace(meter: Meter) -> dict[str, tuple[float, float, float, float]]:
    """namespace -> (allocated, used, unmeasured) GPU-hours and cost at 3.20 per MI300X-hour."""
    out: dict[str, tuple[float, float, float, float]] = {}
    for h in meter.holders.values():
        a, u, m, c = out.get(h.namespace, (0.0, 0.0, 0.0, 0.0))
        price = PRICING.price(h.model).per_gpu_hour
        out[h.namespace] = (a + h.usage.allocated / 3600, u + h.usage.used / 3600, m + h.usage.unmeasured / 3600,
                            c + h.usage.allocated / 3600 * price)
    return out


def test_whole_mi300x_gpus() -> None:
    """Two SPX GPUs: `train` holds GPU 0 (60 %), GPU 1 is free. train: 1 GPU-h allocated, 0.6 used,
    cost 1 x 3.20; the free GPU's hour is unallocated under its model."""
    body = "\n".join([line(0, 60, uuid="u-0", holder=("ml", "train", "main")), line(1, 0, uuid="u-1")])
    held = [ContainerDevices("ml", "train", "main", "amd.com/gpu", ("0000:05:00.0",))]
    meter = run_hour(body, held, {"amd.com/gpu": ("0000:05:00.0", "0000:15:00.0")})
    assert per_namespace(meter) == {"ml": pytest.approx((1.0, 0.6, 0.0, 3.2))}
    assert meter.holders["ml/train/main/0000:05:00.0"].gpu_uuid == "u-0"
    assert meter.unallocated == {OAM: pytest.approx(3600.0)}


def cpx_body() -> str:
    """One MI300X in CPX (serial S1, partitions = gpu_id 0..7): partition 0 at 40 % held by team-a, partition 3
    held by team-b (the exporter reads 0 there: not its value)."""
    lines = [line(p, 40 if p == 0 else 0, mode="cpx", part=str(p), serial="S1",
                  holder={0: ("team-a", "a", "w"), 3: ("team-b", "b", "w")}.get(p, ("", "", "")))
             for p in range(8)]
    return "\n".join(lines)


def test_cpx_partitions_single_strategy() -> None:
    """`single`: 8 IDs under amd.com/gpu (1 PCI address + 7 amdgpu_xcp_N) -> each 1/8 of the GPU.
    team-a: 1/8 GPU-h allocated, 0.4 x 1/8 = 0.05 used, cost 0.125 x 3.20 = 0.40;
    team-b: 1/8 allocated, all of it unmeasured (not 0 used), cost 0.40.
    Unallocated: 1 - 2/8 = 0.75 GPU-h; the node has one physical GPU."""
    alloc = {"amd.com/gpu": ("0000:19:00.0", *(f"amdgpu_xcp_{n}" for n in range(1, 8)))}
    held = [ContainerDevices("team-a", "a", "w", "amd.com/gpu", ("0000:19:00.0",)),
            ContainerDevices("team-b", "b", "w", "amd.com/gpu", ("amdgpu_xcp_3",))]
    meter = run_hour(cpx_body(), held, alloc)
    assert per_namespace(meter) == {"team-a": pytest.approx((0.125, 0.05, 0.0, 0.4)),
                                    "team-b": pytest.approx((0.125, 0.0, 0.125, 0.4))}
    assert meter.unallocated == {OAM: pytest.approx(0.75 * 3600)}
    assert meter.inventory == {"amd:S1": OAM}


def test_cpx_partitions_mixed_strategy_without_allocatable() -> None:
    """`mixed`: the resource amd.com/cpx_nps4 names the partition style: 1/8 even with no allocatable IDs."""
    held = [ContainerDevices("team-a", "a", "w", "amd.com/cpx_nps4", ("0000:19:00.0",)),
            ContainerDevices("team-b", "b", "w", "amd.com/cpx_nps4", ("amdgpu_xcp_3",))]
    res = attribute(held, amd_devices(parse_exposition(cpx_body()).samples).devices, allocatable=None,
                    mig_known={}, inventory={})
    assert {(a.namespace, a.fraction, a.kind, a.dcgm_key) for a in res.assignments} == {
        ("team-a", 0.125, DeviceKind.MIG, ("amd:S1", "0")), ("team-b", 0.125, DeviceKind.MIG, ("amd:S1", "3"))}
    assert res.unresolved == []


def test_unlabelled_hold_is_allocated_and_unmeasured_never_another_holders_reading() -> None:
    """A container the exporter does not label gets no device reading (not the busy GPU next to it)."""
    body = "\n".join([line(0, 90, uuid="u-0", holder=("ml", "train", "main")), line(1, 90, uuid="u-1")])
    held = [ContainerDevices("ml", "train", "main", "amd.com/gpu", ("0000:05:00.0",)),
            ContainerDevices("ml", "other", "main", "amd.com/gpu", ("0000:15:00.0",))]
    meter = run_hour(body, held, {"amd.com/gpu": ("0000:05:00.0", "0000:15:00.0")})
    other = meter.holders["ml/other/main/0000:15:00.0"].usage
    assert (other.allocated, other.used, other.unmeasured) == pytest.approx((3600.0, 0.0, 3600.0))
    assert meter.holders["ml/train/main/0000:05:00.0"].usage.used == pytest.approx(0.9 * 3600)


def test_xcp_without_partition_count_is_unresolved() -> None:
    """No mixed name, no allocatable, no exporter label: the xcp ID is charged as 1/8 and counted unresolved."""
    held = [ContainerDevices("team-b", "b", "w", "amd.com/gpu", ("amdgpu_xcp_3",))]
    res = attribute(held, {}, allocatable=None, mig_known={}, inventory={})
    assert [a.fraction for a in res.assignments] == [0.125] and res.unresolved == ["amdgpu_xcp_3"]


def test_mixed_resource_name_alone_gives_the_fraction() -> None:
    """With no exporter reading at all, amd.com/dpx_nps1 is 1/2 and amd.com/qpx_nps1 1/4, resolved."""
    held = [ContainerDevices("t", "a", "w", "amd.com/dpx_nps1", ("amdgpu_xcp_1",)),
            ContainerDevices("t", "b", "w", "amd.com/qpx_nps1", ("amdgpu_xcp_9",))]
    res = attribute(held, {}, allocatable=None, mig_known={}, inventory={})
    assert sorted(a.fraction for a in res.assignments) == [0.25, 0.5] and res.unresolved == []
