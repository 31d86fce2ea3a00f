"""The static shape of a simulated cluster: GPU UUIDs, MIG instances, replicas, and which pod holds what.

Identities are deterministic (UUIDv5 of node and index) so a scenario always produces the same IDs.
The simulator never gives one whole GPU to two pods, and a MIG resource only from a matching instance.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field

from exporter.model.devices import gpu_slices, profile_slices
from exporter.model.durations import format_duration
from exporter.sim.spec import NodeSpec, Scenario, ScenarioError

_NS = uuidlib.UUID("6f1c1d3e-8d0b-4a43-9f43-0b8f2f1f7c11")


@dataclass(slots=True)
class MigInstance:
    uuid: str  # "MIG-..."
    gpu_instance_id: int
    profile: str


@dataclass(slots=True)
class GpuLayout:
    index: int
    uuid: str  # "GPU-..."
    pci_bus_id: str
    mig: list[MigInstance] = field(default_factory=list)
    replicas: int = 0


@dataclass(slots=True)
class NodeLayout:
    spec: NodeSpec
    gpus: list[GpuLayout]
    resources: dict[str, list[str]]  # resource -> device IDs, in allocation order


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
        else:
            resources.setdefault("nvidia.com/gpu", []).append(gpu_uuid)
        gpus.append(gpu)
    return NodeLayout(spec, gpus, resources)


@dataclass(slots=True)
class Placement:
    layouts: dict[str, NodeLayout]
    devices: dict[tuple[str, str], list[str]]  # (namespace, pod) -> device IDs


def place_pods(scenario: Scenario) -> Placement:
    """Give every scheduled pod its devices, or raise ``ScenarioError`` naming the pod's field."""
    layouts = {n.name: node_layout(n) for n in scenario.nodes}
    busy: dict[str, list[tuple[float, float]]] = {}
    devices: dict[tuple[str, str], list[str]] = {}
    order = sorted(range(len(scenario.pods)), key=lambda i: (scenario.pods[i].start, i))
    for i in order:
        pod = scenario.pods[i]
        if pod.node is None:
            continue
        layout = layouts[pod.node]
        offered = layout.resources.get(pod.resource)
        if offered is None:
            kinds = ", ".join(sorted(layout.resources)) or "no GPU resources"
            raise ScenarioError(f"{scenario.source}: pods[{i}].resource: node {pod.node} offers no {pod.resource} "
                                f"(it offers: {kinds})")
        if pod.gpus > len(offered):
            raise ScenarioError(f"{scenario.source}: pods[{i}].gpus: {pod.gpus} {pod.resource} requested, node "
                                f"{pod.node} has {len(offered)}")
        end = pod.end if pod.end is not None else float("inf")
        free = [d for d in offered
                if all(e <= pod.start or s >= end for s, e in busy.get(d, []))]
        if len(free) < pod.gpus:
            raise ScenarioError(f"{scenario.source}: pods[{i}].gpus: node {pod.node} has only {len(free)} free "
                                f"{pod.resource} at {format_duration(pod.start)}")
        chosen = free[: pod.gpus]
        for d in chosen:
            busy.setdefault(d, []).append((pod.start, end))
        devices[(pod.namespace, pod.name)] = chosen
    return Placement(layouts, devices)
