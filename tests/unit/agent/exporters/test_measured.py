"""Measured per-pod use on shared GPUs: the two golden examples (dcgm-exporter per-process series on a
time-sliced L4; HAMi's monitor on a HAMi-shared GPU) through attribution and the meter for one hour, with the
arithmetic by hand; the fallback to the split by fraction; deduplication and refused samples."""

from __future__ import annotations

import json

import pytest

from exporter.agent.exporters.dcgm import build_devices
from exporter.agent.exporters.per_pod import HAMI_UTIL, dcgm_pod_use, hami_pod_use
from exporter.agent.holders.attribution import attribute
from exporter.agent.holders.hami import HamiDevice
from exporter.agent.holders.sharing import ContainerKey, NodeContext
from exporter.agent.meter import Meter
from exporter.agent.publish import snapshot_of
from exporter.agent.state import dump_meter, load_meter
from exporter.clients.exposition import parse_exposition
from exporter.model.pod_resources import ContainerDevices
from exporter.model.usage import parse_snapshot, snapshot_json

L4 = "GPU-11111111-2222-3333-4444-555555555555"
DEV = f'gpu="0",UUID="{L4}",pci_bus_id="00000000:00:03.0",device="nvidia0",modelName="NVIDIA L4",Hostname="n"'


def pod_line(value: float, pod: str, uid: str, *, vgpu: str, ctr: str = "main") -> str:
    return (f'DCGM_FI_DEV_GPU_UTIL{{{DEV},container="{ctr}",namespace="ml",pod="{pod}",pod_uid="{uid}",'
            f'vgpu="{vgpu}"}} {value}')


def l4_body(a: float, b: float | None) -> str:
    """Device series at 70 %; pod A's series twice (two replicas of the GPU, issue #725), pod B's once."""
    lines = [f"DCGM_FI_DEV_GPU_UTIL{{{DEV}}} 70", pod_line(a, "a", "uid-a", vgpu="0"),
             pod_line(a, "a", "uid-a", vgpu="1")]
    if b is not None:
        lines.append(pod_line(b, "b", "uid-b", vgpu="2"))
    return "\n".join(lines)


def hour(body: str, held: list[ContainerDevices], pod_use: dict[str, dict[tuple[str, str], float]], *,
         allocatable: dict[str, tuple[str, ...]] | None = None, context: NodeContext | None = None) -> Meter:
    devices = build_devices(parse_exposition(body).samples)
    meter = Meter(node="n")
    meter.pod_use = pod_use
    for now in (0.0, 3600.0):
        res = attribute(held, devices, allocatable=allocatable, mig_known={}, inventory={}, context=context)
        meter.tick(now, res, dcgm=devices, cap=3600.0)
    return meter


def used_hours(meter: Meter) -> dict[str, tuple[float, float]]:
    """pod -> (allocated, used) GPU-hours."""
    out: dict[str, tuple[float, float]] = {}
    for h in meter.holders.values():
        a, u = out.get(h.pod, (0.0, 0.0))
        out[h.pod] = (a + h.usage.allocated / 3600, u + h.usage.used / 3600)
    return out


L4_HELD = [ContainerDevices("ml", "a", "main", "nvidia.com/gpu", (f"{L4}::0",)),
           ContainerDevices("ml", "b", "main", "nvidia.com/gpu", (f"{L4}::1",))]
L4_ALLOC: dict[str, tuple[str, ...]] = {"nvidia.com/gpu": (f"{L4}::0", f"{L4}::1")}


def test_l4_time_sliced_measured() -> None:
    """ARCHITECTURE.md's example: L4 time-sliced in 2, A at 60 %, B at 10 %, device at 70 % for an hour.
    Busy 0.7 GPU-h; A's share 60/70 of it = 0.6, capped at its 0.5 allocation -> 0.5; B 10/70 x 0.7 = 0.1.
    (Split by fraction would give each 0.7 x 0.5 = 0.35.) The device reading stays the device's 70 %."""
    body = l4_body(60, 10)
    use = dcgm_pod_use(parse_exposition(body).samples)
    assert use.by_gpu == {L4: {("ml", "a"): 0.6, ("ml", "b"): 0.1}} and use.refused == 0
    assert build_devices(parse_exposition(body).samples)[(L4, "")].util == pytest.approx(0.7)
    meter = hour(body, L4_HELD, use.by_gpu, allocatable=L4_ALLOC)
    assert used_hours(meter) == {"a": pytest.approx((0.5, 0.5)), "b": pytest.approx((0.5, 0.1))}


def test_l4_missing_pod_value_falls_back_to_the_split_by_fraction() -> None:
    """B has no series: the whole device is split by fraction, 0.7 x 0.5 = 0.35 each."""
    body = l4_body(60, None)
    meter = hour(body, L4_HELD, dcgm_pod_use(parse_exposition(body).samples).by_gpu, allocatable=L4_ALLOC)
    assert used_hours(meter) == {"a": pytest.approx((0.5, 0.35)), "b": pytest.approx((0.5, 0.35))}


def test_all_zero_while_busy_falls_back_to_the_split_by_fraction() -> None:
    """Both pods read 0 (no hostPID: dcgm-exporter reads 0 for every pod) while the device is 70 % busy."""
    body = l4_body(0, 0)
    meter = hour(body, L4_HELD, dcgm_pod_use(parse_exposition(body).samples).by_gpu, allocatable=L4_ALLOC)
    assert used_hours(meter) == {"a": pytest.approx((0.5, 0.35)), "b": pytest.approx((0.5, 0.35))}


HAMI_GPU = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def hami_line(value: float, pod: str, *, legacy: bool = False) -> str:
    if legacy:
        return (f'Device_utilization_desc_of_container{{podnamespace="ml",podname="{pod}",ctrname="main",'
                f'vdeviceid="0",deviceuuid="{HAMI_GPU}",zone="vGPU"}} {value}')
    return (f'hami_container_device_utilization_ratio{{namespace="ml",pod="{pod}",container="main",'
            f'vdevice_index="0",device_uuid="{HAMI_GPU}",zone="vGPU"}} {value}')


@pytest.mark.parametrize("legacy", [False, True])
def test_hami_measured(legacy: bool) -> None:
    """HAMi GPU, pods at fractions 0.5 (cores 50) and 0.25 (cores 25) using 20 % and 60 %, device busy 80 %.
    Measured shares 20/80 = 0.25 and 60/80 = 0.75 of 0.8 GPU-h: 0.2 and 0.6; capped at the allocations:
    min(0.5, 0.2) = 0.2 and min(0.25, 0.6) = 0.25 GPU-h per hour."""
    monitor = "\n".join([hami_line(20, "p", legacy=legacy), hami_line(60, "q", legacy=legacy)])
    use = hami_pod_use(parse_exposition(monitor, only=HAMI_UTIL).samples)
    assert use.by_gpu == {HAMI_GPU: {("ml", "p"): 0.2, ("ml", "q"): 0.6}}
    ctx = NodeContext(hami={ContainerKey("ml", "p", "main"): [HamiDevice(HAMI_GPU, "NVIDIA", 0, 50)],
                            ContainerKey("ml", "q", "main"): [HamiDevice(HAMI_GPU, "NVIDIA", 0, 25)]})
    held = [ContainerDevices("ml", "p", "main", "nvidia.com/gpu", (f"{HAMI_GPU}-0",)),
            ContainerDevices("ml", "q", "main", "nvidia.com/gpu", (f"{HAMI_GPU}-1",))]
    body = f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{HAMI_GPU}",modelName="NVIDIA A10"}} 80'
    meter = hour(body, held, use.by_gpu, context=ctx)
    assert used_hours(meter) == {"p": pytest.approx((0.5, 0.2)), "q": pytest.approx((0.25, 0.25))}


def test_refused_samples_are_counted_and_never_reach_a_holder() -> None:
    """NaN, negative, no UUID, no pod, a MIG instance, and a pod's two series disagreeing: refused, counted."""
    body = "\n".join([
        pod_line(float("nan"), "a", "uid-a", vgpu="0"),
        pod_line(-5, "b", "uid-b", vgpu="0"),
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",container="c",namespace="ml",pod="c",pod_uid="uid-c"} 5',
        f'DCGM_FI_DEV_GPU_UTIL{{{DEV},container="c",namespace="ml",pod="",pod_uid="uid-d"}} 5',
        f'DCGM_FI_DEV_GPU_UTIL{{{DEV},GPU_I_ID="1",container="c",namespace="ml",pod="e",pod_uid="uid-e"}} 5',
        pod_line(30, "f", "uid-f", vgpu="0"), pod_line(40, "f", "uid-f", vgpu="1"),
        pod_line(20, "g", "uid-g", vgpu="0")])
    use = dcgm_pod_use(parse_exposition(body).samples)
    assert use.refused == 6
    assert use.by_gpu == {L4: {("ml", "g"): 0.2}}
    bad = "\n".join([hami_line(float("inf"), "p"), hami_line(10, "q"), hami_line(10, "q"),
                     'hami_container_device_utilization_ratio{namespace="ml",pod="r",device_uuid=""} 3'])
    hami = hami_pod_use(parse_exposition(bad).samples)
    assert (hami.refused, hami.by_gpu) == (3, {HAMI_GPU: {("ml", "q"): 0.1}})


def split_hours(meter: Meter) -> dict[str, float]:
    return {h.pod: h.usage.split / 3600 for h in meter.holders.values()}


def test_split_seconds_are_counted_only_where_the_split_by_fraction_applied() -> None:
    """Measured: nothing split. Missing value on a busy GPU: each holder's 0.5 GPU-h counted as split.
    An idle GPU (nothing to split) and an unmeasured one: nothing split."""
    measured = l4_body(60, 10)
    assert split_hours(hour(measured, L4_HELD, dcgm_pod_use(parse_exposition(measured).samples).by_gpu,
                            allocatable=L4_ALLOC)) == {"a": 0.0, "b": 0.0}
    missing = l4_body(60, None)
    assert split_hours(hour(missing, L4_HELD, dcgm_pod_use(parse_exposition(missing).samples).by_gpu,
                            allocatable=L4_ALLOC)) == {"a": pytest.approx(0.5), "b": pytest.approx(0.5)}
    idle = f"DCGM_FI_DEV_GPU_UTIL{{{DEV}}} 0"
    assert split_hours(hour(idle, L4_HELD, {}, allocatable=L4_ALLOC)) == {"a": 0.0, "b": 0.0}


def test_split_seconds_survive_the_state_file_and_reach_the_wire() -> None:
    """The agent's state keeps them across a restart; /v1/usage carries them as ``split_s``, and a snapshot from an
    agent that does not send them reads 0."""
    body = l4_body(60, None)
    meter = hour(body, L4_HELD, {}, allocatable=L4_ALLOC)
    again = load_meter(json.loads(json.dumps(dump_meter(meter))), "n")
    assert split_hours(again) == {"a": pytest.approx(0.5), "b": pytest.approx(0.5)}
    wire = snapshot_json(snapshot_of(again, 3600.0, dcgm_up=True, podresources_up=True))
    assert sorted(h.split_s for h in parse_snapshot(wire).holders) == pytest.approx([1800.0, 1800.0])
    old = json.loads(wire)
    for h in old["holders"]:
        del h["split_s"]
    assert [h.split_s for h in parse_snapshot(json.dumps(old)).holders] == [0.0, 0.0]
