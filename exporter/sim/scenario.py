"""Scenario files (see docs/scenario.md): load, validate, and resolve to a static cluster layout.

Every error is one line naming the file and the field, e.g.
``demo.yaml: pods[3].gpus: node gpu-h100-0 has only 2 free nvidia.com/gpu at 10m``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from exporter.model.devices import gpu_slices, profile_slices
from exporter.model.pricing.document import PricingError
from exporter.sim.dra_allocate import allocate_claims
from exporter.sim.kai import NAMESPACE as KAI_NAMESPACE
from exporter.sim.kai import expand as kai_expand
from exporter.sim.kai import node_scheduler, pod_kai
from exporter.sim.kube.reviews import parse_users
from exporter.sim.layout import node_layout, place_pods
from exporter.sim.power import node_power
from exporter.sim.scenario_claims import PodClaim, extended_claim, pod_claims, resource_claims
from exporter.sim.scenario_ctx import Ctx
from exporter.sim.scenario_pod_fields import pod_framebuffer, pod_utilization
from exporter.sim.scenario_pricing import REPLACED_KEYS, pricing_block
from exporter.sim.scenario_queues import (
    EVENT_EXTRAS,
    event_extras,
    parse_queues,
    pod_queue_fields,
    resolve_pod_queues,
    scenario_budgets,
)
from exporter.sim.spec import (
    EVENT_TYPES,
    SHARING_MODES,
    ClaimSpec,
    EventSpec,
    HamiSpec,
    NamespaceSpec,
    NodeSpec,
    Owner,
    PodSpec,
    QueueSpec,
    Scenario,
    ScenarioError,
)
from exporter.sim.vendors.fields import KEYS as VENDOR_KEYS
from exporter.sim.vendors.fields import default_resource, vendor_fields

__all__ = ["EVENT_TYPES", "ClaimSpec", "EventSpec", "HamiSpec", "NamespaceSpec", "NodeSpec", "Owner", "PodSpec",
           "QueueSpec", "Scenario", "ScenarioError", "load_scenario", "parse_scenario"]

def _node_sharing(ctx: Ctx, n: dict[str, Any], *, where: str, time_slicing: int | None) -> tuple[str, int | None]:
    """``sharing`` and its replica count: ``time_slicing: r`` alone means time-slicing with r replicas,
    ``mps: r`` MPS with r replicas, ``hami: true`` the HAMi device plugin."""
    implied = "time-slicing" if time_slicing else "none"
    if n.get("mps") is not None:
        if time_slicing is not None or n.get("replicas") is not None:
            raise ctx.fail(f"{where}.mps", "give mps or time_slicing/replicas, not both")
        time_slicing, implied = ctx.integer(n["mps"], f"{where}.mps", lo=2), "mps"
    hami = n.get("hami", False)
    if not isinstance(hami, bool):
        raise ctx.fail(f"{where}.hami", f"expected true or false, got {hami!r}")
    if hami:
        if implied != "none":
            raise ctx.fail(f"{where}.hami", f"HAMi is its own device plugin: drop {implied} replicas")
        implied = "hami"
    if n.get("sharing") is not None and implied in ("mps", "hami") and n["sharing"] != implied:
        raise ctx.fail(f"{where}.sharing", f"{n['sharing']!r} contradicts the node's {implied} fields")
    sharing = ctx.string(n.get("sharing", implied), f"{where}.sharing")
    if sharing not in SHARING_MODES:
        raise ctx.fail(f"{where}.sharing", f"expected one of {', '.join(SHARING_MODES)}, got {sharing!r}")
    if n.get("replicas") is not None:
        if time_slicing is not None:
            raise ctx.fail(f"{where}.replicas", "give replicas or time_slicing, not both")
        time_slicing = ctx.integer(n["replicas"], f"{where}.replicas", lo=2)
    if sharing in ("time-slicing", "mps") and time_slicing is None:
        raise ctx.fail(f"{where}.replicas", f"required for sharing: {sharing}")
    if sharing in ("none", "hami") and time_slicing is not None:
        raise ctx.fail(f"{where}.replicas", f"replicas need sharing: time-slicing or mps, not {sharing}")
    return sharing, time_slicing


def _pod_hami(ctx: Ctx, p: dict[str, Any], *, where: str, nodes: list[NodeSpec]) -> HamiSpec | None:
    """A HAMi vGPU request, only on a ``sharing: hami`` node and only of ``nvidia.com/gpu``."""
    if p.get("hami") is None:
        return None
    h = ctx.mapping(p["hami"], f"{where}.hami")
    ctx.known_keys(h, {"memory_mib", "cores"}, where=f"{where}.hami")
    node = next((x for x in nodes if x.name == p.get("node")), None)
    if node is None or node.sharing != "hami":
        raise ctx.fail(f"{where}.hami", "only for pods on a node with sharing: hami")
    if p.get("resource", "nvidia.com/gpu") != "nvidia.com/gpu":
        raise ctx.fail(f"{where}.resource", "HAMi shares nvidia.com/gpu only")
    cores = ctx.integer(h.get("cores", 0), f"{where}.hami.cores")
    if cores > 100:
        raise ctx.fail(f"{where}.hami.cores", f"{cores} is over 100 (percent of the GPU's SMs)")
    return HamiSpec(ctx.integer(h.get("memory_mib"), f"{where}.hami.memory_mib", lo=1), cores)


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file."""
    source = path.name
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_scenario(text, source)


def _pricing(ctx: Ctx, raw: dict[str, Any]) -> dict[str, Any] | None:
    """The ``pricing:`` block, validated; it replaces ``prices``, ``default_price`` and ``pools``."""
    if raw.get("pricing") is None:
        return None
    for key in REPLACED_KEYS:
        if key in raw:
            raise ctx.fail(key, "not allowed beside pricing (put it in the pricing document)")
    try:
        block, priced = pricing_block(raw["pricing"], ctx.source)
    except PricingError as exc:
        raise ScenarioError(str(exc)) from None
    if "currency" in raw and raw["currency"] != priced.currency:
        raise ctx.fail("currency", f"{raw['currency']!r} differs from pricing.currency {priced.currency!r}")
    raw.setdefault("currency", priced.currency)
    return block


def parse_scenario(text: str, source: str) -> Scenario:
    """Parse and validate a scenario file's text; ``source`` names it in every ScenarioError."""
    ctx = Ctx(source)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {str(exc).splitlines()[0]}") from None
    raw = ctx.mapping(raw, "(document)")
    ctx.known_keys(raw, {"tick", "duration", "currency", "prices", "default_price", "pools", "pool_label",
                         "nodes", "namespaces", "pods", "events", "queues", "pricing",
                         "resource_claims", "users", "budgets"}, where="")
    pricing = _pricing(ctx, raw)
    tick = ctx.duration(raw.get("tick", "15s"), "tick")
    if tick <= 0:
        raise ctx.fail("tick", "must be > 0")
    duration = ctx.duration(raw.get("duration", "2h"), "duration")
    if duration <= 0:
        raise ctx.fail("duration", "must be > 0")
    currency = ctx.string(raw.get("currency", "USD"), "currency")
    prices = {str(k): ctx.number(v, f"prices.{k}", lo=0) for k, v in ctx.mapping(raw.get("prices"), "prices").items()}
    default_price = None
    if raw.get("default_price") is not None:
        default_price = ctx.number(raw["default_price"], "default_price", lo=0)
        if default_price <= 0:
            raise ctx.fail("default_price", "must be > 0 (a GPU is never free)")
    pools = {str(k): ctx.number(v, f"pools.{k}", lo=0) for k, v in ctx.mapping(raw.get("pools"), "pools").items()}
    pool_label = ctx.string(raw.get("pool_label", "gpu.platform/pool"), "pool_label")

    nodes: list[NodeSpec] = []
    for i, n in enumerate(ctx.seq(raw.get("nodes"), "nodes")):
        where = f"nodes[{i}]"
        n = ctx.mapping(n, where)
        ctx.known_keys(n, {"name", "model", "gpus", "labels", "mig", "time_slicing", "time_slicing_rename",
                           "dcgm_pod_labels", "kubelet_lists_terminated", "sharing", "replicas", "hami_split",
                           "dra", "dcgm_energy", "mps", "hami", "power", "scheduler", "dra_extended",
                           *VENDOR_KEYS}, where=where)
        name = ctx.string(n.get("name"), f"{where}.name")
        if any(x.name == name for x in nodes):
            raise ctx.fail(f"{where}.name", f"duplicate node {name!r}")
        model = ctx.string(n.get("model"), f"{where}.model")
        gpus = ctx.integer(n.get("gpus"), f"{where}.gpus", lo=1)
        mig: dict[int, list[str]] = {}
        for idx, profiles in ctx.mapping(n.get("mig"), f"{where}.mig").items():
            try:
                gi = int(idx)
            except (TypeError, ValueError):
                raise ctx.fail(f"{where}.mig.{idx}", "GPU index must be an integer") from None
            if not 0 <= gi < gpus:
                raise ctx.fail(f"{where}.mig.{idx}", f"GPU index out of range (node has {gpus} GPUs)")
            plist = [str(p) for p in ctx.seq(profiles, f"{where}.mig.{idx}")]
            try:
                used = sum(profile_slices(p) for p in plist)
            except ValueError as exc:
                raise ctx.fail(f"{where}.mig.{idx}", str(exc)) from None
            if used > gpu_slices(model):
                raise ctx.fail(f"{where}.mig.{idx}", f"profiles need {used} slices, a {model} has "
                               f"{gpu_slices(model)}")
            mig[gi] = plist
        ts = n.get("time_slicing")
        time_slicing = ctx.integer(ts, f"{where}.time_slicing", lo=2) if ts is not None else None
        sharing, time_slicing = _node_sharing(ctx, n, where=where, time_slicing=time_slicing)
        if sharing in ("mps", "hami") and mig:
            raise ctx.fail(f"{where}.sharing", f"{sharing} is not offered on MIG GPUs; drop mig or sharing")
        if model not in prices and default_price is None and pricing is None:
            raise ctx.fail(f"{where}.model", f"{model!r} has no price and default_price is not set")
        nodes.append(NodeSpec(
            name, model, gpus, {str(k): str(v) for k, v in ctx.mapping(n.get("labels"), f"{where}.labels").items()},
            mig, time_slicing, bool(n.get("time_slicing_rename", False)), bool(n.get("dcgm_pod_labels", True)),
            bool(n.get("kubelet_lists_terminated", False)), sharing,
            ctx.integer(n.get("hami_split", 10), f"{where}.hami_split", lo=1), bool(n.get("dra", False))))
        nodes[-1].dcgm_energy = bool(n.get("dcgm_energy", True))
        if n.get("power") is not None:
            nodes[-1].power = node_power(ctx, n["power"], where=f"{where}.power")
        vendor_fields(ctx, n, node=nodes[-1], where=where)
        node_scheduler(ctx, n, node=nodes[-1], where=where)
        if nodes[-1].dra and sharing != "none":
            raise ctx.fail(f"{where}.dra", f"a DRA node has no device plugin to do {sharing}")

    namespaces: list[NamespaceSpec] = []
    for i, ns in enumerate(ctx.seq(raw.get("namespaces"), "namespaces")):
        where = f"namespaces[{i}]"
        ns = ctx.mapping(ns, where)
        ctx.known_keys(ns, {"name", "labels", "gpu_quota", "monthly_budget"}, where=where)
        q, budget = ns.get("gpu_quota"), ns.get("monthly_budget")
        if budget is not None and ctx.number(budget, f"{where}.monthly_budget") <= 0:
            raise ctx.fail(f"{where}.monthly_budget", f"expected an amount > 0, got {budget!r}")
        namespaces.append(NamespaceSpec(
            ctx.string(ns.get("name"), f"{where}.name"),
            {str(k): str(v) for k, v in ctx.mapping(ns.get("labels"), f"{where}.labels").items()},
            ctx.integer(q, f"{where}.gpu_quota") if q is not None else None,
            None if budget is None else float(budget)))
    ns_names = {ns.name for ns in namespaces}

    shared = resource_claims(ctx, raw.get("resource_claims"))
    for claim_ns, _claim in shared:
        if claim_ns not in ns_names:
            ns_names.add(claim_ns)
            namespaces.append(NamespaceSpec(claim_ns))
    pods: list[PodSpec] = []
    requested: list[list[PodClaim]] = []
    queue_names: list[str | None] = []
    for i, p in enumerate(ctx.seq(raw.get("pods"), "pods")):
        where = f"pods[{i}]"
        p = ctx.mapping(p, where)
        ctx.known_keys(p, {"name", "namespace", "node", "pending_reason", "owner", "priority_class", "resource",
                           "gpus", "start", "end", "utilization", "container", "labels", "hami", "claims",
                           "framebuffer", "kai", "queue", "annotations"}, where=where)
        name = ctx.string(p.get("name"), f"{where}.name")
        namespace = ctx.string(p.get("namespace"), f"{where}.namespace")
        if namespace not in ns_names:
            ns_names.add(namespace)
            namespaces.append(NamespaceSpec(namespace))
        if any(x.name == name and x.namespace == namespace for x in pods):
            raise ctx.fail(f"{where}.name", f"duplicate pod {namespace}/{name}")
        node = p.get("node")
        if node is not None and not any(x.name == node for x in nodes):
            raise ctx.fail(f"{where}.node", f"unknown node {node!r}")
        start = ctx.duration(p.get("start", 0), f"{where}.start")
        end = ctx.duration(p["end"], f"{where}.end") if p.get("end") is not None else None
        if end is not None and end <= start:
            raise ctx.fail(f"{where}.end", "must be after start")
        steps, per_device = pod_utilization(ctx, p, where=where, nodes=nodes)
        owner = None
        if p.get("owner") is not None:
            o = ctx.mapping(p["owner"], f"{where}.owner")
            owner = Owner(ctx.string(o.get("kind"), f"{where}.owner.kind"),
                          ctx.string(o.get("name"), f"{where}.owner.name"))
        resource = ctx.string(p.get("resource", default_resource(p, nodes)), f"{where}.resource")
        pods.append(PodSpec(
            name, namespace, node, ctx.integer(p.get("gpus", 1), f"{where}.gpus", lo=1), start, end, steps,
            resource, p.get("pending_reason"), owner, p.get("priority_class"),
            str(p.get("container", "main")),
            {str(k): str(v) for k, v in ctx.mapping(p.get("labels"), f"{where}.labels").items()},
            _pod_hami(ctx, p, where=where, nodes=nodes), [], per_device,
            pod_framebuffer(ctx, p, where=where, nodes=nodes)))
        requested.append(pod_claims(ctx, p, where=where, nodes=nodes) or extended_claim(pods[-1], nodes))
        queue_name, pods[-1].annotations = pod_queue_fields(ctx, p, where=where)
        queue_names.append(queue_name)
        if (kai := pod_kai(ctx, p, where=where, nodes=nodes)) is not None:
            pods[-1].kai, pods[-1].gpus = kai, 0
    reservations = kai_expand(source, pods=pods, nodes=nodes)
    if reservations and KAI_NAMESPACE not in ns_names:
        namespaces.append(NamespaceSpec(KAI_NAMESPACE))
    pods.extend(reservations)
    requested.extend([] for _ in reservations)
    queue_names.extend(None for _ in reservations)

    events: list[EventSpec] = []
    node_names = {n.name for n in nodes}
    for i, e in enumerate(ctx.seq(raw.get("events"), "events")):
        where = f"events[{i}]"
        e = ctx.mapping(e, where)
        etype = ctx.string(e.get("type"), f"{where}.type")
        if etype not in EVENT_TYPES:
            raise ctx.fail(f"{where}.type", f"unknown event type {etype!r} (known: {', '.join(sorted(EVENT_TYPES))})")
        ctx.known_keys(e, {"type", "node", "namespace", "at", "from", "to", "requested", *EVENT_EXTRAS}, where=where)
        for req in EVENT_TYPES[etype]:
            if e.get(req) is None:
                raise ctx.fail(f"{where}.{req}", f"required for {etype}")
        ev = EventSpec(etype, e.get("node"), e.get("namespace"))
        if ev.node is not None and ev.node not in node_names:
            raise ctx.fail(f"{where}.node", f"unknown node {ev.node!r}")
        if etype == "per_pod_metrics_down" and not any(n.name == ev.node and n.per_pod_metrics for n in nodes):
            raise ctx.fail(f"{where}.node", f"{ev.node!r} serves no per-pod metrics (per_pod_metrics: dcgm or hami)")
        if e.get("at") is not None:
            ev.at = ctx.duration(e["at"], f"{where}.at")
        if e.get("from") is not None:
            ev.start = ctx.duration(e["from"], f"{where}.from")
            ev.end = ctx.duration(e["to"], f"{where}.to")
            if ev.end <= ev.start:
                raise ctx.fail(f"{where}.to", "must be after from")
        if e.get("requested") is not None:
            ev.requested = ctx.integer(e["requested"], f"{where}.requested", lo=1)
        event_extras(ctx, e, ev=ev, where=where)
        events.append(ev)

    queues = parse_queues(ctx, raw.get("queues"), ns_names=ns_names)
    resolve_pod_queues(ctx, pods, names=queue_names, queues=queues)
    budgets = scenario_budgets(ctx, raw.get("budgets"), events=events, queues=queues)

    scenario = Scenario(source, tick, duration, currency, prices, default_price, pools, pool_label, nodes,
                        namespaces, pods, events, queues, pricing, parse_users(ctx, raw.get("users")), budgets)
    allocate_claims(source, pods=pods, requested=requested, shared=shared,
                    nodes={n.name: node_layout(n) for n in nodes if n.dra})
    # Device placement is part of validation: a scenario that cannot be placed is an error now.
    place_pods(scenario)
    return scenario

