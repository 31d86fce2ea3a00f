"""Queue resolution as each scheduler records a pod's queue (``schedulers.md`` §1, §3-5), fed by watch events the
simulated API serves in the same shapes."""

from __future__ import annotations

from typing import Any

from exporter.aggregator.kube.queues import NO_QUEUE, QueueRef
from exporter.aggregator.kube.state import KubeState


def _pod(ns: str, name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": ns, "name": name, "uid": f"u-{name}", "labels": labels or {},
                            "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": "n", "containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Running"}}


def _state(*objs: tuple[str, dict[str, Any]]) -> KubeState:
    kube = KubeState()
    for kind, obj in objs:
        kube.handle(kind, "ADDED", obj=obj)
    return kube


def _queue(kube: KubeState, ns: str, name: str) -> QueueRef:
    info = kube.pod(ns, name)
    assert info is not None
    return kube.queue_of(info)


def test_kueue_workload_is_authoritative() -> None:
    """The Workload owned by the pod's Job names LocalQueue train and, once admitted, ClusterQueue gpu; before the
    Workload is seen the label and the LocalQueue's spec.clusterQueue answer."""
    lq = {"metadata": {"namespace": "team-a", "name": "train"}, "spec": {"clusterQueue": "gpu-lq"}}
    kube = _state(("localqueues", lq), ("pods", _pod("team-a", "t0", labels={"kueue.x-k8s.io/queue-name": "train"},
                                                     owner=("Job", "train"))))
    assert _queue(kube, "team-a", "t0") == QueueRef("kueue", "team-a/train", "gpu-lq")
    kube.handle("workloads", "ADDED", obj={
        "metadata": {"namespace": "team-a", "name": "job-train", "ownerReferences": [{"kind": "Job", "name": "train"}]},
        "spec": {"queueName": "train"}, "status": {"admission": {"clusterQueue": "gpu"}}})
    assert _queue(kube, "team-a", "t0") == QueueRef("kueue", "team-a/train", "gpu")


def test_volcano_podgroup_queue() -> None:
    """The group-name annotation leads to PodGroup pg1, whose spec.queue is research; a PodGroup without a queue
    is Volcano's ``default``."""
    kube = _state(("podgroups", {"metadata": {"namespace": "b", "name": "pg1"}, "spec": {"queue": "research"}}),
                  ("podgroups", {"metadata": {"namespace": "b", "name": "pg2"}, "spec": {}}),
                  ("pods", _pod("b", "r0", annotations={"scheduling.k8s.io/group-name": "pg1"})),
                  ("pods", _pod("b", "r1", annotations={"scheduling.k8s.io/group-name": "pg2"})))
    assert _queue(kube, "b", "r0") == QueueRef("volcano", "research")
    assert _queue(kube, "b", "r1") == QueueRef("volcano", "default")


def test_kai_podgroup_wins_over_label() -> None:
    """KAI: the PodGroup's spec.queue (team-c) wins over the pod's kai.scheduler/queue label (stale); a pod with
    only the label has the label's queue."""
    kube = _state(("kaipodgroups", {"metadata": {"namespace": "c", "name": "g"}, "spec": {"queue": "team-c"}}),
                  ("pods", _pod("c", "k0", labels={"kai.scheduler/queue": "old"}, annotations={"pod-group-name": "g"})),
                  ("pods", _pod("c", "k1", labels={"kai.scheduler/queue": "team-x"})))
    assert _queue(kube, "c", "k0") == QueueRef("kai", "team-c")
    assert _queue(kube, "c", "k1") == QueueRef("kai", "team-x")


def test_yunikorn_label_annotation_legacy() -> None:
    """YuniKorn: the label, else the annotation, else the legacy ``queue`` label; a pod with none has no queue."""
    kube = _state(("pods", _pod("d", "a", labels={"yunikorn.apache.org/queue": "root.a"},
                                annotations={"yunikorn.apache.org/queue": "root.x"})),
                  ("pods", _pod("d", "b", annotations={"yunikorn.apache.org/queue": "root.b"})),
                  ("pods", _pod("d", "c", labels={"queue": "root.c"})),
                  ("pods", _pod("d", "plain")))
    assert _queue(kube, "d", "a") == QueueRef("yunikorn", "root.a")
    assert _queue(kube, "d", "b") == QueueRef("yunikorn", "root.b")
    assert _queue(kube, "d", "c") == QueueRef("yunikorn", "root.c")
    assert _queue(kube, "d", "plain") == NO_QUEUE


def test_names_are_bounded() -> None:
    """A label value longer than an object name's 253 characters is cut there (the row key stays bounded)."""
    kube = _state(("pods", _pod("d", "a", labels={"yunikorn.apache.org/queue": "q" * 1000})))
    assert _queue(kube, "d", "a").queue == "q" * 253
