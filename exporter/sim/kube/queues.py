"""Scheduler queue objects as each scheduler's API serves them, and the marks a queued pod carries.

Kueue ``kueue.x-k8s.io/v1beta2`` (ClusterQueue, LocalQueue, Workload), Volcano ``scheduling.volcano.sh/v1beta1``
(Queue, PodGroup), KAI ``scheduling.run.ai`` (Queue ``v2``, PodGroup ``v2alpha2``). Pure functions, as in
``objects``: the cluster decides when they change."""

from __future__ import annotations

from typing import Any

from exporter.sim.kube.objects import KindObject, iso, stable_uid
from exporter.sim.spec import PodSpec, QueueSpec

KUEUE = "kueue.x-k8s.io/v1beta2"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_GROUP_ANNOTATION = "pod-group-name"


def queue_objects(q: QueueSpec, *, used: int, created: float, held: frozenset[str] = frozenset()
                  ) -> list[KindObject]:
    """A Volcano or KAI Queue, or a Kueue ClusterQueue plus its LocalQueues; ``held`` names the queues
    (Kueue: ``<namespace>/<name>`` for a LocalQueue) whose scheduler admits nothing new now."""
    meta = {"name": q.name, "uid": stable_uid(f"queue/{q.kind}/{q.name}"), "creationTimestamp": iso(created)}
    if q.kind == "volcano":
        return [KindObject("queues", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta,
            "spec": {"capability": {"nvidia.com/gpu": str(q.gpus)}, "weight": 1, "reclaimable": True},
            "status": {"state": "Closed" if q.name in held else "Open", "allocated": {"nvidia.com/gpu": str(used)}}})]
    if q.kind == "kai":
        return [KindObject("kaiqueues", {
            "apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": meta,
            "spec": {"resources": {"gpu": {"quota": q.gpus, "overQuotaWeight": 1, "limit": -1}}},
            "status": {"allocated": {"nvidia.com/gpu": str(used)}}})]
    out = [KindObject("clusterqueues", {
        "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": meta,
        "spec": {"namespaceSelector": {}, "stopPolicy": "Hold" if q.name in held else "None", "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "default-flavor",
                         "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(q.gpus)}]}]}]},
        "status": {"flavorsUsage": [{"name": "default-flavor",
                                     "resources": [{"name": "nvidia.com/gpu", "total": str(used)}]}]}})]
    out.extend(KindObject("localqueues", local_queue(ns, name, cluster_queue=q.name, created=created,
                                                     stop="Hold" if f"{ns}/{name}" in held else "None"))
               for ns, name in q.local_queues)
    return out


def local_queue(ns: str, name: str, *, cluster_queue: str, created: float, stop: str) -> dict[str, Any]:
    """A Kueue LocalQueue; a stopped one reports condition ``Active=False``, reason ``Stopped``, as Kueue does."""
    active = {"type": "Active", "status": "True", "reason": "Ready", "message": "Can submit new workloads to "
              "localQueue"} if stop == "None" else {"type": "Active", "status": "False", "reason": "Stopped",
                                                    "message": "LocalQueue is stopped"}
    return {"apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": ns, "uid": stable_uid(f"localqueue/{ns}/{name}"),
                         "creationTimestamp": iso(created)},
            "spec": {"clusterQueue": cluster_queue, "stopPolicy": stop},
            "status": {"conditions": [{**active, "lastTransitionTime": iso(created)}]}}


def pod_queue_marks(pod: PodSpec) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations a queued pod carries, as its scheduler's integration sets them."""
    q = pod.queue
    if q is None:
        return {}, {}
    if q.kind == "kueue":
        return {KUEUE_QUEUE_LABEL: q.name}, {}
    if q.kind == "volcano":
        return {}, {VOLCANO_GROUP_ANNOTATION: group_name(pod)}
    return {KAI_QUEUE_LABEL: q.name}, {KAI_GROUP_ANNOTATION: group_name(pod)}


def group_name(pod: PodSpec) -> str:
    """The PodGroup (or Workload) of a pod: its owner's, else its own (``pod-<name>-<5 hex>``)."""
    if pod.owner is not None:
        return f"{pod.owner.kind.lower()}-{pod.owner.name}"
    return f"pod-{pod.name}-{stable_uid(f'pod/{pod.namespace}/{pod.name}')[:5]}"


def group_objects(pod: PodSpec, *, admitted: bool, created: float, evicted: str | None = None,
                  at: float | None = None) -> list[KindObject]:
    """The Workload (Kueue) or PodGroup (Volcano, KAI) a queued pod belongs to; a Workload says its ClusterQueue
    once ``admitted``; an ``evicted`` one (Kueue's reason, at ``at``) has lost its admission and is requeued once its
    queue runs again."""
    q = pod.queue
    if q is None:
        return []
    name = group_name(pod)
    owner = ({"apiVersion": "batch/v1", "kind": pod.owner.kind, "name": pod.owner.name,
              "uid": stable_uid(f"{pod.owner.kind}/{pod.owner.name}"), "controller": True}
             if pod.owner is not None else
             {"apiVersion": "v1", "kind": "Pod", "name": pod.name,
              "uid": stable_uid(f"pod/{pod.namespace}/{pod.name}"), "controller": True})
    meta = {"name": name, "namespace": pod.namespace, "uid": stable_uid(f"group/{q.kind}/{pod.namespace}/{name}"),
            "creationTimestamp": iso(created), "ownerReferences": [owner]}
    if q.kind == "kueue":
        status: dict[str, Any] = {"admission": {"clusterQueue": q.cluster_queue, "podSetAssignments": [
            {"name": "main", "flavors": {"nvidia.com/gpu": "default-flavor"}, "count": 1,
             "resourceUsage": {"nvidia.com/gpu": str(pod.gpus)}}]}} if admitted else {}
        if evicted is not None:
            stopped = "LocalQueue" if evicted == "LocalQueueStopped" else "ClusterQueue"
            when = iso(at if at is not None else created)
            status["conditions"] = [
                {"type": "Evicted", "status": "True", "reason": evicted, "message": f"The {stopped} is stopped",
                 "lastTransitionTime": when},
                {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                 "message": f"The workload has no reservation: the {stopped} is stopped", "lastTransitionTime": when},
                {"type": "Requeued", "status": "False", "reason": evicted, "message": f"The {stopped} is stopped",
                 "lastTransitionTime": when}]
        return [KindObject("workloads", {"apiVersion": KUEUE, "kind": "Workload", "metadata": meta,
                                         "spec": {"queueName": q.name, "podSets": [{"name": "main", "count": 1}]},
                                         "status": status})]
    phase = "Running" if admitted else "Pending"
    if q.kind == "volcano":
        return [KindObject("podgroups", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                         "metadata": meta, "spec": {"queue": q.name, "minMember": 1},
                                         "status": {"phase": phase}})]
    return [KindObject("kaipodgroups", {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                                        "metadata": meta, "spec": {"queue": q.name, "minMember": 1},
                                        "status": {"phase": phase}})]
