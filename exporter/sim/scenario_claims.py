"""A scenario's DRA claims (docs/scenario.md): top-level ``resource_claims`` and pod ``claims``, validated.

A pod claim is one of three forms: a request (``device_class``, ``count``, ``profile``, ``admin_access``)
that is the pod's own claim, generated from a template; ``shared: <name>``, a ``resource_claims`` entry of
the pod's namespace; or a claim naming its published devices outright (``name``, ``devices``). Which
devices a request gets is decided later, by ``dra_allocate``, once every pod is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.model.devices import profile_slices
from exporter.sim.scenario_ctx import Ctx
from exporter.sim.spec import ClaimSpec, NodeSpec, PodSpec

GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
DEVICE_CLASSES = (GPU_CLASS, MIG_CLASS)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """What a claim asks for (one ExactCount request), not which devices: the allocator picks them."""

    device_class: str
    count: int = 1
    profile: str | None = None  # MIG profile, for mig.nvidia.com
    admin_access: bool = False
    extended: bool = False  # the scheduler's claim for an nvidia.com/gpu request served by DRA


@dataclass(frozen=True, slots=True)
class SharedClaim:
    """A ``resource_claims`` entry: one claim several pods name; ``where`` is its field for errors."""

    name: str
    namespace: str
    request: ClaimRequest
    where: str


@dataclass(frozen=True, slots=True)
class SharedRef:
    """A pod's ``{shared: <name>}``: the ``resource_claims`` entry of that name in the pod's namespace."""

    name: str


PodClaim = ClaimSpec | ClaimRequest | SharedRef


def extended_claim(pod: PodSpec, nodes: list[NodeSpec]) -> list[PodClaim]:
    """On a ``dra_extended`` node a pod's ``nvidia.com/gpu`` request is served by DRA: the scheduler's claim."""
    node = next((x for x in nodes if x.name == pod.node), None)
    if node is None or not node.dra_extended or pod.resource != "nvidia.com/gpu":
        return []
    return [ClaimRequest(GPU_CLASS, pod.gpus, extended=True)]


def claim_request(ctx: Ctx, c: dict[str, Any], *, where: str) -> ClaimRequest:
    """``device_class`` (required), ``count`` (default 1), ``profile`` (MIG only, required there),
    ``admin_access`` (default false)."""
    device_class = ctx.string(c.get("device_class"), f"{where}.device_class")
    if device_class not in DEVICE_CLASSES:
        raise ctx.fail(f"{where}.device_class", f"expected one of {', '.join(DEVICE_CLASSES)}, got {device_class!r}")
    profile = c.get("profile")
    if device_class == MIG_CLASS:
        profile = ctx.string(profile, f"{where}.profile")
        try:
            profile_slices(profile)
        except ValueError as exc:
            raise ctx.fail(f"{where}.profile", str(exc)) from None
    elif profile is not None:
        raise ctx.fail(f"{where}.profile", f"only for {MIG_CLASS} (a {GPU_CLASS} device is a whole GPU)")
    admin = c.get("admin_access", False)
    if not isinstance(admin, bool):
        raise ctx.fail(f"{where}.admin_access", f"expected true or false, got {admin!r}")
    return ClaimRequest(device_class, ctx.integer(c.get("count", 1), f"{where}.count", lo=1), profile, admin)


def resource_claims(ctx: Ctx, raw: object) -> dict[tuple[str, str], SharedClaim]:
    """The top-level ``resource_claims: [{name, namespace, device_class, count, profile, admin_access}]``."""
    out: dict[tuple[str, str], SharedClaim] = {}
    for k, c in enumerate(ctx.seq(raw, "resource_claims")):
        where = f"resource_claims[{k}]"
        c = ctx.mapping(c, where)
        ctx.known_keys(c, {"name", "namespace", "device_class", "count", "profile", "admin_access"}, where=where)
        key = (ctx.string(c.get("namespace"), f"{where}.namespace"), ctx.string(c.get("name"), f"{where}.name"))
        if key in out:
            raise ctx.fail(f"{where}.name", f"duplicate claim {key[0]}/{key[1]}")
        out[key] = SharedClaim(key[1], key[0], claim_request(ctx, c, where=where), where)
    return out


def _named_claim(ctx: Ctx, c: dict[str, Any], *, where: str) -> ClaimSpec:
    """The explicit form: ``{name, devices: [published names], admin_access, memory_mib}``."""
    ctx.known_keys(c, {"name", "devices", "admin_access", "memory_mib"}, where=where)
    devices = tuple(ctx.string(d, f"{where}.devices") for d in ctx.seq(c.get("devices"), f"{where}.devices"))
    if not devices:
        raise ctx.fail(f"{where}.devices", "name at least one published device (e.g. gpu-0)")
    mib = c.get("memory_mib")
    memory = None if mib is None else ctx.integer(mib, f"{where}.memory_mib", lo=1)
    return ClaimSpec(ctx.string(c.get("name"), f"{where}.name"), devices, bool(c.get("admin_access", False)), memory)


def pod_claims(ctx: Ctx, p: dict[str, Any], *, where: str, nodes: list[NodeSpec]) -> list[PodClaim]:
    """A pod's ``claims``, only on a ``dra: true`` node."""
    raw = ctx.seq(p.get("claims"), f"{where}.claims")
    if not raw:
        return []
    node = next((x for x in nodes if x.name == p.get("node")), None)
    if node is None or not node.dra:
        raise ctx.fail(f"{where}.claims", "only for pods on a node with dra: true")
    out: list[PodClaim] = []
    for j, c in enumerate(raw):
        at = f"{where}.claims[{j}]"
        c = ctx.mapping(c, at)
        if "shared" in c:
            ctx.known_keys(c, {"shared"}, where=at)
            out.append(SharedRef(ctx.string(c["shared"], f"{at}.shared")))
        elif "device_class" in c:
            ctx.known_keys(c, {"device_class", "count", "profile", "admin_access"}, where=at)
            out.append(claim_request(ctx, c, where=at))
        elif "devices" in c or "name" in c:
            out.append(_named_claim(ctx, c, where=at))
        else:
            raise ctx.fail(at, "give device_class (with count), shared: <resource_claims name>, or name and devices")
    return out
