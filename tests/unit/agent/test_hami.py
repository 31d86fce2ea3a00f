"""HAMi's pod annotation: parsing (fuzzed), container naming, the share's fraction, and attribution that
trusts the annotation over the plugin IDs the kubelet lists. Fractions worked out by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import attribute
from exporter.agent.holders.hami import HamiDevice, HamiError, by_container, hami_fraction, parse_allocation
from exporter.agent.holders.sharing import ContainerKey, NodeContext
from exporter.model.devices import DeviceKind, SharingMode
from exporter.model.pod_resources import ContainerDevices

G0 = "GPU-00000000-1111-2222-3333-444444444444"
G1 = "GPU-99999999-1111-2222-3333-444444444444"
A100 = "NVIDIA A100-SXM4-80GB"
GIB = 1024


def test_parse_one_container_one_gpu() -> None:
    assert parse_allocation(f"{G0},NVIDIA,3000,30:;") == [[HamiDevice(G0, "NVIDIA", 3000, 30)]]


def test_parse_containers_and_devices_in_order() -> None:
    """Three slots: a GPU-less container (empty slot), one with two GPUs, one with one."""
    text = f";{G0},NVIDIA,1000,0:{G1},NVIDIA,2000,50:;{G1},NVIDIA,500,10:;"
    assert parse_allocation(text) == [[], [HamiDevice(G0, "NVIDIA", 1000, 0), HamiDevice(G1, "NVIDIA", 2000, 50)],
                                      [HamiDevice(G1, "NVIDIA", 500, 10)]]


def test_mig_mode_suffix_is_dropped_from_the_uuid() -> None:
    assert parse_allocation(f"{G0}[1-2],NVIDIA,10240,0:;")[0][0].uuid == G0


@pytest.mark.parametrize("text", ["", "GPU-x,NVIDIA,1,1:", f"{G0},NVIDIA,1:;", f"{G0},NVIDIA,-1,0:;",
                                  f"{G0},NVIDIA,1,x:;", "MIG-abc,NVIDIA,1,1:;", f"{G0},NVIDIA,99999999999,0:;"])
def test_malformed_annotations_raise_hami_error(text: str) -> None:
    with pytest.raises(HamiError):
        parse_allocation(text)


def test_slots_name_init_then_regular_containers_or_regular_only() -> None:
    """HAMi >= 2.9 writes a slot per init container first; older versions only regular containers."""
    d = HamiDevice(G0, "NVIDIA", 1, 0)
    assert by_container([[], [d]], init_containers=["setup"], containers=["main"]) == {"main": [d]}
    assert by_container([[d]], init_containers=["setup"], containers=["main"]) == {"main": [d]}
    with pytest.raises(HamiError):
        by_container([[d], [d], [d]], init_containers=[], containers=["main"])


def test_fraction_golden() -> None:
    """10 GiB of an 80 GiB GPU with 30 % cores: max(10/80 = 0.125, 0.30) = 0.3.
    40 GiB with cores unset (0): memory alone, 40/80 = 0.5. 90 GiB (over-subscribed memory): at most 1.
    GPU size unknown: a share holding memory is unknown (None: 40 GiB might be half the GPU, more than its
    25 % cores); a cores-only share (0 MiB, 25 %) is still 0.25."""
    fb = 80 * GIB
    assert hami_fraction(HamiDevice(G0, "NVIDIA", 10 * GIB, 30), framebuffer_mib=fb) == pytest.approx(0.3)
    assert hami_fraction(HamiDevice(G0, "NVIDIA", 40 * GIB, 0), framebuffer_mib=fb) == pytest.approx(0.5)
    assert hami_fraction(HamiDevice(G0, "NVIDIA", 90 * GIB, 0), framebuffer_mib=fb) == 1.0
    assert hami_fraction(HamiDevice(G0, "NVIDIA", 40 * GIB, 0), framebuffer_mib=None) is None
    assert hami_fraction(HamiDevice(G0, "NVIDIA", 40 * GIB, 25), framebuffer_mib=None) is None
    assert hami_fraction(HamiDevice(G0, "NVIDIA", 0, 25), framebuffer_mib=None) == pytest.approx(0.25)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("GPU-0123456789abcdef,:;NVIDIA[] ")), max_size=120) | st.text(max_size=60))
def test_parser_never_raises_anything_but_hami_error(text: str) -> None:
    try:
        slots = parse_allocation(text)
    except HamiError:
        return
    for slot in slots:
        for d in slot:
            assert d.uuid.startswith("GPU-") and d.memory_mib >= 0 and d.cores_percent >= 0


def _dev(uuid: str, util: float) -> DcgmDevice:
    return DcgmDevice(gpu_uuid=uuid, index="0", model=A100, gr_engine=util)


def test_attribution_trusts_the_annotation_over_the_listed_ids() -> None:
    """The kubelet listed slot 3 of G1, the annotation says 10 GiB / 30 % of G0: the share is 0.3 of G0.
    The GPU's size comes from the node label nvidia.com/gpu.memory (81920 MiB = 80 GiB)."""
    dcgm = {(G0, ""): _dev(G0, 0.4), (G1, ""): _dev(G1, 0.0)}
    held = [ContainerDevices("ns", "p", "main", "nvidia.com/gpu", (f"{G1}-3",))]
    alloc = {"nvidia.com/gpu": tuple(f"{g}-{k}" for g in (G1, G0) for k in range(10))}
    ctx = NodeContext(labels={"nvidia.com/gpu.memory": "81920"},
                      hami={ContainerKey("ns", "p", "main"): [HamiDevice(G0, "NVIDIA", 10 * GIB, 30)]})
    res = attribute(held, dcgm, allocatable=alloc, mig_known={}, inventory={}, context=ctx)
    (a,) = res.assignments
    assert (a.gpu_uuid, a.dcgm_key, a.device_id) == (G0, (G0, ""), G0)
    assert a.fraction == pytest.approx(0.3) and a.kind is DeviceKind.REPLICA and a.sharing is SharingMode.HAMI
    assert res.unresolved == []
    assert res.sharing == {G0: SharingMode.HAMI, G1: SharingMode.HAMI}


def test_attribution_without_the_annotation_falls_back_to_one_slot_and_says_so() -> None:
    """Annotation unknown (no API access): 1/10 of the GPU the ID names (10 slots per GPU), unresolved."""
    dcgm = {(G1, ""): _dev(G1, 0.4)}
    held = [ContainerDevices("ns", "p", "main", "nvidia.com/gpu", (f"{G1}-3",))]
    alloc = {"nvidia.com/gpu": tuple(f"{G1}-{k}" for k in range(10))}
    res = attribute(held, dcgm, allocatable=alloc, mig_known={}, inventory={})
    (a,) = res.assignments
    assert a.gpu_uuid == G1 and a.fraction == pytest.approx(0.1)
    assert res.unresolved == [f"{G1}-3"]


def test_memory_share_sized_from_dcgm_when_the_node_label_is_missing() -> None:
    """No nvidia.com/gpu.memory label: DCGM's used + free framebuffer (60 + 20 GiB = 80 GiB); 40/80 = 0.5."""
    dev = DcgmDevice(gpu_uuid=G0, index="0", model=A100, gr_engine=0.1,
                     fb_used=60 * GIB * 1048576.0, fb_free=20 * GIB * 1048576.0)
    held = [ContainerDevices("ns", "p", "main", "nvidia.com/gpu", (f"{G0}-0",))]
    ctx = NodeContext(hami={ContainerKey("ns", "p", "main"): [HamiDevice(G0, "NVIDIA", 40 * GIB, 0)]})
    (a,) = attribute(held, {(G0, ""): dev}, allocatable=None, mig_known={}, inventory={}, context=ctx).assignments
    assert a.fraction == pytest.approx(0.5)


@pytest.mark.parametrize(("cores", "fraction"), [(25, 0.25), (5, 0.1)])
def test_share_of_a_gpu_of_unknown_size_is_unresolved_not_its_cores_alone(cores: int, fraction: float) -> None:
    """No node label and no DCGM framebuffer fields: 40 GiB of a GPU of unknown size cannot be sized. The
    device is reported unresolved (gpucost_agent_unresolved_devices) and charged no less than what is known,
    its cores, nor than one of the 10 plugin slots: 25 % -> max(0.25, 1/10) = 0.25; 5 % -> max(0.05, 0.1) = 0.1."""
    held = [ContainerDevices("ns", "p", "main", "nvidia.com/gpu", (f"{G0}-0",))]
    alloc = {"nvidia.com/gpu": tuple(f"{G0}-{k}" for k in range(10))}
    ctx = NodeContext(hami={ContainerKey("ns", "p", "main"): [HamiDevice(G0, "NVIDIA", 40 * GIB, cores)]})
    res = attribute(held, {(G0, ""): _dev(G0, 0.2)}, allocatable=alloc, mig_known={}, inventory={}, context=ctx)
    (a,) = res.assignments
    assert a.fraction == pytest.approx(fraction)
    assert res.unresolved == [G0]
