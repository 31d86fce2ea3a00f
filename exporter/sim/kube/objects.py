"""Kubernetes objects as the API server would return them, rendered from the scenario's records.

Pure functions of their inputs (no store, no clock): the cluster decides *when* an object changes,
these decide *what it looks like*, so both can be read and tested on their own.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from exporter.sim.hardware import framebuffer_mib
from exporter.sim.layout import HamiShare, NodeLayout
from exporter.sim.spec import NamespaceSpec, PodSpec

GPU_QUOTA_KEY = "requests.nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class KindObject:
    """An object and the store kind (plural resource) it belongs to."""

    kind: str
    obj: dict[str, Any]


def iso(ts: float) -> str:
    """RFC 3339 UTC timestamp, seconds precision, as Kubernetes writes object times."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stable_uid(what: str) -> str:
    """UIDs are UUIDv5 of the object's identity, so reruns of a scenario produce the same ones."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, what))


def namespace_object(ns: NamespaceSpec, *, created: float) -> dict[str, Any]:
    """The Namespace object; a monthly budget is served as its ``gpu.platform/monthly-budget`` annotation."""
    meta: dict[str, Any] = {"name": ns.name, "uid": stable_uid(f"ns/{ns.name}"),
                            "labels": {"kubernetes.io/metadata.name": ns.name, **ns.labels},
                            "creationTimestamp": iso(created)}
    if ns.monthly_budget is not None:
        meta["annotations"] = {"gpu.platform/monthly-budget": repr(ns.monthly_budget)}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "status": {"phase": "Active"}}


def node_object(layout: NodeLayout, *, created: float) -> dict[str, Any]:
    """A GPU node with the labels GPU feature discovery and the device plugin put on it."""
    spec = layout.spec
    labels = {
        "kubernetes.io/hostname": spec.name, "kubernetes.io/os": "linux",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": spec.model.replace(" ", "-"),
        "nvidia.com/gpu.count": str(spec.gpus), "nvidia.com/gpu.memory": str(framebuffer_mib(spec.model)),
        **({"nvidia.com/mig.strategy": "mixed"} if spec.mig else {}),
        **_sharing_labels(layout),
        **spec.labels,
    }
    counts = {r: str(len(ids)) for r, ids in layout.resources.items()}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": spec.name, "uid": stable_uid(f"node/{spec.name}"),
                     "labels": labels, "creationTimestamp": iso(created)},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "96", "memory": "1056Gi", **counts},
                   "allocatable": {"cpu": "95", "memory": "1000Gi", **counts},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }


def _sharing_labels(layout: NodeLayout) -> dict[str, str]:
    """What GPU feature discovery and the device plugin label: replicas and strategy, -SHARED unless renamed."""
    spec = layout.spec
    if spec.sharing == "hami":
        return {"gpu": "on", "nvidia.com/gpu.sharing-strategy": "none"}  # HAMi schedules nodes labelled gpu=on
    if not spec.time_slicing:
        return {"nvidia.com/gpu.sharing-strategy": "none"}
    labels = {"nvidia.com/gpu.replicas": str(spec.time_slicing), "nvidia.com/gpu.sharing-strategy": spec.sharing}
    if not spec.time_slicing_rename:
        labels["nvidia.com/gpu.product"] = spec.model.replace(" ", "-") + "-SHARED"
    if spec.sharing == "mps":
        labels["nvidia.com/mps.capable"] = "true"
    return labels


def hami_annotation(shares: list[HamiShare]) -> str:
    """``hami.io/vgpu-devices-allocated`` for a one-container pod: ``<uuid>,NVIDIA,<MiB>,<cores>:`` then ``;``."""
    return "".join(f"{s.gpu_uuid},NVIDIA,{s.memory_mib},{s.cores}:" for s in shares) + ";"


def pending_message(pod: PodSpec, *, nodes: int) -> str:
    """The scheduler's FailedScheduling text for a pod no node can take."""
    reason = pod.pending_reason or f"Insufficient {pod.resource}"
    if reason.startswith("0/"):
        return reason
    n = nodes
    return f"0/{n} nodes are available: {n} {reason}. preemption: 0/{n} nodes are available: " \
           f"{n} No preemption victims found for incoming pod."


def _owner_refs(pod: PodSpec, labels: dict[str, str]) -> list[dict[str, Any]]:
    """A Deployment's pods are owned by its ReplicaSet (named with the pod-template-hash), as in a cluster."""
    if pod.owner is None:
        return []
    kind, name = pod.owner.kind, pod.owner.name
    if kind == "Deployment":
        tmpl = hashlib.sha1(name.encode()).hexdigest()[:10]
        labels["pod-template-hash"] = tmpl
        kind, name = "ReplicaSet", f"{name}-{tmpl}"
    labels.setdefault("app", pod.owner.name)
    return [{"apiVersion": "batch/v1" if kind in ("Job", "CronJob") else "apps/v1", "kind": kind,
             "name": name, "uid": stable_uid(f"{kind}/{name}"), "controller": True, "blockOwnerDeletion": True}]


def pod_object(pod: PodSpec, *, running: bool, wall_start: float, pending: str,
               hami: list[HamiShare] | None = None, finished: float | None = None) -> dict[str, Any]:
    """A pod as running (bound, with container status) or pending (unschedulable, with ``pending``);
    ``finished`` (scenario time) renders it Succeeded, its container terminated at that time.

    A HAMi pod also carries HAMi's resources and, once bound, the annotations HAMi's scheduler writes.
    """
    created = wall_start + pod.start
    labels = dict(pod.labels)
    owner_refs = _owner_refs(pod, labels)
    own_claims = [c for c in pod.claims if not c.extended]  # an extended-resource claim is the scheduler's
    kai_sharer = pod.kai is not None and not pod.kai.reservation  # a KAI fraction requests no GPU resource
    limits = {} if own_claims or kai_sharer else {pod.resource: str(pod.gpus)}
    if pod.hami is not None:
        limits["nvidia.com/gpumem"] = str(pod.hami.memory_mib)
        if pod.hami.cores:
            limits["nvidia.com/gpucores"] = str(pod.hami.cores)
    spec: dict[str, Any] = {
        "schedulerName": "hami-scheduler" if hami else "kai-scheduler" if kai_sharer else "default-scheduler",
        "containers": [{"name": pod.container, "image": "registry.local/workloads/sim:1",
                        "resources": {"requests": {**limits, "cpu": "4"}, "limits": limits}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if pod.priority_class:
        spec["priorityClassName"] = pod.priority_class
    if own_claims:  # DRA: the pod names its claims, the container uses them all
        spec["resourceClaims"] = [{"name": c.name, "resourceClaimName": c.name} if c.pod_claim is None else
                                  {"name": c.pod_claim, "resourceClaimTemplateName": f"{c.pod_claim}-template"}
                                  for c in own_claims]
        spec["containers"][0]["resources"]["claims"] = [{"name": c.pod_claim or c.name} for c in own_claims]
    status: dict[str, Any]
    if running:
        spec["nodeName"] = pod.node
        state: dict[str, Any] = {"running": {"startedAt": iso(created)}}
        if finished is not None:
            state = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": iso(created),
                                    "finishedAt": iso(wall_start + finished)}}
        status = {"phase": "Running" if finished is None else "Succeeded", "startTime": iso(created),
                  "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                  "podIP": f"10.244.{zlib.crc32(str(pod.node).encode()) % 250}."
                           f"{zlib.crc32(pod.name.encode()) % 250 + 2}",
                  "containerStatuses": [{"name": pod.container, "ready": finished is None, "restartCount": 0,
                                         "image": "registry.local/workloads/sim:1",
                                         "imageID": "registry.local/workloads/sim@sha256:" + "0" * 64,
                                         "state": state}]}
    else:
        status = {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": pending, "lastTransitionTime": iso(created)}]}
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace,
                            "uid": stable_uid(f"pod/{pod.namespace}/{pod.name}"),
                            "labels": labels, "creationTimestamp": iso(created)}
    if owner_refs:
        meta["ownerReferences"] = owner_refs
    if own_claims and running:
        status["resourceClaimStatuses"] = [{"name": c.pod_claim or c.name, "resourceClaimName": c.name}
                                           for c in own_claims]
    for c in pod.claims:
        if c.extended and running:  # the scheduler's claim for the container's nvidia.com/gpu (KEP-5004)
            status["extendedResourceClaimStatus"] = {"resourceClaimName": c.name, "requestMappings": [
                {"containerName": pod.container, "resourceName": pod.resource, "requestName": c.request_name}]}
    if pod.annotations:
        meta["annotations"] = dict(pod.annotations)
    if hami and running:
        meta["annotations"] = {**meta.get("annotations", {}), "hami.io/vgpu-devices-allocated": hami_annotation(hami),
                               "hami.io/vgpu-devices-to-allocate": ";",  # the plugin empties it on Allocate
                               "hami.io/vgpu-node": str(pod.node), "hami.io/bind-phase": "success"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def quota_object(ns: str, *, hard: int, used: int, created: float) -> dict[str, Any]:
    """The namespace's ``gpu-quota`` ResourceQuota: ``hard`` GPUs allowed, ``used`` now."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpu-quota", "namespace": ns, "uid": stable_uid(f"quota/{ns}"),
                         "creationTimestamp": iso(created)},
            "spec": {"hard": {GPU_QUOTA_KEY: str(hard)}},
            "status": {"hard": {GPU_QUOTA_KEY: str(hard)}, "used": {GPU_QUOTA_KEY: str(used)}}}


@dataclass(frozen=True, slots=True)
class EventInfo:
    """What a Warning event says, about which object, from which component."""

    namespace: str
    kind: str
    name: str
    reason: str
    message: str
    source: str
    uid: str | None = None  # the involved object's; kubectl describe selects events by it


def quota_rejection(ns: str, *, seq: int, requested: int, used: int, hard: int) -> EventInfo:
    """A ReplicaSet's ``FailedCreate`` Event for a pod creation the namespace's GPU quota refused."""
    key = GPU_QUOTA_KEY
    msg = (f'Error creating: pods "rejected-{seq}" is forbidden: exceeded quota: gpu-quota, '
           f"requested: {key}={requested}, used: {key}={used}, limited: {key}={hard}")
    return EventInfo(ns, "ReplicaSet", f"burst-{seq}", "FailedCreate", msg, "replicaset-controller")


def event_object(ev: EventInfo, *, seq: int, at: float) -> dict[str, Any]:
    """A Warning Event about ``ev``'s object; ``seq`` keeps names of repeated events apart."""
    ts = iso(at)
    ev_name = f"{ev.name}.{seq:016x}"
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": ev_name, "namespace": ev.namespace,
                         "uid": stable_uid(f"event/{ev.namespace}/{ev_name}"), "creationTimestamp": ts},
            "involvedObject": {"kind": ev.kind, "namespace": ev.namespace, "name": ev.name,
                               **({"uid": ev.uid} if ev.uid else {})},
            "reason": ev.reason, "message": ev.message, "type": "Warning", "count": 1,
            "firstTimestamp": ts, "lastTimestamp": ts, "source": {"component": ev.source}}
