"""The scenario's scheduler queues (``queues:``) and each pod's ``queue:``, validated against each other.

A pod's ``queue`` names a queue of the scenario; which scheduler it belongs to decides how the simulator labels
the pod: a Kueue LocalQueue of the pod's namespace first, then a Volcano queue, then a KAI queue."""

from __future__ import annotations

from typing import Any

from exporter.model.budget_windows import BudgetsFileError, parse_budgets
from exporter.sim.scenario_ctx import Ctx
from exporter.sim.spec import EventSpec, PodQueue, PodSpec, QueueSpec, ScenarioError

QUEUE_KINDS = ("kueue", "volcano", "kai")
EVENT_EXTRAS = ("budget", "queue", "money", "gpu_hours")


def parse_queues(ctx: Ctx, raw: object, *, ns_names: set[str]) -> list[QueueSpec]:
    """``queues:``: kind, name, GPUs, served namespaces and (Kueue) LocalQueues ``{namespace, name}``."""
    out: list[QueueSpec] = []
    for i, q in enumerate(ctx.seq(raw, "queues")):
        where = f"queues[{i}]"
        q = ctx.mapping(q, where)
        ctx.known_keys(q, {"kind", "name", "gpus", "namespaces", "local_queues"}, where=where)
        kind = ctx.string(q.get("kind"), f"{where}.kind")
        if kind not in QUEUE_KINDS:
            raise ctx.fail(f"{where}.kind", f"expected one of {', '.join(QUEUE_KINDS)}, got {kind!r}")
        name = ctx.string(q.get("name"), f"{where}.name")
        if any(x.name == name and x.kind == kind for x in out):
            raise ctx.fail(f"{where}.name", f"duplicate {kind} queue {name!r}")
        qns = [str(n) for n in ctx.seq(q.get("namespaces"), f"{where}.namespaces")]
        locals_: list[tuple[str, str]] = []
        for j, lq in enumerate(ctx.seq(q.get("local_queues"), f"{where}.local_queues")):
            lwhere = f"{where}.local_queues[{j}]"
            if kind != "kueue":
                raise ctx.fail(lwhere, "only a kueue ClusterQueue has LocalQueues")
            lq = ctx.mapping(lq, lwhere)
            ctx.known_keys(lq, {"namespace", "name"}, where=lwhere)
            locals_.append((ctx.string(lq.get("namespace"), f"{lwhere}.namespace"),
                            ctx.string(lq.get("name"), f"{lwhere}.name")))
        qns += [ns for ns, _n in locals_ if ns not in qns]
        for n in qns:
            if n not in ns_names:
                raise ctx.fail(f"{where}.namespaces", f"unknown namespace {n!r}")
        if kind == "kueue" and not locals_:
            locals_ = [(ns, f"{name}-lq") for ns in qns]
        out.append(QueueSpec(kind, name, ctx.integer(q.get("gpus"), f"{where}.gpus"), qns, locals_))
    return out


def pod_queue_fields(ctx: Ctx, p: dict[str, Any], *, where: str) -> tuple[str | None, dict[str, str]]:
    """A pod's ``queue`` (a name, resolved later by ``resolve_pod_queues``) and ``annotations``."""
    queue = None if p.get("queue") is None else ctx.string(p["queue"], f"{where}.queue")
    annotations = {str(k): str(v) for k, v in ctx.mapping(p.get("annotations"), f"{where}.annotations").items()}
    return queue, annotations


def resolve_pod_queues(ctx: Ctx, pods: list[PodSpec], *, names: list[str | None], queues: list[QueueSpec]) -> None:
    """Give each pod the queue its ``queue`` names: a Kueue LocalQueue of its namespace, else a Volcano, else a
    KAI queue of that name; a name no queue has is an error naming the pod's field."""
    for i, (pod, name) in enumerate(zip(pods, names, strict=True)):
        if name is None:
            continue
        found: PodQueue | None = None
        for q in queues:
            if q.kind == "kueue" and (pod.namespace, name) in q.local_queues:
                found = PodQueue("kueue", name, q.name)
                break
        for kind in ("volcano", "kai"):
            if found is None and any(q.kind == kind and q.name == name for q in queues):
                found = PodQueue(kind, name)
        if found is None:
            raise ctx.fail(f"pods[{i}].queue", f"no queue {name!r} (a kueue LocalQueue of namespace "
                                                f"{pod.namespace!r}, a volcano or a kai queue)")
        pod.queue = found


def event_extras(ctx: Ctx, e: dict[str, Any], *, ev: EventSpec, where: str) -> None:
    """``budget_change``'s budget and new amounts, ``queue_hold``'s queue."""
    if e.get("budget") is not None:
        ev.budget = ctx.string(e["budget"], f"{where}.budget")
    if e.get("queue") is not None:
        ev.queue = ctx.string(e["queue"], f"{where}.queue")
    for key in ("money", "gpu_hours"):
        if e.get(key) is not None:
            ev.amounts[key] = ctx.number(e[key], f"{where}.{key}", lo=0)
    if ev.type == "budget_change" and not ev.amounts:
        raise ctx.fail(where, "budget_change needs money and/or gpu_hours")


def scenario_budgets(ctx: Ctx, raw: object, *, events: list[EventSpec],
                     queues: list[QueueSpec]) -> list[dict[str, Any]]:
    """``budgets:`` validated as the aggregator's budgets file is (the simulator hands it over as that file); the
    budgets and queues events name must exist."""
    items = ctx.seq(raw, "budgets")
    try:
        budgets = parse_budgets({"budgets": items}, source=ctx.source)
    except BudgetsFileError as exc:
        raise ScenarioError(str(exc)) from None  # it names the file and the field already
    names = {b.name for b in budgets}
    held = {f"{ns}/{n}" for q in queues if q.kind == "kueue" for ns, n in q.local_queues}
    held |= {q.name for q in queues if q.kind in ("kueue", "volcano")}
    for i, ev in enumerate(events):
        if ev.type == "budget_change" and ev.budget not in names:
            raise ctx.fail(f"events[{i}].budget", f"no budget {ev.budget!r}")
        if ev.type == "queue_hold" and ev.queue not in held:
            raise ctx.fail(f"events[{i}].queue", f"no kueue LocalQueue (<namespace>/<name>), ClusterQueue or "
                                                 f"volcano queue {ev.queue!r}")
    return [dict(item) for item in items]
