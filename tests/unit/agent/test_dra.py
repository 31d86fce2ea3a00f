"""DRA attribution, pure: keys, per-claim counting, shared claims, adminAccess, slice resolution and the
name fallback. Fractions by hand."""

from __future__ import annotations

import pytest

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import attribute
from exporter.agent.holders.dra import DeviceKey, SliceDevice, admin_devices, consumed_memory, dra_holds, slice_index
from exporter.agent.holders.sharing import NodeContext
from exporter.model.devices import DeviceKind, SharingMode
from exporter.model.pod_resources import ClaimDevice, ContainerClaim

A100 = "NVIDIA A100-SXM4-80GB"
G0, G1, G2 = "GPU-0000", "GPU-1111", "GPU-2222"
NV = "gpu.nvidia.com"


def _claim(pod: str, container: str, claim: str, *devices: str, driver: str = NV) -> ContainerClaim:
    return ContainerClaim("ml", pod, container, "ml", claim, tuple(ClaimDevice(driver, "node-a", d) for d in devices))


SLICES = {DeviceKey(NV, "node-a", "gpu-0"): SliceDevice("gpu", G0),
          DeviceKey(NV, "node-a", "gpu-1"): SliceDevice("gpu", G1),
          DeviceKey(NV, "node-a", "gpu-2-mig-3g40gb-9-1"): SliceDevice("mig", "MIG-aaaa", G2, "3g.40gb")}
DCGM = {(G0, ""): DcgmDevice(gpu_uuid=G0, index="0", model=A100, gr_engine=0.5),
        (G1, ""): DcgmDevice(gpu_uuid=G1, index="1", model=A100, gr_engine=0.6),
        (G2, "1"): DcgmDevice(gpu_uuid=G2, index="2", model=A100, gpu_instance_id="1", mig_profile="3g.40gb"),
        (G2, "7"): DcgmDevice(gpu_uuid=G2, index="2", model=A100, gpu_instance_id="7", mig_profile="1g.10gb")}


def test_claim_counts_once_per_pod_not_per_container_and_other_drivers_are_ignored() -> None:
    """Two containers of one pod name the claim (the kubelet gives each every device): one hold."""
    holds = dra_holds([_claim("p", "b", "c1", "gpu-0"), _claim("p", "a", "c1", "gpu-0"),
                       _claim("p", "a", "net", "nic-0", driver="example.com/nic")], slices=SLICES, admin={})
    assert [(h.container, h.key.device, h.share) for h in holds] == [("a", "gpu-0", 1.0)]


def test_claim_shared_by_two_pods_is_half_each_and_admin_access_is_zero() -> None:
    holds = dra_holds([_claim("p1", "main", "shared", "gpu-1"), _claim("p2", "main", "shared", "gpu-1"),
                       _claim("mon", "main", "watch", "gpu-0")], slices=SLICES,
                      admin={"ml/watch": {DeviceKey(NV, "node-a", "gpu-0")}})
    assert {(h.pod, h.share) for h in holds} == {("p1", 0.5), ("p2", 0.5), ("mon", 0.0)}


def test_attribution_resolves_whole_gpu_mig_and_shares() -> None:
    """gpu-0 whole -> G0 x 1; the shared gpu-1 -> G1 x 1/2 per pod; 3g.40gb -> instance 1 of G2, 3/7."""
    claims = [_claim("whole", "main", "w", "gpu-0"), _claim("p1", "main", "s", "gpu-1"),
              _claim("p2", "main", "s", "gpu-1"), _claim("m", "main", "mig", "gpu-2-mig-3g40gb-9-1")]
    res = attribute([], DCGM, allocatable=None, mig_known={}, inventory={}, context=NodeContext(dra_slices=SLICES),
                    claims=claims)
    by = {a.pod: a for a in res.assignments}
    assert (by["whole"].gpu_uuid, by["whole"].dcgm_key, by["whole"].fraction) == (G0, (G0, ""), 1.0)
    assert by["p1"].fraction == by["p2"].fraction == 0.5 and by["p1"].dcgm_key == (G1, "")
    assert by["m"].kind is DeviceKind.MIG and by["m"].dcgm_key == (G2, "1")
    assert by["m"].fraction == pytest.approx(3 / 7) and by["m"].mig_profile == "3g.40gb"
    assert {a.sharing for a in res.assignments} == {SharingMode.DRA}
    assert res.learned["MIG-aaaa"].gpu_instance_id == "1" and res.unresolved == []
    assert res.sharing == {G0: SharingMode.DRA, G1: SharingMode.DRA, G2: SharingMode.DRA}


def test_without_slices_gpu_names_fall_back_to_the_minor_number() -> None:
    """No API: gpu-1 is the GPU DCGM labels gpu="1"; a MIG name still gives parent minor and profile."""
    claims = [_claim("p", "main", "c", "gpu-1"), _claim("m", "main", "mig", "gpu-2-mig-3g40gb-9-1")]
    res = attribute([], DCGM, allocatable=None, mig_known={}, inventory={}, claims=claims)
    by = {a.pod: a for a in res.assignments}
    assert (by["p"].gpu_uuid, by["p"].fraction) == (G1, 1.0)
    assert (by["m"].gpu_uuid, by["m"].dcgm_key) == (G2, (G2, "1"))
    assert by["m"].fraction == pytest.approx(3 / 7)


def _device(name: str, kind: str, uuid: str, *, qualified: bool = False, **extra: str) -> dict[str, object]:
    attrs = {"type": {"string": kind}, (f"{NV}/uuid" if qualified else "uuid"): {"string": uuid},
             **{k: {"string": v} for k, v in extra.items()}}
    return {"name": name, "attributes": attrs}


def _slice(gen: int, *devices: dict[str, object], pool: str = "node-a", count: int = 1) -> dict[str, object]:
    return {"spec": {"driver": NV, "pool": {"name": pool, "generation": gen, "resourceSliceCount": count},
                     "devices": list(devices)}}


def test_slice_index_takes_the_newest_generation_and_driver_domain_names() -> None:
    """The newer generation is listed first, so neither first- nor last-seen wins by accident; gpu-1 is
    only in the old generation, which the driver has since replaced: it must be gone."""
    new = _slice(2, _device("gpu-0", "gpu", "GPU-new", qualified=True))
    old = _slice(1, _device("gpu-0", "gpu", "GPU-old"), _device("gpu-1", "gpu", "GPU-gone"))
    idx = slice_index([new, old])
    assert idx == {DeviceKey(NV, "node-a", "gpu-0"): SliceDevice("gpu", "GPU-new")}
    assert slice_index([old, new]) == idx


def test_slice_index_reads_every_slice_of_a_pool() -> None:
    """One pool (generation 3) in two slices, as under DynamicMIG: a whole GPU in one, a MIG device in the
    other. Both are indexed, whichever slice is listed last."""
    gpu = _slice(3, _device("gpu-0", "gpu", G0), count=2)
    mig = _slice(3, _device("gpu-1-mig-3g40gb-9-1", "mig", "MIG-aaaa", parentUUID=G1, profile="3g.40gb"), count=2)
    want = {DeviceKey(NV, "node-a", "gpu-0"): SliceDevice("gpu", G0),
            DeviceKey(NV, "node-a", "gpu-1-mig-3g40gb-9-1"): SliceDevice("mig", "MIG-aaaa", G1, "3g.40gb")}
    assert slice_index([gpu, mig]) == want
    assert slice_index([mig, gpu]) == want


def test_admin_devices_reads_the_allocation_results() -> None:
    claim = {"status": {"allocation": {"devices": {"results": [
        {"driver": NV, "pool": "node-a", "device": "gpu-0", "adminAccess": True},
        {"driver": NV, "pool": "node-a", "device": "gpu-1"}]}}}}
    assert admin_devices(claim) == {DeviceKey(NV, "node-a", "gpu-0")}
    assert admin_devices({}) == set()


def test_shared_mig_claim_resolves_once_for_all_its_pods() -> None:
    """Two 3g.40gb instances on G2; DCGM labels instance 2 with the first pod only. Both pods of the claim
    get instance 2 (3/7 x 1/2 = 3/14 each), not the other, idle, instance; and only one location is learned."""
    mig_slices = {DeviceKey(NV, "node-a", "gpu-2-mig-3g40gb-9-2"): SliceDevice("mig", "MIG-bbbb", G2, "3g.40gb")}
    dcgm = {(G2, "1"): DcgmDevice(gpu_uuid=G2, index="2", model=A100, gpu_instance_id="1", mig_profile="3g.40gb"),
            (G2, "2"): DcgmDevice(gpu_uuid=G2, index="2", model=A100, gpu_instance_id="2", mig_profile="3g.40gb",
                                  pods={("ml", "e0", "main")})}
    claims = [_claim(pod, "main", "eval", "gpu-2-mig-3g40gb-9-2") for pod in ("e0", "e1")]
    res = attribute([], dcgm, allocatable=None, mig_known={}, inventory={}, context=NodeContext(dra_slices=mig_slices),
                    claims=claims)
    assert {(a.pod, a.dcgm_key) for a in res.assignments} == {("e0", (G2, "2")), ("e1", (G2, "2"))}
    assert all(a.fraction == pytest.approx(3 / 14) for a in res.assignments)
    assert res.learned["MIG-bbbb"].gpu_instance_id == "2"


def test_claim_names_travel_to_the_snapshot_and_survive_a_restart() -> None:
    """Each DRA holder names its claim (``<namespace>/<name>``) on the wire; a device-plugin holder names
    none. 15 s on G0 through claim w: 1 x 15 = 15 GPU-s under ml/w; the state file keeps the name."""
    from exporter.agent.meter import Meter
    from exporter.agent.publish import snapshot_of
    from exporter.agent.state import dump_meter, load_meter
    from exporter.model.pod_resources import ContainerDevices

    claims = [_claim("whole", "main", "w", "gpu-0"), _claim("p1", "main", "s", "gpu-1")]
    plain = ContainerDevices("ml", "plain", "main", "nvidia.com/gpu", ("GPU-3333",))
    ctx = NodeContext(dra_slices=SLICES)
    m = Meter(node="n")
    for now in (0.0, 15.0):
        m.tick(now, attribute([plain], DCGM, allocatable=None, mig_known={}, inventory={}, context=ctx, claims=claims),
               dcgm=DCGM, cap=60.0)
    claim_of = {h.pod: (h.claim, h.allocated_s) for h in snapshot_of(m, 15.0, dcgm_up=True,
                                                                       podresources_up=True).holders}
    assert claim_of == {"whole": ("ml/w", 15.0), "p1": ("ml/s", 15.0), "plain": ("", 15.0)}
    again = load_meter(dump_meter(m), "n")
    assert {h.pod: h.claim for h in again.holders.values()} == {"whole": "ml/w", "p1": "ml/s", "plain": ""}


GI = 2.0**30
CAP_SLICES = {DeviceKey(NV, "node-a", "gpu-0"): SliceDevice("gpu", G0, memory=80 * GI)}


def _share(device: str, memory: str, share: str = "s-1", **extra: object) -> dict[str, object]:
    return {"driver": NV, "pool": "node-a", "device": device, "shareID": share,
            "consumedCapacity": {"memory": memory, "multiprocessors": "0"}, **extra}


def test_consumed_memory_sums_a_claims_shares_per_device() -> None:
    """Two shares of gpu-0 in one claim: 10Gi + 5Gi = 15 GiB; a result without shareID (an ordinary
    allocation) and an adminAccess share are not shares to charge."""
    claim = {"status": {"allocation": {"devices": {"results": [
        _share("gpu-0", "10Gi"), _share("gpu-0", "5Gi", "s-2"), {"driver": NV, "pool": "node-a", "device": "gpu-1"},
        _share("gpu-1", "20Gi", "s-3", adminAccess=True)]}}}}
    assert consumed_memory(claim) == {DeviceKey(NV, "node-a", "gpu-0"): 15 * GI}
    assert consumed_memory({}) == {}


def test_slice_index_reads_device_memory() -> None:
    """capacity.memory 80Gi = 80 x 2^30 bytes; an unreadable quantity is unknown, not 0."""
    def slice_(memory: str) -> dict[str, object]:
        return {"spec": {"driver": NV, "pool": {"name": "node-a", "generation": 1}, "devices": [
            {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": G0}},
             "capacity": {"memory": {"value": memory}}}]}}
    assert slice_index([slice_("80Gi")])[DeviceKey(NV, "node-a", "gpu-0")].memory == 80 * GI
    assert slice_index([slice_("eighty")])[DeviceKey(NV, "node-a", "gpu-0")].memory is None


def test_consumable_capacity_shares_charge_memory_over_device_memory_and_split_busy_time() -> None:
    """gpu-0 (80 GiB) reads 0.6. Claim a consumes 20 GiB: 20/80 = 0.25. Claim b consumes 40 GiB and is
    shared by b1 and b2: 40/80 / 2 = 0.25 each. 15 s: allocated 0.25 x 15 = 3.75 GPU-s each; the busy
    0.6 x 15 = 9 GPU-s split by fraction, 9 x 0.25 / 0.75 = 3 each (under 3.75): used 3 GPU-s each."""
    from exporter.agent.meter import Meter

    claims = [_claim("a", "main", "a", "gpu-0"), _claim("b1", "main", "b", "gpu-0"), _claim("b2", "main", "b", "gpu-0")]
    ctx = NodeContext(dra_slices=CAP_SLICES, dra_consumed={"ml/a": {DeviceKey(NV, "node-a", "gpu-0"): 20 * GI},
                                                           "ml/b": {DeviceKey(NV, "node-a", "gpu-0"): 40 * GI}})
    dcgm = {(G0, ""): DcgmDevice(gpu_uuid=G0, index="0", model=A100, gr_engine=0.6)}
    res = attribute([], dcgm, allocatable=None, mig_known={}, inventory={}, context=ctx, claims=claims)
    assert {a.pod: a.fraction for a in res.assignments} == {"a": 20 / 80, "b1": 40 / 80 / 2, "b2": 40 / 80 / 2}
    assert res.unresolved == []
    m = Meter(node="n")
    for now in (0.0, 15.0):
        m.tick(now, attribute([], dcgm, allocatable=None, mig_known={}, inventory={}, context=ctx, claims=claims),
               dcgm=dcgm, cap=60.0)
    for h in m.holders.values():
        assert h.usage.allocated == pytest.approx(0.25 * 15)
        assert h.usage.used == pytest.approx(0.6 * 15 * 0.25 / 0.75)
    assert m.unallocated[A100] == pytest.approx((1 - 0.75) * 15)


def test_share_of_a_device_without_published_memory() -> None:
    """No capacity.memory in the slice: DCGM's used + free framebuffer (30 + 50 = 80 GiB) stands in, 20/80;
    without either the share is charged the whole device and counted unresolved (never guessed smaller)."""
    claims = [_claim("a", "main", "a", "gpu-0")]
    consumed = {"ml/a": {DeviceKey(NV, "node-a", "gpu-0"): 20 * GI}}
    bare = {DeviceKey(NV, "node-a", "gpu-0"): SliceDevice("gpu", G0)}
    fb = {(G0, ""): DcgmDevice(gpu_uuid=G0, index="0", model=A100, fb_used=30 * GI, fb_free=50 * GI)}
    res = attribute([], fb, allocatable=None, mig_known={}, inventory={},
                    context=NodeContext(dra_slices=bare, dra_consumed=consumed), claims=claims)
    assert [a.fraction for a in res.assignments] == [20 / 80] and res.unresolved == []
    res = attribute([], DCGM, allocatable=None, mig_known={}, inventory={},
                    context=NodeContext(dra_slices=bare, dra_consumed=consumed), claims=claims)
    assert [a.fraction for a in res.assignments] == [1.0] and res.unresolved == ["node-a/gpu-0"]
