"""KAI Scheduler's GPU sharing as the simulator plays it (docs/scenario.md, reference schedulers.md §1).

A pod with ``kai: {fraction | memory_mib, gpu, devices}`` on a ``scheduler: kai`` node requests no
``nvidia.com/gpu``. KAI's binder puts it on GPUs with room (its ``gpu``, else the lowest), labels it with
each GPU's group (``runai-gpu-group``, or ``runai-gpu-group/<id>`` per GPU for a multi-device fraction),
writes ``GPU_PORTION`` into the ConfigMap its ``runai/shared-gpu-configmap`` annotation names, and runs
one reservation pod per GPU in ``kai-resource-reservation`` that holds the GPU through the device plugin
while any sharer of its group runs; the kubelet lists the GPU on the reservation pod only.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import replace
from typing import Any

from exporter.model.durations import format_duration
from exporter.sim.hardware import framebuffer_mib
from exporter.sim.kube.objects import iso, stable_uid
from exporter.sim.layout import NodeLayout, node_layout
from exporter.sim.scenario_ctx import Ctx
from exporter.sim.spec import KaiSpec, NodeSpec, PodSpec, ScenarioError

NAMESPACE = "kai-resource-reservation"
APP = "kai-resource-reservation"
GROUP_LABEL = "runai-gpu-group"
_NS = uuidlib.UUID("0d6a4c52-3b1e-4f7a-9c2d-8e5f6a7b8c9d")
_EPS = 1e-9


def node_scheduler(ctx: Ctx, n: dict[str, Any], *, node: NodeSpec, where: str) -> None:
    """``scheduler: kai`` (KAI's fractions) and ``dra_extended: true`` (GPUs served by DRA), validated."""
    scheduler = ctx.string(n.get("scheduler", ""), f"{where}.scheduler") if n.get("scheduler") else ""
    if scheduler not in ("", "kai"):
        raise ctx.fail(f"{where}.scheduler", f"expected kai, got {scheduler!r}")
    if scheduler and (node.sharing != "none" or node.mig or node.dra or node.vendor != "nvidia"):
        raise ctx.fail(f"{where}.scheduler", "KAI fractions share whole NVIDIA GPUs of the device plugin: "
                       "drop sharing, mig and dra")
    extended = n.get("dra_extended", False)
    if not isinstance(extended, bool):
        raise ctx.fail(f"{where}.dra_extended", f"expected true or false, got {extended!r}")
    if extended and (node.sharing != "none" or scheduler or node.vendor != "nvidia"):
        raise ctx.fail(f"{where}.dra_extended", "a node served by the NVIDIA DRA driver has no device plugin sharing")
    node.scheduler, node.dra_extended = scheduler, extended
    node.dra = node.dra or extended  # the driver publishes the node's GPUs as ResourceSlices


def pod_kai(ctx: Ctx, p: dict[str, Any], *, where: str, nodes: list[NodeSpec]) -> KaiSpec | None:
    """A pod's ``kai: {fraction | memory_mib, gpu, devices}``, only on a ``scheduler: kai`` node."""
    if p.get("kai") is None:
        return None
    at = f"{where}.kai"
    k = ctx.mapping(p["kai"], at)
    ctx.known_keys(k, {"fraction", "memory_mib", "gpu", "devices"}, where=at)
    node = next((x for x in nodes if x.name == p.get("node")), None)
    if node is None or node.scheduler != "kai":
        raise ctx.fail(at, "only for pods on a node with scheduler: kai")
    for key in ("gpus", "resource", "claims", "hami"):
        if key in p:
            raise ctx.fail(f"{where}.{key}", "a KAI fraction requests no GPU resource: drop it")
    if ("fraction" in k) == ("memory_mib" in k):
        raise ctx.fail(at, "give exactly one of fraction and memory_mib")
    fraction = None if "fraction" not in k else ctx.number(k["fraction"], f"{at}.fraction", lo=0, hi=1)
    if fraction is not None and not 0 < fraction < 1:
        raise ctx.fail(f"{at}.fraction", f"{fraction} is not between 0 and 1 (a whole GPU is nvidia.com/gpu)")
    fb = framebuffer_mib(node.model)
    memory = None if "memory_mib" not in k else ctx.integer(k["memory_mib"], f"{at}.memory_mib", lo=1)
    if memory is not None and memory >= fb:
        raise ctx.fail(f"{at}.memory_mib", f"{memory} MiB is not less than a {node.model}'s {fb} MiB")
    devices = ctx.integer(k.get("devices", 1), f"{at}.devices", lo=1)
    gpu = None if k.get("gpu") is None else ctx.integer(k["gpu"], f"{at}.gpu", lo=0)
    if (gpu or 0) + devices > node.gpus:
        raise ctx.fail(f"{at}.gpu", f"GPUs {gpu or 0}..{(gpu or 0) + devices - 1} are not all on node {node.name} "
                       f"({node.gpus} GPUs)")
    return KaiSpec(fraction, memory, gpu, devices)


def portion(kai: KaiSpec, model: str) -> float:
    """The part of each GPU a fraction takes: ``fraction``, or memory / the GPU's memory to 2 places, as the
    binder writes ``GPU_PORTION``."""
    if kai.fraction is not None:
        return kai.fraction
    return round((kai.memory_mib or 0) / framebuffer_mib(model), 2)


def _end(pod: PodSpec) -> float:
    return pod.end if pod.end is not None else float("inf")


def _periods(windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``windows`` as disjoint periods: a reservation pod lives while any sharer runs."""
    out: list[tuple[float, float]] = []
    start = end = None
    for s, e in sorted(windows):
        if start is not None and end is not None and s <= end:
            end = max(end, e)
            continue
        if start is not None and end is not None:
            out.append((start, end))
        start, end = s, e
    if start is not None and end is not None:
        out.append((start, end))
    return out


def _place(pod: PodSpec, kai: KaiSpec, *, node: NodeSpec, used: dict[int, list[tuple[float, float, float]]],
           where: str) -> tuple[int, ...]:
    """KAI's pick: the asked GPUs, else the lowest run of ``devices`` GPUs with room for the whole run."""
    share, end = portion(kai, node.model), _end(pod)

    def room(g: int) -> bool:
        return sum(p for s, e, p in used.get(g, []) if not (e <= pod.start or s >= end)) + share <= 1 + _EPS

    starts = [kai.gpu] if kai.gpu is not None else list(range(node.gpus - kai.devices + 1))
    for first in starts:
        gpus = tuple(range(first, first + kai.devices))
        if all(room(g) for g in gpus):
            for g in gpus:
                used.setdefault(g, []).append((pod.start, end, share))
            return gpus
    raise ScenarioError(f"{where}.kai: node {node.name} has no room for {share:g} of {kai.devices} GPU(s) "
                        f"at {format_duration(pod.start)}")


def expand(source: str, *, pods: list[PodSpec], nodes: list[NodeSpec]) -> list[PodSpec]:
    """Place every KAI fraction, label and annotate it as KAI's binder does, and return the reservation pods."""
    by_name = {n.name: n for n in nodes}
    used: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    order = sorted((i for i, p in enumerate(pods) if p.kai is not None), key=lambda i: (pods[i].start, i))
    windows: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for i in order:
        pod, kai = pods[i], pods[i].kai
        assert kai is not None and pod.node is not None
        node = by_name[pod.node]
        per_node = {g: used.setdefault((node.name, g), []) for g in range(node.gpus)}
        placed = _place(pod, kai, node=node, used=per_node, where=f"{source}: pods[{i}]")
        pod.kai = replace(kai, placed=placed)
        for g in placed:
            windows.setdefault((node.name, g), []).append((pod.start, _end(pod)))
    reservations: list[PodSpec] = []
    periods: dict[tuple[str, int], list[tuple[float, float, str]]] = {}  # (node, gpu) -> (start, end, group)
    for (node_name, g), spans in sorted(windows.items()):
        gpu_uuid = node_layout(by_name[node_name]).gpus[g].uuid
        for start, end in _periods(spans):
            group = str(uuidlib.uuid5(_NS, f"{node_name}/{g}/{start}"))
            periods.setdefault((node_name, g), []).append((start, end, group))
            name = f"gpu-reservation-{uuidlib.uuid5(_NS, f'name/{group}').hex[:16]}"
            reservations.append(PodSpec(
                name, NAMESPACE, node_name, 1, start, None if end == float("inf") else end, [(0.0, 0.0)],
                container="resource-reservation", labels={"app": APP, GROUP_LABEL: group},
                annotations={"run.ai/reserve_for_gpu_index": gpu_uuid},  # the key says index; the value is the UUID
                kai=KaiSpec(devices=1, placed=(g,), reservation=True)))
    for i in order:
        pod, kai = pods[i], pods[i].kai
        assert kai is not None and pod.node is not None
        mine = [next(grp for s, e, grp in periods[(pod.node, g)] if s <= pod.start < e) for g in kai.placed]
        if len(mine) == 1:
            pod.labels[GROUP_LABEL] = mine[0]
        else:
            pod.labels.update({f"{GROUP_LABEL}/{grp}": grp for grp in mine})
        pod.annotations.update(sharer_annotations(pod, kai))
    return reservations


def sharer_annotations(pod: PodSpec, kai: KaiSpec) -> dict[str, str]:
    """What a fraction pod carries: its ask (``gpu-fraction`` or ``gpu-memory``, ``gpu-fraction-num-devices``),
    then what the binder adds (``received-resource-type``, ``runai/shared-gpu-configmap``)."""
    out = {"gpu-fraction": f"{kai.fraction:g}"} if kai.fraction is not None else {"gpu-memory": str(kai.memory_mib)}
    if kai.devices > 1:
        out["gpu-fraction-num-devices"] = str(kai.devices)
    out["received-resource-type"] = "Fraction"
    out["runai/shared-gpu-configmap"] = f"{pod.name}-{stable_uid(f'kai/{pod.namespace}/{pod.name}')[:5]}-shared-gpu"
    return out


def configmap(pod: PodSpec, *, model: str, gpu_uuids: list[str], created: float) -> dict[str, Any]:
    """The ConfigMap the binder fills for the fraction's container (index 0): the GPUs and ``GPU_PORTION``."""
    assert pod.kai is not None
    name = f"{pod.annotations['runai/shared-gpu-configmap']}-0"
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": pod.namespace, "uid": stable_uid(f"cm/{pod.namespace}/{name}"),
                         "creationTimestamp": iso(created),
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                                              "uid": stable_uid(f"pod/{pod.namespace}/{pod.name}")}]},
            "data": {"NVIDIA_VISIBLE_DEVICES": ",".join(gpu_uuids),
                     "GPU_PORTION": f"{portion(pod.kai, model):.2f}"}}


def placed_configmap(pod: PodSpec, layouts: dict[str, NodeLayout], *, created: float) -> dict[str, Any] | None:
    """``configmap`` for a placed KAI fraction, on its node's GPUs; None for any other pod."""
    if pod.kai is None or pod.kai.reservation or pod.node is None:
        return None
    layout = layouts[pod.node]
    return configmap(pod, model=layout.spec.model, gpu_uuids=[layout.gpus[g].uuid for g in pod.kai.placed],
                     created=created)
