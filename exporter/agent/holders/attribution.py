"""Who holds which device: the pure join of pod-resources allocations with DCGM's devices.

This is the "build" step of fetch -> build -> apply: given what the kubelet says each container holds
and what DCGM Exporter reports, produce one ``Assignment`` per (container, device) with the device's
physical GPU, model, MIG profile and GPU fraction. MIG instances (``MIG-<uuid>``) are resolved to
(parent GPU, GPU instance) through, in order: a resolver such as NVML, a mapping learned earlier (MIG
layouts are static while the instance exists), and DCGM's own pod labels on MIG samples. What cannot
be resolved is still allocated, but unmeasured, and counted as unresolved.

Shared GPUs: device-plugin replicas are 1/replicas (MPS or time-slicing, told apart by the node's
sharing-strategy label); HAMi shares come from the pod annotation, not from the IDs the kubelet lists;
DRA claims (``dra``) are whole GPUs or MIG instances split among the pods sharing the claim.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.amd import amd_assignments, is_amd_resource
from exporter.agent.holders.assignment import Assignment, Attribution, MigLocation, MigResolver
from exporter.agent.holders.dra import dra_holds
from exporter.agent.holders.dra_attribution import dra_assignments
from exporter.agent.holders.gaudi import RESOURCE as GAUDI_RESOURCE
from exporter.agent.holders.gaudi import gaudi_assignments
from exporter.agent.holders.hami import hami_fraction
from exporter.agent.holders.sharing import ContainerKey, NodeContext
from exporter.model.devices import (
    DeviceKind,
    SharingMode,
    gpu_slices,
    hami_device_gpu,
    mig_fraction,
    mig_profile_from_resource,
    parse_device_id,
)
from exporter.model.pod_resources import ContainerClaim, ContainerDevices

MIB = 1048576.0

__all__ = ["GPU_RESOURCES", "Assignment", "Attribution", "MigLocation", "MigResolver", "accepted_resource", "attribute",
           "node_model", "replica_counts", "safe_fraction"]

GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")


def safe_fraction(profile: str | None, model: str | None) -> tuple[float, str | None]:
    """A MIG instance's fraction; a profile we cannot read counts as one slice and is dropped."""
    if profile:
        try:
            return mig_fraction(profile, model), profile
        except ValueError:
            pass
    return 1.0 / gpu_slices(model), None


def accepted_resource(resource: str, extra: Iterable[str] = ()) -> bool:
    """GPU resources we account: whole/shared NVIDIA GPUs, MIG profiles, and configured extras."""
    return resource in GPU_RESOURCES or resource.startswith("nvidia.com/mig-") or resource in extra


def replica_counts(allocatable: dict[str, tuple[str, ...]] | None,
                   held: Iterable[ContainerDevices]) -> dict[str, int]:
    """Replicas per physical GPU: from allocatable IDs, else the highest replica index seen + 1."""
    counts: dict[str, int] = {}
    if allocatable:
        for ids in allocatable.values():
            for raw in ids:
                d = parse_device_id(raw)
                if d.kind is DeviceKind.REPLICA:
                    counts[d.physical] = counts.get(d.physical, 0) + 1
    for cd in held:
        for raw in cd.device_ids:
            d = parse_device_id(raw)
            if d.kind is DeviceKind.REPLICA and d.replica is not None:
                counts[d.physical] = max(counts.get(d.physical, 0), d.replica + 1)
    return counts


def hami_slots(allocatable: dict[str, tuple[str, ...]] | None,
               held: Iterable[ContainerDevices]) -> dict[str, int]:
    """HAMi plugin slots (``GPU-<uuid>-<k>``) per GPU: from allocatable IDs, else the highest k seen + 1."""
    counts: dict[str, int] = {}
    for raw in (i for ids in (allocatable or {}).values() for i in ids):
        gpu = hami_device_gpu(raw)
        if gpu is not None:
            counts[gpu] = counts.get(gpu, 0) + 1
    if not allocatable:
        for raw in (i for cd in held for i in cd.device_ids):
            gpu = hami_device_gpu(raw)
            if gpu is not None:
                counts[gpu] = max(counts.get(gpu, 0), int(raw.rsplit("-", 1)[1]) + 1)
    return counts


def sharing_modes(allocatable: dict[str, tuple[str, ...]] | None, assignments: list[Assignment],
                  *, context: NodeContext) -> dict[str, SharingMode]:
    """How each GPU is shared: as configured (allocatable IDs), overridden by how it is held now."""
    modes: dict[str, SharingMode] = {}
    for raw in (i for ids in (allocatable or {}).values() for i in ids):
        d = parse_device_id(raw)
        gpu = hami_device_gpu(raw)
        if gpu is not None:
            modes[gpu] = SharingMode.HAMI
        elif d.kind is DeviceKind.REPLICA:
            modes[d.physical] = context.replica_mode()
        elif d.kind is DeviceKind.GPU:
            modes.setdefault(d.physical, SharingMode.NONE)
    for dev in context.dra_slices.values():
        if dev.parent_uuid or dev.uuid:
            modes[dev.parent_uuid or dev.uuid] = SharingMode.DRA
    for a in assignments:
        if a.gpu_uuid and a.sharing is not SharingMode.NONE:
            modes[a.gpu_uuid] = a.sharing
    return modes


def node_model(dcgm: dict[tuple[str, str], DcgmDevice] | None, inventory: dict[str, str]) -> str | None:
    """The node's GPU model when every known GPU is the same model (nearly always true)."""
    models = {m for m in inventory.values() if m}
    if dcgm:
        models |= {d.model for d in dcgm.values() if d.model}
    return models.pop() if len(models) == 1 else None


def attribute(
    held: list[ContainerDevices],
    dcgm: dict[tuple[str, str], DcgmDevice] | None,
    *,
    allocatable: dict[str, tuple[str, ...]] | None,
    mig_known: dict[str, MigLocation],
    inventory: dict[str, str],
    extra_resources: Iterable[str] = (),
    resolver: MigResolver | None = None,
    context: NodeContext | None = None,
    claims: Iterable[ContainerClaim] = (),
) -> Attribution:
    """Join pod-resources holdings with DCGM devices. Pure: no I/O, deterministic."""
    extra = tuple(extra_resources)
    ctx = context or NodeContext()
    amd_held = [cd for cd in held if is_amd_resource(cd.resource)]
    gaudi_held = [cd for cd in held if cd.resource == GAUDI_RESOURCE]
    held = [cd for cd in held if accepted_resource(cd.resource, extra) and not is_amd_resource(cd.resource)
            and cd.resource != GAUDI_RESOURCE]
    hami_held = [cd for cd in held if _is_hami(cd, ctx)]
    held = [cd for cd in held if not _is_hami(cd, ctx)]
    result = Attribution()
    replicas = replica_counts(allocatable, held)
    fallback_model = node_model(dcgm, inventory)
    dcgm = dcgm or {}

    def model_of(uuid: str) -> str | None:
        dev = dcgm.get((uuid, ""))
        if dev is not None and dev.model:
            return dev.model
        for (u, _gi), d in dcgm.items():
            if u == uuid and d.model:
                return d.model
        return inventory.get(uuid) or fallback_model

    # MIG resolution, step 1: resolver and what we learned before; step 2: DCGM pod labels.
    locations: dict[str, MigLocation] = {}
    pending: list[tuple[ContainerDevices, str]] = []
    for cd in held:
        for raw in cd.device_ids:
            d = parse_device_id(raw)
            if d.kind is not DeviceKind.MIG or d.physical in locations:
                continue
            loc = resolver(d.physical) if resolver else None
            loc = loc or mig_known.get(d.physical)
            if loc is not None:
                locations[d.physical] = loc
            else:
                pending.append((cd, d.physical))
    claimed = {(loc.gpu_uuid, loc.gpu_instance_id) for loc in locations.values()}
    for cd, mig_uuid in sorted(pending, key=lambda p: (p[0].namespace, p[0].pod, p[0].container, p[1])):
        if mig_uuid in locations:
            continue
        want = mig_profile_from_resource(cd.resource)
        candidates = sorted(
            key for key, dev in dcgm.items()
            if dev.gpu_instance_id and key not in claimed
            and (cd.namespace, cd.pod, cd.container) in dev.pods
            and (want is None or dev.mig_profile == want)
        )
        if candidates:
            key = candidates[0]
            claimed.add(key)
            loc = MigLocation(key[0], key[1], dcgm[key].mig_profile)
            locations[mig_uuid] = loc
            result.learned[mig_uuid] = loc

    for cd in held:
        profile_from_resource = mig_profile_from_resource(cd.resource)
        for raw in cd.device_ids:
            d = parse_device_id(raw)
            if d.kind is DeviceKind.GPU:
                key = (d.physical, "")
                result.assignments.append(Assignment(
                    cd.namespace, cd.pod, cd.container, raw, d.kind, d.physical,
                    key if key in dcgm else None, model_of(d.physical), None, 1.0))
            elif d.kind is DeviceKind.REPLICA:
                r = max(1, replicas.get(d.physical, 1))
                key = (d.physical, "")
                result.assignments.append(Assignment(
                    cd.namespace, cd.pod, cd.container, raw, d.kind, d.physical,
                    key if key in dcgm else None, model_of(d.physical), None, 1.0 / r, ctx.replica_mode()))
            elif d.kind is DeviceKind.MIG:
                loc = locations.get(d.physical)
                if loc is None:
                    result.unresolved.append(raw)
                    model = fallback_model
                    frac, profile = safe_fraction(profile_from_resource, model)
                    result.assignments.append(Assignment(
                        cd.namespace, cd.pod, cd.container, raw, d.kind, "", None, model, profile, frac))
                    continue
                key = (loc.gpu_uuid, loc.gpu_instance_id)
                dev = dcgm.get(key)
                model = model_of(loc.gpu_uuid)
                frac, profile = safe_fraction(
                    (dev.mig_profile if dev else None) or loc.profile or profile_from_resource, model)
                result.assignments.append(Assignment(
                    cd.namespace, cd.pod, cd.container, raw, d.kind, loc.gpu_uuid,
                    key if dev is not None else None, model, profile, frac))
            else:
                result.assignments.append(Assignment(
                    cd.namespace, cd.pod, cd.container, raw, d.kind, d.physical, None, None, None, 1.0))
    slots = hami_slots(allocatable, hami_held)
    for cd in hami_held:
        _hami_assignments(cd, ctx, dcgm=dcgm, slots=slots, model_of=model_of, result=result)
    holds = dra_holds(list(claims), slices=ctx.dra_slices, admin=ctx.dra_admin, consumed=ctx.dra_consumed)
    if holds:
        result.assignments.extend(dra_assignments(holds, dcgm=dcgm, known=mig_known, resolver=resolver,
                                                  model_of=model_of, result=result))
    result.assignments.extend(amd_assignments(amd_held, dcgm, allocatable=allocatable, fallback_model=fallback_model,
                                              unresolved=result.unresolved))
    result.assignments.extend(gaudi_assignments(gaudi_held, dcgm))
    result.sharing = sharing_modes(allocatable, result.assignments, context=ctx)
    return result


def _is_hami(cd: ContainerDevices, ctx: NodeContext) -> bool:
    return any(hami_device_gpu(raw) for raw in cd.device_ids) or \
        ContainerKey(cd.namespace, cd.pod, cd.container) in ctx.hami


def _hami_assignments(cd: ContainerDevices, ctx: NodeContext, *, dcgm: dict[tuple[str, str], DcgmDevice],
                      slots: dict[str, int], model_of: Callable[[str], str | None], result: Attribution) -> None:
    """One share per GPU in the container's annotation; without it, 1/slots of the GPU each listed ID names."""
    shares = ctx.hami.get(ContainerKey(cd.namespace, cd.pod, cd.container))
    if shares is None:
        result.unresolved.extend(cd.device_ids)
        for raw in cd.device_ids:
            gpu = hami_device_gpu(raw) or raw
            key = (gpu, "")
            result.assignments.append(Assignment(
                cd.namespace, cd.pod, cd.container, raw, DeviceKind.REPLICA, gpu, key if key in dcgm else None,
                model_of(gpu), None, 1.0 / max(1, slots.get(gpu, 1)), SharingMode.HAMI))
        return
    for share in shares:
        key = (share.uuid, "")
        dev = dcgm.get(key)
        fb = ctx.gpu_memory_mib()
        if fb is None and dev is not None and dev.fb_used is not None and dev.fb_free is not None:
            fb = (dev.fb_used + dev.fb_free) / MIB
        frac = hami_fraction(share, framebuffer_mib=fb)
        if frac is None:  # a memory share of a GPU whose size nobody told us: unresolved, and charged no less
            result.unresolved.append(share.uuid)  # than its cores nor than one plugin slot
            frac = max(min(share.cores_percent, 100) / 100.0, 1.0 / max(1, slots.get(share.uuid, 1)))
        result.assignments.append(Assignment(
            cd.namespace, cd.pod, cd.container, share.uuid, DeviceKind.REPLICA, share.uuid,
            key if dev is not None else None, model_of(share.uuid), None, frac, SharingMode.HAMI))
