"""Scenario files (see docs/scenario.md): load, validate, and resolve to a static cluster layout.

Every error is one line naming the file and the field, e.g.
``demo.yaml: pods[3].gpus: node gpu-h100-0 has only 2 free nvidia.com/gpu at 10m``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from exporter.model.devices import gpu_slices, profile_slices
from exporter.model.durations import parse_duration
from exporter.model.pricing import PricingError
from exporter.sim.scenario_pricing import REPLACED_KEYS, pricing_block

EVENT_TYPES = {
    "dcgm_down": ("node", "from", "to"),
    "podresources_down": ("node", "from", "to"),
    "agent_restart": ("node", "at"),
    "agent_state_loss": ("node", "at"),
    "aggregator_restart": ("at",),
    "quota_rejection": ("namespace", "at"),
    "watch_expire": ("at",),
}


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is one line naming file and field."""


@dataclass(frozen=True, slots=True)
class Owner:
    kind: str
    name: str


@dataclass(slots=True)
class NodeSpec:
    name: str
    model: str
    gpus: int
    labels: dict[str, str] = field(default_factory=dict)
    mig: dict[int, list[str]] = field(default_factory=dict)
    time_slicing: int | None = None
    time_slicing_rename: bool = False
    dcgm_pod_labels: bool = True
    kubelet_lists_terminated: bool = False  # as kubelets before 1.34 did (KubeletPodResourcesListUseActivePods)


@dataclass(slots=True)
class NamespaceSpec:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    gpu_quota: int | None = None


@dataclass(slots=True)
class PodSpec:
    name: str
    namespace: str
    node: str | None
    gpus: int
    start: float
    end: float | None
    utilization: list[tuple[float, float]]
    resource: str = "nvidia.com/gpu"
    pending_reason: str | None = None
    owner: Owner | None = None
    priority_class: str | None = None
    container: str = "main"
    labels: dict[str, str] = field(default_factory=dict)

    def util_at(self, t: float) -> float:
        value = 0.0
        for at, v in self.utilization:
            if at <= t:
                value = v
            else:
                break
        return value

    def running_at(self, t: float) -> bool:
        return self.node is not None and self.start <= t and (self.end is None or t < self.end)


@dataclass(slots=True)
class QueueSpec:
    """A Volcano Queue or a Kueue ClusterQueue with a GPU capability, serving namespaces."""

    kind: str  # volcano | kueue
    name: str
    gpus: int
    namespaces: list[str] = field(default_factory=list)


@dataclass(slots=True)
class EventSpec:
    type: str
    node: str | None = None
    namespace: str | None = None
    at: float | None = None
    start: float | None = None
    end: float | None = None
    requested: int = 1


@dataclass(slots=True)
class Scenario:
    source: str
    tick: float
    duration: float
    currency: str
    prices: dict[str, float]
    default_price: float | None
    pools: dict[str, float]
    pool_label: str
    nodes: list[NodeSpec]
    namespaces: list[NamespaceSpec]
    pods: list[PodSpec]
    events: list[EventSpec]
    queues: list[QueueSpec] = field(default_factory=list)
    pricing: dict[str, Any] | None = None  # a whole pricing document (``pricing:``), else built from ``prices``

    def node(self, name: str) -> NodeSpec:
        return next(n for n in self.nodes if n.name == name)

    def pricing_document(self) -> dict[str, Any]:
        if self.pricing is not None:
            return dict(self.pricing)
        doc: dict[str, Any] = {"currency": self.currency, "models": dict(self.prices), "pools": dict(self.pools)}
        doc["default_price"] = self.default_price if self.default_price is not None else max(
            self.prices.values(), default=1.0)
        return doc


class _Ctx:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, msg: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: {where}: {msg}")

    def duration(self, value: object, where: str) -> float:
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise self.fail(where, str(exc)) from None

    def mapping(self, value: object, where: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        return value

    def seq(self, value: object, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {type(value).__name__}")
        return value

    def string(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, "expected a non-empty string")
        return value

    def number(self, value: object, where: str, lo: float | None = None, hi: float | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.fail(where, f"expected a number, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self.fail(where, f"{value} is out of range [{lo}, {hi}]")
        return float(value)

    def integer(self, value: object, where: str, lo: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise self.fail(where, f"expected an integer >= {lo}, got {value!r}")
        return value

    def known_keys(self, raw: dict[str, Any], allowed: set[str], where: str) -> None:
        for key in raw:
            if key not in allowed:
                raise self.fail(f"{where}.{key}" if where else str(key), "unknown field")


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file."""
    source = path.name
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_scenario(text, source)


def _pricing(ctx: _Ctx, raw: dict[str, Any]) -> dict[str, Any] | None:
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
    ctx = _Ctx(source)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {str(exc).splitlines()[0]}") from None
    raw = ctx.mapping(raw, "(document)")
    ctx.known_keys(raw, {"tick", "duration", "currency", "prices", "default_price", "pools", "pool_label",
                         "nodes", "namespaces", "pods", "events", "queues", "pricing"}, "")
    pricing = _pricing(ctx, raw)
    tick = ctx.duration(raw.get("tick", "15s"), "tick")
    if tick <= 0:
        raise ctx.fail("tick", "must be > 0")
    duration = ctx.duration(raw.get("duration", "2h"), "duration")
    if duration <= 0:
        raise ctx.fail("duration", "must be > 0")
    currency = ctx.string(raw.get("currency", "USD"), "currency")
    prices = {str(k): ctx.number(v, f"prices.{k}", 0) for k, v in ctx.mapping(raw.get("prices"), "prices").items()}
    default_price = None
    if raw.get("default_price") is not None:
        default_price = ctx.number(raw["default_price"], "default_price", 0)
        if default_price <= 0:
            raise ctx.fail("default_price", "must be > 0 (a GPU is never free)")
    pools = {str(k): ctx.number(v, f"pools.{k}", 0) for k, v in ctx.mapping(raw.get("pools"), "pools").items()}
    pool_label = ctx.string(raw.get("pool_label", "gpu.platform/pool"), "pool_label")

    nodes: list[NodeSpec] = []
    for i, n in enumerate(ctx.seq(raw.get("nodes"), "nodes")):
        where = f"nodes[{i}]"
        n = ctx.mapping(n, where)
        ctx.known_keys(n, {"name", "model", "gpus", "labels", "mig", "time_slicing", "time_slicing_rename",
                           "dcgm_pod_labels", "kubelet_lists_terminated"}, where)
        name = ctx.string(n.get("name"), f"{where}.name")
        if any(x.name == name for x in nodes):
            raise ctx.fail(f"{where}.name", f"duplicate node {name!r}")
        model = ctx.string(n.get("model"), f"{where}.model")
        gpus = ctx.integer(n.get("gpus"), f"{where}.gpus", 1)
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
        time_slicing = ctx.integer(ts, f"{where}.time_slicing", 2) if ts is not None else None
        if model not in prices and default_price is None and pricing is None:
            raise ctx.fail(f"{where}.model", f"{model!r} has no price and default_price is not set")
        nodes.append(NodeSpec(
            name, model, gpus, {str(k): str(v) for k, v in ctx.mapping(n.get("labels"), f"{where}.labels").items()},
            mig, time_slicing, bool(n.get("time_slicing_rename", False)), bool(n.get("dcgm_pod_labels", True)),
            bool(n.get("kubelet_lists_terminated", False))))

    namespaces: list[NamespaceSpec] = []
    for i, ns in enumerate(ctx.seq(raw.get("namespaces"), "namespaces")):
        where = f"namespaces[{i}]"
        ns = ctx.mapping(ns, where)
        ctx.known_keys(ns, {"name", "labels", "gpu_quota"}, where)
        q = ns.get("gpu_quota")
        namespaces.append(NamespaceSpec(
            ctx.string(ns.get("name"), f"{where}.name"),
            {str(k): str(v) for k, v in ctx.mapping(ns.get("labels"), f"{where}.labels").items()},
            ctx.integer(q, f"{where}.gpu_quota") if q is not None else None))
    ns_names = {ns.name for ns in namespaces}

    pods: list[PodSpec] = []
    for i, p in enumerate(ctx.seq(raw.get("pods"), "pods")):
        where = f"pods[{i}]"
        p = ctx.mapping(p, where)
        ctx.known_keys(p, {"name", "namespace", "node", "pending_reason", "owner", "priority_class", "resource",
                           "gpus", "start", "end", "utilization", "container", "labels"}, where)
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
        util_raw = p.get("utilization", 0.0)
        if isinstance(util_raw, list):
            steps = []
            for j, step in enumerate(util_raw):
                step = ctx.mapping(step, f"{where}.utilization[{j}]")
                steps.append((ctx.duration(step.get("at", 0), f"{where}.utilization[{j}].at"),
                              ctx.number(step.get("value"), f"{where}.utilization[{j}].value", 0, 1)))
            steps.sort()
        else:
            steps = [(0.0, ctx.number(util_raw, f"{where}.utilization", 0, 1))]
        owner = None
        if p.get("owner") is not None:
            o = ctx.mapping(p["owner"], f"{where}.owner")
            owner = Owner(ctx.string(o.get("kind"), f"{where}.owner.kind"),
                          ctx.string(o.get("name"), f"{where}.owner.name"))
        resource = ctx.string(p.get("resource", "nvidia.com/gpu"), f"{where}.resource")
        pods.append(PodSpec(
            name, namespace, node, ctx.integer(p.get("gpus", 1), f"{where}.gpus", 1), start, end, steps,
            resource, p.get("pending_reason"), owner, p.get("priority_class"),
            str(p.get("container", "main")),
            {str(k): str(v) for k, v in ctx.mapping(p.get("labels"), f"{where}.labels").items()}))

    events: list[EventSpec] = []
    node_names = {n.name for n in nodes}
    for i, e in enumerate(ctx.seq(raw.get("events"), "events")):
        where = f"events[{i}]"
        e = ctx.mapping(e, where)
        etype = ctx.string(e.get("type"), f"{where}.type")
        if etype not in EVENT_TYPES:
            raise ctx.fail(f"{where}.type", f"unknown event type {etype!r} (known: {', '.join(sorted(EVENT_TYPES))})")
        ctx.known_keys(e, {"type", "node", "namespace", "at", "from", "to", "requested"}, where)
        for req in EVENT_TYPES[etype]:
            if e.get(req) is None:
                raise ctx.fail(f"{where}.{req}", f"required for {etype}")
        ev = EventSpec(etype, e.get("node"), e.get("namespace"))
        if ev.node is not None and ev.node not in node_names:
            raise ctx.fail(f"{where}.node", f"unknown node {ev.node!r}")
        if e.get("at") is not None:
            ev.at = ctx.duration(e["at"], f"{where}.at")
        if e.get("from") is not None:
            ev.start = ctx.duration(e["from"], f"{where}.from")
            ev.end = ctx.duration(e["to"], f"{where}.to")
            if ev.end <= ev.start:
                raise ctx.fail(f"{where}.to", "must be after from")
        if e.get("requested") is not None:
            ev.requested = ctx.integer(e["requested"], f"{where}.requested", 1)
        events.append(ev)

    queues: list[QueueSpec] = []
    for i, q in enumerate(ctx.seq(raw.get("queues"), "queues")):
        where = f"queues[{i}]"
        q = ctx.mapping(q, where)
        ctx.known_keys(q, {"kind", "name", "gpus", "namespaces"}, where)
        kind = ctx.string(q.get("kind"), f"{where}.kind")
        if kind not in ("volcano", "kueue"):
            raise ctx.fail(f"{where}.kind", f"expected volcano or kueue, got {kind!r}")
        qns = [str(n) for n in ctx.seq(q.get("namespaces"), f"{where}.namespaces")]
        for n in qns:
            if n not in ns_names:
                raise ctx.fail(f"{where}.namespaces", f"unknown namespace {n!r}")
        queues.append(QueueSpec(kind, ctx.string(q.get("name"), f"{where}.name"),
                                ctx.integer(q.get("gpus"), f"{where}.gpus"), qns))

    scenario = Scenario(source, tick, duration, currency, prices, default_price, pools, pool_label, nodes,
                        namespaces, pods, events, queues, pricing)
    # Device placement is part of validation: a scenario that cannot be placed is an error now.
    from exporter.sim.layout import place_pods

    place_pods(scenario)
    return scenario

