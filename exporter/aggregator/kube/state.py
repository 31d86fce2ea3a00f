"""What the aggregator knows from the Kubernetes API, reduced to what accounting needs.

Pods (GPU holders, pending GPU pods, agent pods), nodes (pool and GPU model), namespaces, GPU
quotas, the events behind pending reasons and quota rejections, and DRA claims (``dra_claims``).
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exporter.aggregator.kube.budgets import BudgetAnnotations
from exporter.aggregator.kube.dra_claims import DRA_KIND_NAMES, DraState, pod_claim_names
from exporter.aggregator.kube.node_devices import keep_devices
from exporter.aggregator.kube.objects import (
    GPU_RESOURCE_RE,
    PENDING_REASONS,
    classify_pending,
    cluster_queue_gpus,
    gpu_quota_of,
    parse_quantity,
    parse_timestamp,
    workload_of,
)
from exporter.aggregator.kube.queues import KINDS as QUEUE_INDEX_KINDS
from exporter.aggregator.kube.queues import QueueIndex, QueueRef, kept_annotations
from exporter.model.books import EventCount

__all__ = ["PENDING_REASONS", "DeletedNode", "KubeState", "PodInfo", "classify_pending", "parse_timestamp"]

TOMBSTONES = 50_000


@dataclass(frozen=True, slots=True)
class DeletedNode:
    """A node the API no longer has: when it went (if the object said so) and the GPUs it had."""
    name: str
    deleted_at: float | None
    gpus: int
    gpu_model: str | None


@dataclass(slots=True)
class PodInfo:
    """What the aggregator keeps of one pod from the watch: where it runs, what it holds, who owns it."""
    namespace: str
    name: str
    uid: str
    node: str
    phase: str
    gpus: float
    workload: str
    workload_kind: str
    priority_class: str
    labels: dict[str, str]
    pod_ip: str
    pending_message: str
    created: str
    claims: tuple[str, ...] = ()  # DRA ResourceClaims it uses, by name in its namespace
    annotations: dict[str, str] = field(default_factory=dict)  # the few ``queues.ANNOTATIONS`` only


@dataclass(slots=True)
class KubeState:
    """Caches fed by the watcher; ``on_pod_deleted`` fires at once for GPU (or DRA) pods that go away."""
    pool_label: str = "gpu.platform/pool"
    agent_selector: dict[str, str] = field(default_factory=dict)
    #: Agents are discovered only in this namespace; None = nowhere (discovery needs a namespace).
    agent_namespace: str | None = None
    now: Callable[[], float] = time.time
    pods: dict[tuple[str, str], PodInfo] = field(default_factory=dict)
    tombstones: OrderedDict[tuple[str, str], PodInfo] = field(default_factory=OrderedDict)
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> labels
    node_devices: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> allocatable NVIDIA devices
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    budget_annotations: BudgetAnnotations = field(default_factory=BudgetAnnotations)  # namespace -> raw value
    quotas: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)  # (ns, name) -> hard, used
    scheduling_messages: dict[tuple[str, str], str] = field(default_factory=dict)
    quota_event_counts: dict[str, EventCount] = field(default_factory=dict)  # uid -> (ns, count)
    quota_event_seen: dict[str, float] = field(default_factory=dict)  # uid -> when its count last grew
    quota_rejection_base: dict[str, int] = field(default_factory=dict)  # ns -> counts of events pruned
    deleted_nodes: list[DeletedNode] = field(default_factory=list)  # taken by the next tick
    new_quota_rejections: dict[str, EventCount] = field(default_factory=dict)
    recent_rejections: list[tuple[str, str, str]] = field(default_factory=list)  # (time, namespace, message)
    volcano_queues: dict[str, tuple[float, float]] = field(default_factory=dict)  # queue -> (capability, allocated)
    kueue_cluster_queues: dict[str, tuple[float, float]] = field(default_factory=dict)  # cq -> (nominal, usage)
    kueue_local_queues: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, lq) -> cluster queue
    dra: DraState = field(default_factory=DraState)
    queue_index: QueueIndex = field(default_factory=QueueIndex)  # Kueue Workloads, Volcano and KAI PodGroups
    on_pod_deleted: Callable[[PodInfo], None] | None = None

    # -- lookups -------------------------------------------------------------------------------------
    def pod(self, namespace: str, name: str) -> PodInfo | None:
        """A live pod, or a recently deleted one (its tombstone: late snapshots still name it); None if unknown."""
        return self.pods.get((namespace, name)) or self.tombstones.get((namespace, name))

    def queue_of(self, p: PodInfo) -> QueueRef:
        """The scheduler queue the pod was admitted through (``queues``); all "" when it names none."""
        return self.queue_index.of(namespace=p.namespace, name=p.name, owner=(p.workload_kind, p.workload),
                                   labels=p.labels, annotations=p.annotations, local_queues=self.kueue_local_queues)

    def pool_of(self, node: str) -> str:
        """The node's pool (its ``pool_label`` label); "" when unlabelled or unknown."""
        return self.nodes.get(node, {}).get(self.pool_label, "")

    def model_of_node(self, node: str) -> str | None:
        """The node's GPU model per its ``nvidia.com/gpu.product`` label; None if unlabelled or unknown."""
        product = self.nodes.get(node, {}).get("nvidia.com/gpu.product")
        return product or None

    def gpus_of_node(self, node: str) -> int:
        """Physical GPUs per the node's ``nvidia.com/gpu.count`` label (GPU feature discovery); 0 if unknown."""
        try:
            return max(0, int(self.nodes.get(node, {}).get("nvidia.com/gpu.count", "0")))
        except ValueError:
            return 0

    def agent_pods(self) -> list[PodInfo]:
        """Running agent pods of the configured namespace and selector, scheduled on a node."""
        return [p for p in self.pods.values()
                if p.namespace == self.agent_namespace and self._is_agent(p.labels) and p.pod_ip and p.node
                and p.phase == "Running"]

    def forget_quota_events(self, *, before: float) -> None:
        """Fold quota events not seen since ``before`` into per-namespace totals (as the ledger compacts them)."""
        for uid in [u for u, seen in self.quota_event_seen.items() if seen < before]:
            ns, count = self.quota_event_counts.pop(uid, EventCount("", 0))
            self.quota_event_seen.pop(uid, None)
            if count and uid not in self.new_quota_rejections:
                self.quota_rejection_base[ns] = self.quota_rejection_base.get(ns, 0) + count

    def quota_rejections(self) -> dict[str, int]:
        """Quota rejections per namespace since the ledger began."""
        out = dict(self.quota_rejection_base)
        for ns, count in self.quota_event_counts.values():
            out[ns] = out.get(ns, 0) + count
        return out

    def take_deleted_nodes(self) -> list[DeletedNode]:
        """Nodes deleted since the last call, handed over once (the tick closes their books)."""
        out, self.deleted_nodes = self.deleted_nodes, []
        return out

    def pending_gpu_pods(self) -> list[PodInfo]:
        """Unscheduled pods requesting GPUs as a resource or through a (known) DRA GPU claim."""
        return [p for p in self.pods.values() if p.phase == "Pending" and not p.node
                and (p.gpus > 0 or self.dra.gpu_claims(p.namespace, p.claims))]

    def pending_reasons(self, pod: PodInfo) -> list[str]:
        """Why a pending GPU pod waits, classified from its scheduling message (status or Event); DRA first."""
        msg = pod.pending_message or self.scheduling_messages.get((pod.namespace, pod.name), "")
        reasons = classify_pending(msg) if msg else ["other"]
        return self.dra.with_claim_reason(pod.namespace, pod.claims, reasons=reasons)

    def quota_by_namespace(self) -> dict[str, tuple[float, float]]:
        """Tightest GPU quota per namespace: (hard, used) of the quota with the least headroom."""
        out: dict[str, tuple[float, float]] = {}
        for (ns, _name), (hard, used) in self.quotas.items():
            if ns not in out or hard - used < out[ns][0] - out[ns][1]:
                out[ns] = (hard, used)
        return out

    def _is_agent(self, labels: dict[str, str]) -> bool:
        return bool(self.agent_selector) and all(labels.get(k) == v for k, v in self.agent_selector.items())

    # -- watch handler -------------------------------------------------------------------------------
    def handle(self, kind: str, etype: str, *, obj: dict[str, Any]) -> None:
        """The watch's handler: events and full lists of every watched kind, routed to the part that keeps them."""
        self.budget_annotations.handle(kind, etype, obj=obj)
        if kind in DRA_KIND_NAMES:
            self.dra.handle(kind, etype, obj=obj)
        elif kind in QUEUE_INDEX_KINDS:
            self.queue_index.handle(kind, etype, obj=obj)
        elif etype == "LISTED":
            self._relisted(kind, obj["items"])
        else:
            getattr(self, f"_on_{kind}")(etype, obj)

    def _relisted(self, kind: str, items: list[dict[str, Any]]) -> None:
        if kind == "pods":
            before = dict(self.pods)
            self.pods.clear()
            for item in items:
                self._on_pods("ADDED", item)
            for key, info in before.items():  # deleted while we were not watching
                if key not in self.pods:
                    self._pod_gone(info)
        elif kind == "nodes":
            listed = {(i.get("metadata") or {}).get("name", "") for i in items}
            for name in [n for n in self.nodes if n not in listed]:  # deleted while we were not watching
                self._node_gone(name, None)
            self.nodes.clear()
        elif kind == "namespaces":
            self.namespaces.clear()
        elif kind == "resourcequotas":
            self.quotas.clear()
        elif kind == "queues":
            self.volcano_queues.clear()
        elif kind == "clusterqueues":
            self.kueue_cluster_queues.clear()
        elif kind == "localqueues":
            self.kueue_local_queues.clear()
        if kind != "pods":
            for item in items:
                getattr(self, f"_on_{kind}")("ADDED", item)

    def _pod_gone(self, info: PodInfo) -> None:
        self.tombstones[(info.namespace, info.name)] = info
        while len(self.tombstones) > TOMBSTONES:
            self.tombstones.popitem(last=False)
        if (info.gpus > 0 or info.claims) and self.on_pod_deleted is not None:
            self.on_pod_deleted(info)

    def _on_pods(self, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if etype == "DELETED":
            info = self.pods.pop(key, None)
            if info is not None:
                self._pod_gone(info)
            return
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        gpus = 0.0
        for ctr in spec.get("containers") or []:
            res = ctr.get("resources") or {}
            amounts = {**(res.get("requests") or {}), **(res.get("limits") or {})}
            gpus += sum(parse_quantity(v) for k, v in amounts.items() if GPU_RESOURCE_RE.match(k))
        labels = meta.get("labels") or {}
        phase, claims = status.get("phase", ""), pod_claim_names(spec, status)  # DRA and KAI pods ask no GPU:
        kai = any(k in (meta.get("annotations") or {}) for k in ("gpu-fraction", "gpu-memory"))
        if gpus <= 0 and not (claims or spec.get("resourceClaims") or kai) and not self._is_agent(labels):
            self.pods.pop(key, None)
            return
        if phase in ("Succeeded", "Failed"):
            info = self.pods.pop(key, None)
            if info is not None:
                self._pod_gone(info)
            return
        pending_msg = ""
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                pending_msg = cond.get("message") or cond.get("reason") or ""
        wkind, wname = workload_of(meta)
        self.pods[key] = PodInfo(
            namespace=key[0], name=key[1], uid=meta.get("uid", ""), node=spec.get("nodeName") or "", phase=phase,
            gpus=gpus, workload=wname, workload_kind=wkind, priority_class=spec.get("priorityClassName") or "",
            labels=labels, pod_ip=status.get("podIP") or "", pending_message=pending_msg,
            created=meta.get("creationTimestamp") or "", claims=claims, annotations=kept_annotations(meta))

    @staticmethod
    def _keep_labels(table: dict[str, dict[str, str]], etype: str, *, obj: dict[str, Any]) -> None:
        """Cluster-scoped objects we only need the labels of (nodes, namespaces), by name."""
        meta = obj.get("metadata") or {}
        if etype == "DELETED":
            table.pop(meta.get("name", ""), None)
        else:
            table[meta.get("name", "")] = dict(meta.get("labels") or {})

    def _on_nodes(self, etype: str, obj: dict[str, Any]) -> None:
        if etype == "DELETED":
            meta = obj.get("metadata") or {}
            stamp = parse_timestamp(meta.get("deletionTimestamp") or "")
            self._node_gone(meta.get("name", ""), stamp)
        self._keep_labels(self.nodes, etype, obj=obj)
        keep_devices(self.node_devices, etype, obj=obj)

    def _node_gone(self, name: str, deleted_at: float | None) -> None:
        if name in self.nodes:
            self.deleted_nodes.append(DeletedNode(name, deleted_at, self.gpus_of_node(name), self.model_of_node(name)))

    def _on_namespaces(self, etype: str, obj: dict[str, Any]) -> None:
        self._keep_labels(self.namespaces, etype, obj=obj)

    def _on_resourcequotas(self, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if etype == "DELETED" or (best := gpu_quota_of(obj)) is None:
            self.quotas.pop(key, None)
        else:
            self.quotas[key] = best

    def _on_queues(self, etype: str, obj: dict[str, Any]) -> None:
        """Volcano Queue: spec.capability and status.allocated of GPU resources."""
        name = (obj.get("metadata") or {}).get("name", "")
        if etype == "DELETED":
            self.volcano_queues.pop(name, None)
            return
        cap = (obj.get("spec") or {}).get("capability") or {}
        alloc = (obj.get("status") or {}).get("allocated") or {}
        gpu_keys = [k for k in cap if GPU_RESOURCE_RE.match(k)]
        if gpu_keys:
            self.volcano_queues[name] = (sum(parse_quantity(cap[k]) for k in gpu_keys),
                                         sum(parse_quantity(alloc.get(k, 0)) for k in gpu_keys))

    def _on_clusterqueues(self, etype: str, obj: dict[str, Any]) -> None:
        """Kueue ClusterQueue: nominal quota and usage of GPU resources over all flavors."""
        name = (obj.get("metadata") or {}).get("name", "")
        if etype == "DELETED":
            self.kueue_cluster_queues.pop(name, None)
            return
        if (gpus := cluster_queue_gpus(obj)) is not None:
            self.kueue_cluster_queues[name] = gpus

    def _on_localqueues(self, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if etype == "DELETED":
            self.kueue_local_queues.pop(key, None)
        else:
            self.kueue_local_queues[key] = (obj.get("spec") or {}).get("clusterQueue", "")

    def quota_sources(self) -> dict[tuple[str, str], tuple[float, float]]:
        """(namespace, source) -> (hard, used): ResourceQuotas, and Kueue ClusterQueues through LocalQueues."""
        out = {(ns, "resourcequota"): v for ns, v in self.quota_by_namespace().items()}
        for (ns, _lq), cq in self.kueue_local_queues.items():
            if cq in self.kueue_cluster_queues:
                out[(ns, "kueue")] = self.kueue_cluster_queues[cq]
        return out

    def _on_events(self, etype: str, obj: dict[str, Any]) -> None:
        if etype == "DELETED":
            return
        reason = obj.get("reason", "")
        message = obj.get("message") or ""
        involved = obj.get("involvedObject") or {}
        meta = obj.get("metadata") or {}
        ns = involved.get("namespace") or meta.get("namespace", "")
        if reason == "FailedScheduling" and involved.get("kind") == "Pod":
            self.scheduling_messages[(ns, involved.get("name", ""))] = message
            if len(self.scheduling_messages) > TOMBSTONES:
                self.scheduling_messages.pop(next(iter(self.scheduling_messages)))
        elif reason == "FailedCreate" and "exceeded quota" in message and re.search(
                r"nvidia\.com/|amd\.com/gpu|gpu\.intel\.com/", message):
            uid = meta.get("uid") or f"{ns}/{meta.get('name')}"
            count = int(obj.get("count") or (obj.get("series") or {}).get("count") or 1)
            seen = self.quota_event_counts.get(uid, EventCount(ns, 0)).fired
            if count > seen:
                self.recent_rejections.append((obj.get("lastTimestamp") or meta.get("creationTimestamp") or "", ns,
                                               message[:300]))
                del self.recent_rejections[:-50]
                self.quota_event_counts[uid] = EventCount(ns, count)
                self.quota_event_seen[uid] = self.now()
                prev_new = self.new_quota_rejections.get(uid, EventCount(ns, 0)).fired
                self.new_quota_rejections[uid] = EventCount(ns, prev_new + count - seen)
