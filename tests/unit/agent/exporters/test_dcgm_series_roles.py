"""Device series and per-pod series told apart as dcgm-exporter emits them (its ``transformation/kubernetes.go``
``PodMapper.Process``): constructed captures of each mode, labels in the exporter's own order.

* default mode: a held GPU's one series per metric carries the pod's labels, plus ``pod_uid`` with
  ``--kubernetes-enable-pod-uid`` (empty when its informer has no entry) -- it is the device's reading;
* virtual-GPU mode: each metric is copied once per sharing pod with the device's value (``vgpu`` on a shared
  device id), except ``GPU_UTIL``/``FB_USED`` with per-process data: the unlabelled device series is kept and
  one series per pod carries that pod's own value;
* MIG: an instance's series (``GPU_I_ID``) follow the same rules.
"""

from __future__ import annotations

from exporter.agent.exporters.dcgm import build_devices, series_roles
from exporter.agent.exporters.per_pod import dcgm_pod_use
from exporter.clients.exposition import parse_exposition
from exporter.model.samples import Sample

H100 = "GPU-6b1d5f36-21c0-9a5b-0e4c-3f7a2d1e9b80"
DEV = (f'gpu="0",UUID="{H100}",pci_bus_id="00000000:18:00.0",device="nvidia0",'
       f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="580.95.05"')
MIG = (f'gpu="0",UUID="{H100}",pci_bus_id="00000000:18:00.0",device="nvidia0",'
       f'modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="7",Hostname="gpu-node-1"')
METRICS = (("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.420000"), ("DCGM_FI_DEV_GPU_UTIL", "45"),
           ("DCGM_FI_DEV_POWER_USAGE", "310.500000"), ("DCGM_FI_DEV_FB_USED", "20480"))


def pod(name: str, uid: str | None, vgpu: str | None = None) -> str:
    labels = f',container="main",namespace="ml",pod="{name}"'
    labels += "" if uid is None else f',pod_uid="{uid}"'
    return labels + ("" if vgpu is None else f',vgpu="{vgpu}"')


def body(lines: list[str]) -> list[Sample]:
    return parse_exposition("\n".join(lines) + "\n").samples


def held_whole(uid: str) -> list[str]:
    """Default mode, pod UIDs on: GPU 0 held by one pod, every series labelled with it."""
    return [f"{name}{{{DEV}{pod('trainer', uid)}}} {value}" for name, value in METRICS]


def check_whole_reading(lines: list[str]) -> None:
    (dev,) = build_devices(body(lines)).values()
    # GR engine 0.42 (ratio); GPU_UTIL 45 % = 0.45; 310.5 W; FB_USED 20480 MiB = 20480 * 1048576 B
    assert (dev.gr_engine, dev.util, dev.power) == (0.42, 0.45, 310.5)
    assert dev.fb_used == 20480 * 1048576
    assert dev.pods == {("ml", "trainer", "main")}


def test_whole_gpu_held_with_empty_pod_uid_is_the_device_reading() -> None:
    """pod_uid="" (the informer had no entry), as in a GPU Operator capture of an 8 x H100 node."""
    check_whole_reading(held_whole(""))


def test_whole_gpu_held_with_pod_uid_set_is_the_device_reading() -> None:
    check_whole_reading(held_whole("0d9e6a4c-7b1f-4f3e-9a52-6c1d2b3e4f50"))


def test_whole_gpu_held_is_no_per_pod_measurement() -> None:
    """The one labelled series is a copy of the device's reading, not the pod's own measurement."""
    assert dcgm_pod_use(body(held_whole("uid-t"))).by_gpu == {}


def virtual_shared(per_process: bool, *, vgpu: bool) -> list[str]:
    """Virtual mode, GPU 0 time-sliced between pods a (replica 0) and b (replica 1), pod UIDs on.
    Every metric copied per pod with the device value; with per-process data GPU_UTIL instead keeps the
    unlabelled device series (45 %) beside each pod's own value (a 30 %, b 10 %)."""
    pods = (("a", "uid-a", "0"), ("b", "uid-b", "1"))
    lines = []
    for name, value in METRICS:
        if per_process and name == "DCGM_FI_DEV_GPU_UTIL":
            lines.append(f"{name}{{{DEV}}} {value}")
            lines += [f"{name}{{{DEV}{pod(p, uid, r if vgpu else None)}}} {own}"
                      for (p, uid, r), own in zip(pods, ("30", "10"), strict=True)]
        else:
            lines += [f"{name}{{{DEV}{pod(p, uid, r if vgpu else None)}}} {value}" for p, uid, r in pods]
    return lines


def test_time_sliced_gpu_in_virtual_mode_with_vgpu_keeps_every_device_reading() -> None:
    """Device: GR 0.42, util 45 % (the unlabelled series, not a pod's 30 or 10), 310.5 W.
    Per pod: a 30 % = 0.3, b 10 % = 0.1."""
    lines = virtual_shared(True, vgpu=True)
    (dev,) = build_devices(body(lines)).values()
    assert (dev.gr_engine, dev.util, dev.power) == (0.42, 0.45, 310.5)
    assert dev.pods == {("ml", "a", "main"), ("ml", "b", "main")}
    assert dcgm_pod_use(body(lines)).by_gpu == {H100: {("ml", "a"): 0.3, ("ml", "b"): 0.1}}


def test_time_sliced_gpu_in_virtual_mode_without_vgpu_keeps_every_device_reading() -> None:
    lines = virtual_shared(True, vgpu=False)
    (dev,) = build_devices(body(lines)).values()
    assert (dev.gr_engine, dev.util, dev.power) == (0.42, 0.45, 310.5)
    assert dcgm_pod_use(body(lines)).by_gpu == {H100: {("ml", "a"): 0.3, ("ml", "b"): 0.1}}


def test_virtual_mode_without_per_process_data_copies_are_the_device_reading_not_pods_measurements() -> None:
    """Before 4.5.3-4.8.2 (or without per-process data) each pod's GPU_UTIL is the device's 45 % copied:
    the device reads 0.45, and no pod is measured (two pods at 45 % each would claim 90 % of a 45 % GPU)."""
    lines = virtual_shared(False, vgpu=True)
    (dev,) = build_devices(body(lines)).values()
    assert (dev.gr_engine, dev.util, dev.power) == (0.42, 0.45, 310.5)
    assert dcgm_pod_use(body(lines)).by_gpu == {}


def test_mig_instance_held_with_pod_uid_is_the_instance_reading() -> None:
    """MIG 1g.10gb instance 7 held by a pod: its series (GR engine 0.25, 48.5 W) are the instance's reading."""
    lines = [f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{MIG}{pod("infer", "uid-i")}}} 0.250000',
             f'DCGM_FI_DEV_POWER_USAGE{{{MIG}{pod("infer", "")}}} 48.500000']
    (dev,) = build_devices(body(lines)).values()
    assert dev.key == (H100, "7")
    assert (dev.gr_engine, dev.power, dev.mig_profile) == (0.25, 48.5, "1g.10gb")


def test_copies_that_disagree_leave_the_reading_unknown() -> None:
    """Two pod-labelled copies of one device reading with different values: unknown, counted as bad."""
    lines = [f"DCGM_FI_DEV_GPU_UTIL{{{DEV}{pod('a', 'uid-a', '0')}}} 45",
             f"DCGM_FI_DEV_GPU_UTIL{{{DEV}{pod('b', 'uid-b', '1')}}} 50"]
    (dev,) = build_devices(body(lines)).values()
    assert dev.util is None and dev.bad_readings == 1
    roles = series_roles(body(lines))
    assert (len(roles.device), len(roles.per_pod), len(roles.conflicting)) == (0, 0, 1)
