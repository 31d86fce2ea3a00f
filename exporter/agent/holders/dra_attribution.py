"""DRA holds -> assignments: a whole GPU or a MIG instance, times the pod's share of the claim.

MIG instances allocated through DRA resolve like device-plugin ones: the resolver (NVML) or a
location learned before by MIG UUID, else the only DCGM instance of that profile on the parent GPU,
else the one whose DCGM pod labels name the holder. What cannot be resolved is held but unmeasured.

A consumable-capacity share holds ``consumed memory / device memory`` of its device (the slice's
``capacity.memory``, else DCGM's used + free framebuffer); shares of one GPU split its busy time as
time-slicing replicas do. A share whose device memory nobody published is charged the whole device
and counted as unresolved.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.assignment import Assignment, Attribution, MigLocation, MigResolver
from exporter.agent.holders.dra import DeviceKey, DraHold
from exporter.model.devices import DeviceKind, SharingMode, gpu_slices, mig_fraction

DcgmMap = dict[tuple[str, str], DcgmDevice]


def _mig_key(holders: set[tuple[str, str, str]], *, parent: str, profile: str, dcgm: DcgmMap,
             claimed: set[tuple[str, str]]) -> tuple[str, str] | None:
    """The only free instance of ``profile`` on ``parent``, else the one DCGM labels with one of ``holders``."""
    candidates = sorted(k for k, d in dcgm.items()
                        if k[0] == parent and d.gpu_instance_id and d.mig_profile == profile and k not in claimed)
    if len(candidates) > 1:
        candidates = [k for k in candidates if holders & dcgm[k].pods]
    return candidates[0] if len(candidates) == 1 else None


def _capacity_share(h: DraHold, dev: DcgmDevice | None, *, result: Attribution, device_id: str) -> float:
    """The part of its device a hold's shares consume (1 when it is not a consumable-capacity share)."""
    if h.consumed is None:
        return 1.0
    memory = h.device.memory if h.device is not None else None
    if memory is None and dev is not None and dev.fb_used is not None and dev.fb_free is not None:
        memory = dev.fb_used + dev.fb_free
    if not memory:
        result.unresolved.append(device_id)
        return 1.0
    return min(1.0, h.consumed / memory)


def dra_assignments(holds: list[DraHold], *, dcgm: DcgmMap, known: dict[str, MigLocation],
                    resolver: MigResolver | None, model_of: Callable[[str], str | None],
                    result: Attribution) -> list[Assignment]:
    """One assignment per hold; unresolvable devices are listed in ``result.unresolved``."""
    by_minor = {d.index: uuid for (uuid, _gi), d in dcgm.items()}  # a MIG GPU has only instance rows
    claimed: set[tuple[str, str]] = set()
    resolved: dict[DeviceKey, tuple[str, str] | None] = {}  # one device, however many pods share its claim
    holders: dict[DeviceKey, set[tuple[str, str, str]]] = {}
    for h in holds:
        holders.setdefault(h.key, set()).add((h.namespace, h.pod, h.container))
    out: list[Assignment] = []
    for h in holds:
        dev = h.device
        device_id = f"{h.key.pool}/{h.key.device}"
        mig = (dev.type == "mig") if dev is not None else h.name_profile is not None
        if dev is not None and dev.type not in ("gpu", "mig"):  # vfio passthrough: DCGM does not see it
            result.unresolved.append(device_id)
            out.append(Assignment(h.namespace, h.pod, h.container, device_id, DeviceKind.OTHER, "", None, None,
                                  None, h.share, SharingMode.DRA, h.claim))
            continue
        if not mig:
            uuid = dev.uuid if dev is not None else by_minor.get(str(h.minor), "")
            if not uuid:
                result.unresolved.append(device_id)
            key = (uuid, "")
            cap = _capacity_share(h, dcgm.get(key), result=result, device_id=device_id)
            kind = DeviceKind.GPU if h.consumed is None else DeviceKind.REPLICA  # shares split busy time
            out.append(Assignment(h.namespace, h.pod, h.container, uuid or device_id, kind, uuid,
                                  key if key in dcgm else None, model_of(uuid) if uuid else None, None,
                                  cap * h.share, SharingMode.DRA, h.claim))
            continue
        parent = dev.parent_uuid if dev is not None else by_minor.get(str(h.minor), "")
        profile = (dev.profile if dev is not None else h.name_profile) or ""
        mig_uuid = dev.uuid if dev is not None else ""
        if h.key not in resolved:
            loc = (resolver(mig_uuid) if resolver and mig_uuid else None) or known.get(mig_uuid)
            found = (loc.gpu_uuid, loc.gpu_instance_id) if loc is not None else \
                _mig_key(holders[h.key], parent=parent, profile=profile, dcgm=dcgm, claimed=claimed)
            if found is not None:
                claimed.add(found)
                if loc is None and mig_uuid:
                    result.learned[mig_uuid] = MigLocation(found[0], found[1], profile)
            resolved[h.key] = found
        found = resolved[h.key]
        if found is None:
            result.unresolved.append(device_id)
        model = model_of(parent) if parent else None
        try:
            frac = mig_fraction(profile, model)
        except ValueError:
            frac = 1.0 / gpu_slices(model)
        cap = _capacity_share(h, dcgm.get(found) if found else None, result=result, device_id=device_id)
        out.append(Assignment(h.namespace, h.pod, h.container, mig_uuid or device_id, DeviceKind.MIG, parent,
                              found if found in dcgm else None, model, profile or None, frac * cap * h.share,
                              SharingMode.DRA, h.claim))
    return out
