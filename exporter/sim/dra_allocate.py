"""The scheduler's DRA allocator, as the simulator plays it: each claim request gets the lowest free
published devices of its class (MIG: free instances of its profile), deterministically.

Pods are taken in start order (then file order). A pod's own claim is busy for the pod's run; a
``resource_claims`` entry is allocated when its first pod starts and stays so until its last pod ends,
on that pod's node (an allocation is node-local). ``admin_access`` claims take the lowest devices of
their class whatever holds them: monitoring access ignores allocations. Explicit claims (``devices``)
keep their devices, which are busy for their pods' runs.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import replace

from exporter.model.durations import format_duration
from exporter.sim.layout import DraDevice, NodeLayout
from exporter.sim.scenario_claims import GPU_CLASS, MIG_CLASS, ClaimRequest, PodClaim, SharedClaim, SharedRef
from exporter.sim.spec import ClaimSpec, PodSpec, ScenarioError

_SUFFIX_NS = uuidlib.UUID("2b1f0c5e-7d3a-4c6b-9e8f-5a4b3c2d1e0f")
_Busy = dict[tuple[str, str], list[tuple[float, float]]]  # (node, device) -> busy windows


def _end(pod: PodSpec) -> float:
    return pod.end if pod.end is not None else float("inf")


def _ordered(layout: NodeLayout) -> list[DraDevice]:
    """Published devices lowest first: by GPU index, then a GPU's MIG instances in carve order."""
    rank = {g.uuid: (g.index, -1) for g in layout.gpus}
    rank.update({m.uuid: (g.index, j) for g in layout.gpus for j, m in enumerate(g.mig)})
    return sorted(layout.dra, key=lambda d: rank[d.uuid])


def _class_of(layout: NodeLayout, devices: tuple[str, ...]) -> str:
    """An explicit claim's device class: mig.nvidia.com when every device it names is a MIG device."""
    found = [layout.dra_device(n) for n in devices]
    return MIG_CLASS if found and all(d is not None and d.type == "mig" for d in found) else GPU_CLASS


def _pick(layout: NodeLayout, req: ClaimRequest, *, window: tuple[float, float], busy: _Busy,
          where: str) -> tuple[str, ...]:
    """The lowest ``req.count`` devices of the class free over ``window``; marks them busy."""
    node = layout.spec.name
    kind = "mig" if req.device_class == MIG_CLASS else "gpu"
    fits = [d.name for d in _ordered(layout) if d.type == kind and (req.profile is None or d.profile == req.profile)]
    what = req.device_class + (f" {req.profile}" if req.profile else "")
    if req.admin_access:
        if len(fits) < req.count:
            raise ScenarioError(f"{where}.count: node {node} publishes {len(fits)} {what}, {req.count} asked")
        return tuple(fits[: req.count])
    start, end = window
    free = [n for n in fits if all(e <= start or s >= end for s, e in busy.get((node, n), []))]
    if len(free) < req.count:
        raise ScenarioError(f"{where}.count: node {node} has only {len(free)} free {what} at "
                            f"{format_duration(start)} ({req.count} asked)")
    chosen = tuple(free[: req.count])
    for n in chosen:
        busy.setdefault((node, n), []).append(window)
    return chosen


def _own_claim(pod: PodSpec, req: ClaimRequest, *, devices: tuple[str, ...], taken: set[str]) -> ClaimSpec:
    """A pod's own claim as the claim controller makes it from a template: ``<pod>-<pod claim>-<suffix>``;
    for an extended-resource request, the scheduler's ``<pod>-extended-resources-<suffix>``."""
    if req.extended:
        suffix = uuidlib.uuid5(_SUFFIX_NS, f"{pod.namespace}/{pod.name}/extended").hex[:5]
        return ClaimSpec(f"{pod.name}-extended-resources-{suffix}", devices, device_class=GPU_CLASS, extended=True)
    alias = "mig" if req.device_class == MIG_CLASS else "gpu"
    base, k = alias, 1
    while alias in taken:
        alias, k = f"{base}-{k}", k + 1
    taken.add(alias)
    suffix = uuidlib.uuid5(_SUFFIX_NS, f"{pod.namespace}/{pod.name}/{alias}").hex[:5]
    return ClaimSpec(f"{pod.name}-{alias}-{suffix}", devices, req.admin_access, None, req.device_class, alias)


def allocate_claims(source: str, *, pods: list[PodSpec], requested: list[list[PodClaim]],
                    shared: dict[tuple[str, str], SharedClaim], nodes: dict[str, NodeLayout]) -> None:
    """Resolve every pod's ``requested`` claims (parallel to ``pods``) to ClaimSpecs with devices, in
    ``pod.claims``. Errors name the file and the field (``pods[i].claims[j]...``, ``resource_claims[k]``)."""
    busy: _Busy = {}
    users: dict[tuple[str, str], list[int]] = {}
    for i, (pod, claims) in enumerate(zip(pods, requested, strict=True)):
        for j, c in enumerate(claims):
            if isinstance(c, ClaimSpec) and not c.admin_access:
                for name in c.devices:
                    busy.setdefault((str(pod.node), name), []).append((pod.start, _end(pod)))
            elif isinstance(c, SharedRef):
                key = (pod.namespace, c.name)
                if key not in shared:
                    raise ScenarioError(f"{source}: pods[{i}].claims[{j}].shared: no resource_claims entry "
                                        f"{c.name!r} in namespace {pod.namespace}")
                holders = users.setdefault(key, [])
                if holders and pods[holders[0]].node != pod.node:
                    raise ScenarioError(f"{source}: pods[{i}].claims[{j}].shared: claim {key[0]}/{key[1]} is "
                                        f"allocated on node {pods[holders[0]].node}, not {pod.node}")
                holders.append(i)
    for key, entry in shared.items():
        if key not in users:
            raise ScenarioError(f"{source}: {entry.where}: no pod uses claim {key[0]}/{key[1]}")
    made: dict[tuple[str, str], ClaimSpec] = {}
    for i in sorted(range(len(pods)), key=lambda i: (pods[i].start, i)):
        pod, taken = pods[i], set[str]()
        layout = nodes[str(pod.node)] if requested[i] else None
        out: list[ClaimSpec] = []
        for j, c in enumerate(requested[i]):
            assert layout is not None
            where = f"{source}: pods[{i}].claims[{j}]"
            if isinstance(c, ClaimSpec):
                out.append(replace(c, device_class=_class_of(layout, c.devices)))
            elif isinstance(c, ClaimRequest):
                devices = _pick(layout, c, window=(pod.start, _end(pod)), busy=busy, where=where)
                out.append(_own_claim(pod, c, devices=devices, taken=taken))
            else:
                key = (pod.namespace, c.name)
                if key not in made:
                    entry, sharing = shared[key], [pods[u] for u in users[key]]
                    window = (min(p.start for p in sharing), max(_end(p) for p in sharing))
                    devices = _pick(layout, entry.request, window=window, busy=busy, where=f"{source}: {entry.where}")
                    made[key] = ClaimSpec(entry.name, devices, entry.request.admin_access, None,
                                          entry.request.device_class)
                out.append(made[key])
        pod.claims = out
