"""The static shape of a simulated cluster: GPU UUIDs, MIG instances, replicas, and which pod holds what.

Identities are deterministic (UUIDv5 of node and index) so a scenario always produces the same IDs.
The simulator never gives one whole GPU to two pods, and a MIG resource only from a matching instance.
HAMi pods get physical GPUs as HAMi's scheduler would (lowest index with room for the memory and cores
requested) and, separately, plugin IDs as the kubelet would (the next free ones, which may name another GPU).
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field

from exporter.model.devices import gpu_slices, profile_slices
from exporter.model.durations import format_duration
from exporter.sim.hardware import framebuffer_mib
from exporter.sim.spec import ClaimSpec, HamiSpec, NodeSpec, PodSpec, Scenario, ScenarioError
from exporter.sim.vendors.devices import vendor_devices

_NS = uuidlib.UUID("6f1c1d3e-8d0b-4a43-9f43-0b8f2f1f7c11")


@dataclass(slots=True)
class MigInstance:
    """A MIG instance carved out of a GPU: its uuid, GPU-instance ID and profile (e.g. ``1g.10gb``)."""

    uuid: str  # "MIG-..."
    gpu_instance_id: int
    profile: str


@dataclass(slots=True)
class GpuLayout:
    """One physical GPU of a node: identity, MIG instances, and the replicas it is shared into."""

    index: int
    uuid: str  # "GPU-..."
    pci_bus_id: str
    mig: list[MigInstance] = field(default_factory=list)
    replicas: int = 0
    hami: bool = False
    partitions: list[str] = field(default_factory=list)  # AMD compute partitions' device IDs, partition 0 first


@dataclass(frozen=True, slots=True)
class DraDevice:
    """A device the NVIDIA DRA driver publishes in the node's ResourceSlice (pool = node name)."""

    name: str  # gpu-<minor>, or gpu-<minor>-mig-<profile without '.'>-<GI profile id>-<placement start>
    type: str  # gpu | mig
    uuid: str
    parent_uuid: str = ""
    profile: str = ""


_GI_PROFILE_ID = {1: 19, 2: 14, 3: 9, 4: 5, 7: 0}  # NVML GPU-instance profile ids by slice count (7-slice GPUs)


@dataclass(slots=True)
class NodeLayout:
    """A node's devices as the device plugins, DRA driver and DCGM see them."""

    spec: NodeSpec
    gpus: list[GpuLayout]
    resources: dict[str, list[str]]  # resource -> device IDs, in allocation order
    dra: list[DraDevice] = field(default_factory=list)

    def dra_device(self, name: str) -> DraDevice | None:
        """The DRA device published as ``name`` (e.g. ``gpu-0``); None when the node publishes no such device."""
        return next((d for d in self.dra if d.name == name), None)


def _gi_ids(profiles: list[str], slices: int) -> list[int]:
    base = {7: 0, 4: 1, 3: 1, 2: 3, 1: 7} if slices == 7 else {4: 0, 2: 1, 1: 3}
    used: set[int] = set()
    out = []
    for p in profiles:
        gi = base.get(profile_slices(p), 1)
        while gi in used:
            gi += 1
        used.add(gi)
        out.append(gi)
    return out


def node_layout(spec: NodeSpec) -> NodeLayout:
    """The devices of ``spec``: stable uuids per node and GPU index, MIG instances, shared replicas."""
    if spec.vendor != "nvidia":
        vendor_gpus, vendor_ids = vendor_devices(spec)
        return NodeLayout(spec, [GpuLayout(g.index, g.key, g.pci, partitions=list(g.partitions))
                                 for g in vendor_gpus], vendor_ids)
    gpus: list[GpuLayout] = []
    resources: dict[str, list[str]] = {}
    shared_name = "nvidia.com/gpu.shared" if spec.time_slicing_rename else "nvidia.com/gpu"
    for i in range(spec.gpus):
        gpu_uuid = f"GPU-{uuidlib.uuid5(_NS, f'{spec.name}/gpu{i}')}"
        gpu = GpuLayout(i, gpu_uuid, f"00000000:{0x18 + i * 0x10:02X}:00.0")
        if i in spec.mig:
            profiles = spec.mig[i]
            for j, (profile, gi) in enumerate(zip(profiles, _gi_ids(profiles, gpu_slices(spec.model)), strict=True)):
                mig_uuid = f"MIG-{uuidlib.uuid5(_NS, f'{spec.name}/gpu{i}/mig{j}')}"
                gpu.mig.append(MigInstance(mig_uuid, gi, profile))
                resources.setdefault(f"nvidia.com/mig-{profile}", []).append(mig_uuid)
        elif spec.time_slicing:
            gpu.replicas = spec.time_slicing
            resources.setdefault(shared_name, []).extend(f"{gpu_uuid}::{k}" for k in range(spec.time_slicing))
        elif spec.sharing == "hami":
            gpu.hami = True
        else:
            resources.setdefault("nvidia.com/gpu", []).append(gpu_uuid)
        gpus.append(gpu)
    if spec.dra:  # a GPU in MIG mode is published only as its MIG devices
        resources = {}
        dra = [DraDevice(f"gpu-{g.index}-mig-{m.profile.replace('.', '')}-"
                         f"{_GI_PROFILE_ID.get(profile_slices(m.profile), 0)}-{m.gpu_instance_id}",
                         "mig", m.uuid, g.uuid, m.profile) for g in gpus for m in g.mig]
        dra += [DraDevice(f"gpu-{g.index}", "gpu", g.uuid) for g in gpus if not g.mig]
        return NodeLayout(spec, gpus, resources, sorted(dra, key=lambda d: d.name))
    if spec.sharing == "hami":
        # HAMi's plugin IDs, highest GPU first: the kubelet's pick then names another GPU than HAMi's.
        resources["nvidia.com/gpu"] = [f"{g.uuid}-{k}" for g in reversed(gpus) for k in range(spec.hami_split)]
    return NodeLayout(spec, gpus, resources)


@dataclass(frozen=True, slots=True)
class HamiShare:
    """One vGPU share HAMi's scheduler gave a pod: the physical GPU and what of it."""

    gpu_uuid: str
    memory_mib: int
    cores: int


def hami_request(pod: PodSpec, spec: NodeSpec) -> HamiSpec:
    """What a pod on a HAMi node asks per GPU; no ``hami`` field means the whole framebuffer (HAMi's default)."""
    return pod.hami or HamiSpec(framebuffer_mib(spec.model), 0)


@dataclass(frozen=True, slots=True)
class _Use:
    start: float
    end: float
    memory_mib: int
    cores: int


def _hami_gpus(layout: NodeLayout, pod: PodSpec, *, used: dict[str, list[_Use]], where: str) -> list[HamiShare]:
    """HAMi's binpack: the lowest-index GPUs with room (memory, cores, plugin slots) for the whole run."""
    req = hami_request(pod, layout.spec)
    fb = framebuffer_mib(layout.spec.model)
    end = pod.end if pod.end is not None else float("inf")
    chosen: list[HamiShare] = []
    for gpu in layout.gpus:
        overlapping = [u for u in used.get(gpu.uuid, []) if not (u.end <= pod.start or u.start >= end)]
        if (sum(u.memory_mib for u in overlapping) + req.memory_mib <= fb
                and sum(u.cores for u in overlapping) + req.cores <= 100
                and len(overlapping) < layout.spec.hami_split):
            chosen.append(HamiShare(gpu.uuid, req.memory_mib, req.cores))
        if len(chosen) == pod.gpus:
            break
    if len(chosen) < pod.gpus:
        raise ScenarioError(f"{where}.hami: node {pod.node} has only {len(chosen)} GPUs with {req.memory_mib} MiB "
                            f"and {req.cores}% cores free at {format_duration(pod.start)} ({fb} MiB each)")
    for share in chosen:
        used.setdefault(share.gpu_uuid, []).append(_Use(pod.start, end, share.memory_mib, share.cores))
    return chosen


@dataclass(slots=True)
class Placement:
    """Where every pod's devices are: plugin device IDs, HAMi shares and DRA claims, by pod or claim."""

    layouts: dict[str, NodeLayout]
    devices: dict[tuple[str, str], list[str]]  # (namespace, pod) -> device IDs
    hami: dict[tuple[str, str], list[HamiShare]] = field(default_factory=dict)  # (namespace, pod) -> shares
    claims: dict[tuple[str, str], ClaimSpec] = field(default_factory=dict)  # (namespace, claim) -> claim


_Busy = dict[str, list[tuple[float, float, str, int | None]]]  # device -> (start, end, claim, share MiB)


def _place_claims(layout: NodeLayout, pod: PodSpec, *, placement: Placement, busy: _Busy, where: str) -> None:
    """Claims name published devices; one claim is the same everywhere; a device is in one claim at a time,
    unless every claim on it is a consumable-capacity share (``memory_mib``) and together they fit its memory."""
    end = pod.end if pod.end is not None else float("inf")
    for j, claim in enumerate(pod.claims):
        at = f"{where}.claims[{j}]"
        seen = placement.claims.setdefault((pod.namespace, claim.name), claim)
        if seen != claim:
            raise ScenarioError(f"{at}: claim {pod.namespace}/{claim.name} is used elsewhere with other devices")
        for name in claim.devices:
            dev = layout.dra_device(name)
            if dev is None:
                names = ", ".join(d.name for d in layout.dra)
                raise ScenarioError(f"{at}.devices: node {pod.node} publishes no {name!r} (it publishes: {names})")
            if claim.admin_access:
                continue  # monitoring access ignores allocations
            if claim.memory_mib is not None and dev.type != "gpu":
                raise ScenarioError(f"{at}.memory_mib: {name} is not a whole GPU (MIG shares are not simulated)")
            key = f"{pod.node}/{name}"
            overlapping = {other: (s, mib) for s, e, other, mib in busy.get(key, [])
                           if not (e <= pod.start or s >= end)}
            overlapping[claim.name] = (pod.start, claim.memory_mib)
            for other, (s, mib) in overlapping.items():
                if other != claim.name and (mib is None or claim.memory_mib is None):
                    raise ScenarioError(f"{at}.devices: {name} is allocated to claim {other} at "
                                        f"{format_duration(max(s, pod.start))}")
            total, fb = sum(m or 0 for _s, m in overlapping.values()), framebuffer_mib(layout.spec.model)
            if claim.memory_mib is not None and total > fb:
                raise ScenarioError(f"{at}.memory_mib: shares of {name} add up to {total} MiB, over its {fb} MiB")
            busy.setdefault(key, []).append((pod.start, end, claim.name, claim.memory_mib))


def place_pods(scenario: Scenario) -> Placement:
    """Give every scheduled pod its devices, or raise ``ScenarioError`` naming the pod's field."""
    layouts = {n.name: node_layout(n) for n in scenario.nodes}
    busy: dict[str, list[tuple[float, float]]] = {}
    devices: dict[tuple[str, str], list[str]] = {}
    hami: dict[tuple[str, str], list[HamiShare]] = {}
    hami_used: dict[str, list[_Use]] = {}
    placement = Placement(layouts, devices, hami)
    claim_busy: _Busy = {}
    order = sorted(range(len(scenario.pods)), key=lambda i: (scenario.pods[i].start, i))
    for i in order:
        pod = scenario.pods[i]
        if pod.node is None:
            continue
        layout = layouts[pod.node]
        if pod.kai is not None and not pod.kai.reservation:
            continue  # a KAI fraction holds no device itself: its GPU group's reservation pod does
        if pod.claims:
            _place_claims(layout, pod, placement=placement, busy=claim_busy, where=f"{scenario.source}: pods[{i}]")
            continue
        offered = layout.resources.get(pod.resource)
        if offered is None:
            kinds = ", ".join(sorted(layout.resources)) or "no GPU resources"
            raise ScenarioError(f"{scenario.source}: pods[{i}].resource: node {pod.node} offers no {pod.resource} "
                                f"(it offers: {kinds})")
        if pod.gpus > len(offered):
            raise ScenarioError(f"{scenario.source}: pods[{i}].gpus: {pod.gpus} {pod.resource} requested, node "
                                f"{pod.node} has {len(offered)}")
        end = pod.end if pod.end is not None else float("inf")
        free = [d for d in offered  # keyed by node: AMD's PCI addresses and partition names repeat across nodes
                if all(e <= pod.start or s >= end for s, e in busy.get(f"{pod.node}/{d}", []))]
        if pod.kai is not None:  # KAI's reservation pod: the GPU its binder chose for the group
            free = [d for d in free if d == layout.gpus[pod.kai.placed[0]].uuid]
        if len(free) < pod.gpus:
            raise ScenarioError(f"{scenario.source}: pods[{i}].gpus: node {pod.node} has only {len(free)} free "
                                f"{pod.resource} at {format_duration(pod.start)}")
        chosen = free[: pod.gpus]
        for d in chosen:
            busy.setdefault(f"{pod.node}/{d}", []).append((pod.start, end))
        devices[(pod.namespace, pod.name)] = chosen
        if layout.spec.sharing == "hami":
            hami[(pod.namespace, pod.name)] = _hami_gpus(layout, pod, used=hami_used,
                                                         where=f"{scenario.source}: pods[{i}]")
    return placement
