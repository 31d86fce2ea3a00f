"""Which scheduler queue a pod's GPU time belongs to: Kueue, Volcano, KAI or YuniKorn, read as each scheduler
records it (``schedulers.md`` §1, §3-5).

* Kueue: the pod's ``kueue.x-k8s.io/queue-name`` label names a LocalQueue of its namespace; the Workload owned by
  the pod's owner (or the pod) is authoritative (``spec.queueName``; ``status.admission.clusterQueue``), else the
  LocalQueue's ``spec.clusterQueue``. The queue is ``<namespace>/<localqueue>``.
* Volcano: the ``scheduling.k8s.io/group-name`` annotation names a PodGroup; its ``spec.queue`` (default
  ``default``) is the queue.
* KAI: the ``pod-group-name`` annotation names a ``scheduling.run.ai`` PodGroup whose ``spec.queue`` wins, else
  the ``kai.scheduler/queue`` label (``runai/queue`` before v0.6.0).
* YuniKorn: the ``yunikorn.apache.org/queue`` label, else the same annotation, else the legacy ``queue`` label.

A pod with none of these has queue "" and scheduler "". Values are cut to ``MAX_NAME`` characters (an object
name's limit) so a row key stays bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

KUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
VOLCANO_QUEUE_LABEL = "volcano.sh/queue-name"
KAI_GROUP = "pod-group-name"
KAI_LABELS = ("kai.scheduler/queue", "runai/queue")
YUNIKORN = "yunikorn.apache.org/queue"
#: The pod annotations resolution reads: all a PodInfo keeps of its annotations.
ANNOTATIONS = (VOLCANO_GROUP, VOLCANO_QUEUE_ANNOTATION, KAI_GROUP, YUNIKORN)
#: Kinds this index is fed by the watch (``clients.kube.QUEUE_KINDS``).
KINDS = frozenset({"workloads", "podgroups", "kaipodgroups"})
SCHEDULERS = ("kueue", "volcano", "kai", "yunikorn")
MAX_NAME = 253


class QueueRef(NamedTuple):
    """A pod's queue: ``scheduler`` (``kueue | volcano | kai | yunikorn | ""``), ``queue`` (Kueue
    ``<namespace>/<localqueue>``, others the queue's name) and, for Kueue, the ``cluster_queue``."""

    scheduler: str = ""
    queue: str = ""
    cluster_queue: str = ""


NO_QUEUE = QueueRef()


def kept_annotations(meta: Mapping[str, Any]) -> dict[str, str]:
    """The few pod annotations queue resolution reads (the rest are not kept: memory stays bounded)."""
    ann = meta.get("annotations") or {}
    return {k: str(ann[k])[:MAX_NAME] for k in ANNOTATIONS if k in ann}


@dataclass(slots=True)
class QueueIndex:
    """Workloads and PodGroups by (namespace, name), and Workloads by (namespace, owner kind, owner name)."""

    workloads: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # -> (queueName, clusterQueue)
    workload_owner: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)  # -> workload key
    volcano_groups: dict[tuple[str, str], str] = field(default_factory=dict)  # -> spec.queue
    kai_groups: dict[tuple[str, str], str] = field(default_factory=dict)

    def handle(self, kind: str, etype: str, *, obj: Mapping[str, Any]) -> None:
        """A watch event or (``LISTED``) a full list of one of ``KINDS``."""
        if etype == "LISTED":
            self._clear(kind)
            for item in obj.get("items") or []:
                self.handle(kind, "ADDED", obj=item)
            return
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        spec = obj.get("spec") or {}
        if kind == "workloads":
            self._workload(key, etype, meta=meta, spec=spec, status=obj.get("status") or {})
            return
        table = self.volcano_groups if kind == "podgroups" else self.kai_groups
        if etype == "DELETED":
            table.pop(key, None)
        else:
            default = "default" if kind == "podgroups" else ""
            table[key] = str(spec.get("queue") or default)[:MAX_NAME]

    def _clear(self, kind: str) -> None:
        if kind == "workloads":
            self.workloads.clear()
            self.workload_owner.clear()
        elif kind == "podgroups":
            self.volcano_groups.clear()
        else:
            self.kai_groups.clear()

    def _workload(self, key: tuple[str, str], etype: str, *, meta: Mapping[str, Any], spec: Mapping[str, Any],
                  status: Mapping[str, Any]) -> None:
        owners = [(key[0], str(r.get("kind", "")), str(r.get("name", ""))) for r in meta.get("ownerReferences") or []]
        if etype == "DELETED":
            self.workloads.pop(key, None)
            for o in owners:
                if self.workload_owner.get(o) == key:
                    del self.workload_owner[o]
            return
        admission = status.get("admission") or {}
        self.workloads[key] = (str(spec.get("queueName") or "")[:MAX_NAME],
                               str(admission.get("clusterQueue") or "")[:MAX_NAME])
        for o in owners:
            self.workload_owner[o] = key

    def of(self, *, namespace: str, name: str, owner: tuple[str, str], labels: Mapping[str, str],
           annotations: Mapping[str, str], local_queues: Mapping[tuple[str, str], str]) -> QueueRef:
        """The queue of the pod ``namespace/name`` whose top owner is ``owner`` (kind, name)."""
        wl = self.workload_owner.get((namespace, *owner)) or self.workload_owner.get((namespace, "Pod", name))
        lq = labels.get(KUEUE_LABEL, "")
        if wl is not None or lq:
            queue_name, cq = self.workloads.get(wl, ("", "")) if wl else ("", "")
            lq = (queue_name or lq)[:MAX_NAME]
            cq = cq or local_queues.get((namespace, lq), "")
            return QueueRef("kueue", f"{namespace}/{lq}" if lq else "", cq[:MAX_NAME])
        if group := annotations.get(VOLCANO_GROUP):
            found = self.volcano_groups.get((namespace, group))
            if found is None:  # the PodGroup not seen (yet): what the pod itself says, if anything
                found = annotations.get(VOLCANO_QUEUE_ANNOTATION) or labels.get(VOLCANO_QUEUE_LABEL, "")
            return QueueRef("volcano", found[:MAX_NAME])
        kai_label = next((labels[k] for k in KAI_LABELS if labels.get(k)), "")
        kai_group = annotations.get(KAI_GROUP)
        if kai_label or (kai_group and (namespace, kai_group) in self.kai_groups):
            found = self.kai_groups.get((namespace, kai_group or ""), "") or kai_label
            return QueueRef("kai", found[:MAX_NAME])
        yk = labels.get(YUNIKORN) or annotations.get(YUNIKORN) or labels.get("queue", "")
        if yk:
            return QueueRef("yunikorn", yk[:MAX_NAME])
        return NO_QUEUE
