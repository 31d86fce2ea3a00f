"""A scenario pod's per-device ``utilization`` and ``framebuffer`` fields (docs/scenario.md), validated."""

from __future__ import annotations

from typing import Any

from exporter.model.devices import gpu_slices, mig_profile_from_resource, profile_slices
from exporter.sim.hardware import framebuffer_mib
from exporter.sim.scenario_ctx import Ctx
from exporter.sim.sizes import parse_bytes
from exporter.sim.spec import NodeSpec

MIB = 1048576


def pod_utilization(ctx: Ctx, p: dict[str, Any], *, where: str,
                    nodes: list[NodeSpec]) -> tuple[list[tuple[float, float]], tuple[float, ...] | None]:
    """Steps ``[(at, value)]``, or ``{per_device: [...]}``: one constant value per device the pod holds."""
    raw = p.get("utilization", 0.0)
    if isinstance(raw, dict):
        ctx.known_keys(raw, {"per_device"}, where=f"{where}.utilization")
        at = f"{where}.utilization.per_device"
        values = tuple(ctx.number(v, f"{at}[{j}]", lo=0, hi=1)
                       for j, v in enumerate(ctx.seq(raw.get("per_device"), at)))
        gpus = ctx.integer(p.get("gpus", 1), f"{where}.gpus", lo=1)
        if len(values) != gpus:
            raise ctx.fail(at, f"gives {len(values)} for {gpus} GPUs (one value per device the pod holds)")
        if p.get("claims"):
            raise ctx.fail(at, "not for pods holding devices through claims")
        node = next((x for x in nodes if x.name == p.get("node")), None)
        if node is not None and node.time_slicing and mig_profile_from_resource(str(p.get("resource", ""))) is None:
            raise ctx.fail(at, f"node {node.name} shares its GPUs ({node.sharing}): a GPU reads its holders' sum, "
                           "not one value per replica")
        return [], values
    if isinstance(raw, list):
        steps = []
        for j, step in enumerate(raw):
            step = ctx.mapping(step, f"{where}.utilization[{j}]")
            steps.append((ctx.duration(step.get("at", 0), f"{where}.utilization[{j}].at"),
                          ctx.number(step.get("value"), f"{where}.utilization[{j}].value", lo=0, hi=1)))
        return sorted(steps), None
    return [(0.0, ctx.number(raw, f"{where}.utilization", lo=0, hi=1))], None


def _device_memory_mib(p: dict[str, Any], nodes: list[NodeSpec]) -> tuple[float, str] | None:
    """Framebuffer of one device the pod holds (MiB) and what that device is; None for a pending pod."""
    node = next((x for x in nodes if x.name == p.get("node")), None)
    if node is None:
        return None
    resource = str(p.get("resource", "nvidia.com/gpu"))
    total = float(framebuffer_mib(node.model))
    profile = mig_profile_from_resource(resource)
    if profile is not None and not p.get("claims"):
        try:
            return total * profile_slices(profile) / gpu_slices(node.model), f"one {resource} on node {node.name}"
        except ValueError:
            return None  # an unparseable profile is reported by placement
    hami = p.get("hami")
    if isinstance(hami, dict) and isinstance(hami.get("memory_mib"), int):
        return float(hami["memory_mib"]), "its HAMi memory_mib"
    return total, f"one {node.model} on node {node.name}"


def pod_framebuffer(ctx: Ctx, p: dict[str, Any], *, where: str, nodes: list[NodeSpec]) -> list[tuple[float, int]]:
    """``framebuffer``: bytes in use on each device the pod holds, a size or ``[{at, value}]`` steps."""
    raw = p.get("framebuffer")
    if raw is None:
        return []
    at = f"{where}.framebuffer"
    if not isinstance(raw, list):
        return [(0.0, _size(ctx, raw, where=at, memory=_device_memory_mib(p, nodes)))]
    if not raw:
        raise ctx.fail(at, "give a size or at least one {at, value} step")
    steps = []
    for j, step in enumerate(raw):
        step = ctx.mapping(step, f"{at}[{j}]")
        ctx.known_keys(step, {"at", "value"}, where=f"{at}[{j}]")
        steps.append((ctx.duration(step.get("at", 0), f"{at}[{j}].at"),
                      _size(ctx, step.get("value"), where=f"{at}[{j}].value", memory=_device_memory_mib(p, nodes))))
    return sorted(steps)


def _size(ctx: Ctx, value: object, *, where: str, memory: tuple[float, str] | None) -> int:
    """A framebuffer size, no larger than the device it is on."""
    try:
        size = parse_bytes(value)
    except ValueError as exc:
        raise ctx.fail(where, str(exc)) from None
    if memory is not None and size > memory[0] * MIB:
        raise ctx.fail(where, f"{value} is more than the {memory[0]:.0f} MiB of {memory[1]}")
    return size
