"""What the simulated schedulers' controllers do with queue holds, read from and written to the object store.

Kueue admits nothing new through a LocalQueue whose ``spec.stopPolicy`` (or its ClusterQueue's) is not ``None``;
Volcano's controller turns a ``CloseQueue`` / ``OpenQueue`` Command into the Queue's ``status.state`` and deletes the
Command; a closed Volcano queue admits nothing new. Running pods are never evicted by ``Hold`` or ``CloseQueue``;
``HoldAndDrain`` also evicts the queue's admitted Workloads (Kueue's workload controller: condition ``Evicted``, reason
``LocalQueueStopped`` or ``ClusterQueueStopped``), whose pods then stop.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from exporter.sim.kube.objects import KindObject, stable_uid
from exporter.sim.kube.store import KubeStore
from exporter.sim.layout import HamiShare
from exporter.sim.spec import PodSpec


def _stopped(obj: dict[str, Any] | None) -> bool:
    return obj is not None and (obj.get("spec") or {}).get("stopPolicy", "None") not in ("", "None")


def is_held(store: KubeStore, pod: PodSpec) -> bool:
    """Whether the pod's queue admits nothing new now (KAI queues have no stop mechanism)."""
    q = pod.queue
    if q is None:
        return False
    if q.kind == "kueue":
        return _stopped(store.objects["localqueues"].get((pod.namespace, q.name))) or _stopped(
            store.objects["clusterqueues"].get(("", q.cluster_queue)))
    if q.kind == "volcano":
        queue = store.objects["queues"].get(("", q.name))
        return queue is not None and (queue.get("status") or {}).get("state", "Open") != "Open"
    return False


def drain_reason(store: KubeStore, pod: PodSpec) -> str | None:
    """Why Kueue evicts the pod's admitted Workload now: ``LocalQueueStopped`` / ``ClusterQueueStopped`` when its
    LocalQueue / ClusterQueue has ``stopPolicy: HoldAndDrain`` (the LocalQueue is checked first, as Kueue does);
    None otherwise (``Hold`` lets admitted workloads run on; Volcano and KAI have no drain)."""
    q = pod.queue
    if q is None or q.kind != "kueue":
        return None
    lq = store.objects["localqueues"].get((pod.namespace, q.name))
    if lq is not None and (lq.get("spec") or {}).get("stopPolicy") == "HoldAndDrain":
        return "LocalQueueStopped"
    cq = store.objects["clusterqueues"].get(("", q.cluster_queue))
    if cq is not None and (cq.get("spec") or {}).get("stopPolicy") == "HoldAndDrain":
        return "ClusterQueueStopped"
    return None


def drained(store: KubeStore, pods: list[PodSpec], *, t: float) -> list[tuple[PodSpec, str]]:
    """The pods running at ``t`` whose Workload Kueue evicts now, each with ``drain_reason``."""
    return [(p, reason) for p in pods if p.running_at(t) and (reason := drain_reason(store, p)) is not None]


def successor(pod: PodSpec, *, at: float, devices: dict[tuple[str, str], list[str]],
              hami: dict[tuple[str, str], list[HamiShare]]) -> PodSpec | None:
    """The new pod a drained pod's owner (a Job) creates at ``at``: ``<owner>-<5 hex>``, unscheduled until its queue
    admits again, then running for what ``pod`` had left (its end moves by the wait), on the same devices (free on the
    node meanwhile, registered under the new name). None for a plain pod: nothing recreates it."""
    if pod.owner is None:
        return None
    name = f"{pod.owner.name}-{stable_uid(f'pod/{pod.namespace}/{pod.name}/{at}')[:5]}"
    old, new = (pod.namespace, pod.name), (pod.namespace, name)
    if old in devices:
        devices[new] = devices[old]
    if old in hami:
        hami[new] = hami[old]
    return replace(pod, name=name, node=None, start=at)


def run_commands(store: KubeStore) -> None:
    """Volcano's controller: each Command's action applied to its target Queue, then the Command deleted."""
    for (ns, name), cmd in list(store.objects["commands"].items()):
        target = (cmd.get("target") or {}).get("name", "")
        queue = store.objects["queues"].get(("", target))
        if queue is not None and cmd.get("action") in ("CloseQueue", "OpenQueue"):
            queue = copy.deepcopy(queue)
            queue.setdefault("status", {})["state"] = "Closed" if cmd["action"] == "CloseQueue" else "Open"
            store.upsert("queues", queue)
        store.delete("commands", ns, name=name)


def hold_by_hand(store: KubeStore, queue: str) -> None:
    """What a person does: ``kubectl patch`` a Kueue LocalQueue (``<ns>/<name>``) or ClusterQueue to ``Hold``, or
    close a Volcano queue; no annotation of ours."""
    ns, _sep, name = queue.rpartition("/")
    for kind in ("localqueues", "clusterqueues", "queues"):
        obj = store.objects[kind].get((ns, name))
        if obj is None:
            continue
        obj = copy.deepcopy(obj)
        if kind == "queues":
            obj.setdefault("status", {})["state"] = "Closed"
        else:
            obj.setdefault("spec", {})["stopPolicy"] = "Hold"
        store.upsert(kind, obj)
        return


def keep_state(store: KubeStore, ko: KindObject) -> KindObject:
    """A queue object re-rendered (its usage changed) keeping what others set on it: annotations, the stop policy,
    a Volcano queue's state."""
    old = store.objects[ko.kind].get((ko.obj["metadata"].get("namespace", ""), ko.obj["metadata"]["name"]))
    if old is None:
        return ko
    obj = copy.deepcopy(ko.obj)
    if old["metadata"].get("annotations"):
        obj["metadata"]["annotations"] = dict(old["metadata"]["annotations"])
    if "stopPolicy" in (old.get("spec") or {}):
        obj["spec"]["stopPolicy"] = old["spec"]["stopPolicy"]
    if ko.kind == "queues" and "state" in (old.get("status") or {}):
        obj["status"]["state"] = old["status"]["state"]
    return KindObject(ko.kind, obj)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, ``null`` removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out
