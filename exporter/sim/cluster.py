"""The simulated cluster's state as a function of scenario time, and its renderings.

``SimCluster.advance(t)`` applies every happening up to ``t`` (pods starting and ending, pending pods,
quota rejections, DCGM and pod-resources outages) to the Kubernetes object store and integrates GPU
energy. The peers (DCGM endpoint, gRPC server, API server) read from it.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from exporter.model.devices import gpu_slices, profile_slices
from exporter.sim.kube_store import KubeStore
from exporter.sim.layout import GpuLayout, NodeLayout, place_pods
from exporter.sim.scenario import EventSpec, PodSpec, Scenario

_MODEL_FB_MIB = {"H100": 81559, "A100-SXM4-80GB": 81920, "A100": 40960, "L4": 23034, "A30": 24576}
_MODEL_WATTS = {"H100": (70.0, 700.0), "A100": (55.0, 400.0), "L4": (16.0, 72.0), "A30": (30.0, 165.0)}
DRIVER_VERSION = "580.105.08"


def _lookup(table: dict[str, Any], model: str, default: Any) -> Any:
    for key in sorted(table, key=len, reverse=True):
        if key in model:
            return table[key]
    return default


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Happening:
    """Something the driver (not the cluster) must act on: restarts and outages of peers."""

    type: str
    node: str | None
    at: float


class SimCluster:
    """All simulated state; single-threaded, owned by one event loop."""

    def __init__(self, scenario: Scenario, wall_start: float) -> None:
        self.scenario = scenario
        self.wall_start = wall_start
        placement = place_pods(scenario)
        self.layouts: dict[str, NodeLayout] = placement.layouts
        self.devices = placement.devices
        self.t = -1.0
        self.store = KubeStore()
        self.energy_mj: dict[str, float] = {}
        self._energy_t = 0.0
        self._timeline = self._build_timeline()
        self._next = 0
        self._pod_uids = {(p.namespace, p.name): str(uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                                                                    f"pod/{p.namespace}/{p.name}"))
                          for p in scenario.pods}
        self.hostnames = {n: f"dcgm-exporter-{hashlib.sha1(n.encode()).hexdigest()[:5]}" for n in self.layouts}
        self.event_counter = 0

    # -- time ----------------------------------------------------------------------------------------
    def _build_timeline(self) -> list[tuple[float, int, str, Any]]:
        tl: list[tuple[float, int, str, Any]] = [(0.0, 0, "init", None)]
        for p in self.scenario.pods:
            if p.node is None:
                tl.append((p.start, 2, "pending_add", p))
            else:
                tl.append((p.start, 2, "pod_start", p))
            if p.end is not None:
                tl.append((p.end, 1, "pod_end", p))
        for e in self.scenario.events:
            if e.start is not None and e.end is not None:
                tl.append((e.start, 3, f"{e.type}:start", e))
                tl.append((e.end, 3, f"{e.type}:end", e))
            else:
                tl.append((e.at or 0.0, 3, e.type, e))
        tl.sort(key=lambda x: (x[0], x[1]))
        return tl

    def advance(self, t: float) -> list[Happening]:
        """Apply everything due up to scenario time ``t``; return what the driver must act on."""
        if t < self.t:
            return []
        self._integrate_energy(t)
        fired: list[Happening] = []
        while self._next < len(self._timeline) and self._timeline[self._next][0] <= t:
            at, _prio, kind, obj = self._timeline[self._next]
            self._next += 1
            self.t = max(self.t, at)
            fired.extend(self._apply(kind, obj, at))
        self.t = t
        return fired

    def _apply(self, kind: str, obj: Any, at: float) -> list[Happening]:
        if kind == "init":
            self._init_objects()
        elif kind == "pod_start":
            self.store.upsert("pods", self.pod_object(obj, running=True))
            self._update_quota(obj.namespace)
        elif kind == "pending_add":
            self.store.upsert("pods", self.pod_object(obj, running=False))
            self._add_event(obj.namespace, "Pod", obj.name, "FailedScheduling", self.pending_message(obj), at,
                            source="default-scheduler")
            self._update_quota(obj.namespace)
        elif kind == "pod_end":
            if obj.node is not None:  # its containers terminate at ``end`` (finishedAt), then it goes
                self.store.upsert("pods", self.pod_object(obj, running=True, finished=at))
            if obj.node is None or not self.layouts[obj.node].spec.kubelet_lists_terminated:
                self.store.delete("pods", obj.namespace, obj.name)
            self._update_quota(obj.namespace)
        elif kind == "quota_rejection":
            self._quota_rejection(obj, at)
        elif kind == "watch_expire":
            self.store.expire_history()
        else:
            ev: EventSpec = obj
            return [Happening(kind, ev.node, at)]
        return []

    def seconds_to_next(self) -> float | None:
        if self._next >= len(self._timeline):
            return None
        return self._timeline[self._next][0] - self.t

    # -- what runs where -----------------------------------------------------------------------------
    def running_pods(self, node: str) -> list[PodSpec]:
        return [p for p in self.scenario.pods if p.node == node and p.running_at(self.t)]

    def in_window(self, etype: str, node: str) -> bool:
        return any(e.type == etype and e.node == node and e.start is not None and e.end is not None
                   and e.start <= self.t < e.end for e in self.scenario.events)

    def device_holders(self, node: str) -> dict[str, list[PodSpec]]:
        """Device ID -> pods holding it now."""
        out: dict[str, list[PodSpec]] = {}
        for p in self.running_pods(node):
            for d in self.devices.get((p.namespace, p.name), []):
                out.setdefault(d, []).append(p)
        return out

    def gpu_utilization(self, node: str) -> dict[str, float]:
        """Entity key (GPU uuid, or MIG uuid) -> utilisation served by DCGM now."""
        holders = self.device_holders(node)
        out: dict[str, float] = {}
        for gpu in self.layouts[node].gpus:
            if gpu.mig:
                for inst in gpu.mig:
                    out[inst.uuid] = sum(p.util_at(self.t) for p in holders.get(inst.uuid, []))
            elif gpu.replicas:
                # The sum of its holders' (pods') values, capped at 1: a pod with two replicas counts once.
                sharing = {(p.namespace, p.name): p for k in range(gpu.replicas)
                           for p in holders.get(f"{gpu.uuid}::{k}", [])}
                out[gpu.uuid] = min(1.0, sum(p.util_at(self.t) for p in sharing.values()))
            else:
                out[gpu.uuid] = sum(p.util_at(self.t) for p in holders.get(gpu.uuid, []))
        return out

    def _gpu_power(self, node: str, gpu: GpuLayout, util: dict[str, float]) -> float:
        idle_w, max_w = _lookup(_MODEL_WATTS, self.layouts[node].spec.model, (50.0, 300.0))
        if gpu.mig:
            slices = gpu_slices(self.layouts[node].spec.model)
            busy = sum(util[i.uuid] * profile_slices(i.profile) / slices for i in gpu.mig)
        else:
            busy = util[gpu.uuid]
        return float(idle_w + busy * (max_w - idle_w))

    def _integrate_energy(self, t: float) -> None:
        dt = max(0.0, t - self._energy_t)
        if dt > 0 and self.t >= 0:
            for node, layout in self.layouts.items():
                util = self.gpu_utilization(node)
                for gpu in layout.gpus:
                    self.energy_mj[gpu.uuid] = self.energy_mj.get(gpu.uuid, 0.0) + \
                        self._gpu_power(node, gpu, util) * dt * 1000.0
        self._energy_t = max(self._energy_t, t)

    # -- Kubernetes objects --------------------------------------------------------------------------
    def _init_objects(self) -> None:
        for ns in self.scenario.namespaces:
            self.store.upsert("namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns.name, "uid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"ns/{ns.name}")),
                             "labels": {"kubernetes.io/metadata.name": ns.name, **ns.labels},
                             "creationTimestamp": iso(self.wall_start)},
                "status": {"phase": "Active"}})
            if ns.gpu_quota is not None:
                self.store.upsert("resourcequotas", self._quota_object(ns.name, ns.gpu_quota, 0))
        for layout in self.layouts.values():
            self.store.upsert("nodes", self.node_object(layout))
        self._queue_objects()

    def node_object(self, layout: NodeLayout) -> dict[str, Any]:
        spec = layout.spec
        fb = _lookup(_MODEL_FB_MIB, spec.model, 16384)
        labels = {
            "kubernetes.io/hostname": spec.name, "kubernetes.io/os": "linux",
            "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": spec.model.replace(" ", "-"),
            "nvidia.com/gpu.count": str(spec.gpus), "nvidia.com/gpu.memory": str(fb),
            **({"nvidia.com/mig.strategy": "mixed"} if spec.mig else {}),
            **({"nvidia.com/gpu.replicas": str(spec.time_slicing)} if spec.time_slicing else {}),
            **spec.labels,
        }
        counts = {r: str(len(ids)) for r, ids in layout.resources.items()}
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": spec.name, "uid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"node/{spec.name}")),
                         "labels": labels, "creationTimestamp": iso(self.wall_start)},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "96", "memory": "1056Gi", **counts},
                       "allocatable": {"cpu": "95", "memory": "1000Gi", **counts},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
        }

    def pending_message(self, pod: PodSpec) -> str:
        reason = pod.pending_reason or f"Insufficient {pod.resource}"
        if reason.startswith("0/"):
            return reason
        n = len(self.layouts)
        return f"0/{n} nodes are available: {n} {reason}. preemption: 0/{n} nodes are available: " \
               f"{n} No preemption victims found for incoming pod."

    def pod_object(self, pod: PodSpec, running: bool, finished: float | None = None) -> dict[str, Any]:
        """The pod as the API serves it; ``finished`` (scenario time) renders it Succeeded, its container
        terminated at that time."""
        created = self.wall_start + pod.start
        labels = dict(pod.labels)
        owner_refs: list[dict[str, Any]] = []
        if pod.owner is not None:
            kind, name = pod.owner.kind, pod.owner.name
            if kind == "Deployment":
                tmpl = hashlib.sha1(name.encode()).hexdigest()[:10]
                labels["pod-template-hash"] = tmpl
                kind, name = "ReplicaSet", f"{name}-{tmpl}"
            labels.setdefault("app", pod.owner.name)
            owner_refs.append({"apiVersion": "batch/v1" if kind in ("Job", "CronJob") else "apps/v1", "kind": kind,
                               "name": name, "uid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{kind}/{name}")),
                               "controller": True, "blockOwnerDeletion": True})
        qty = str(pod.gpus)
        spec: dict[str, Any] = {
            "schedulerName": "default-scheduler",
            "containers": [{"name": pod.container, "image": "registry.local/workloads/sim:1",
                            "resources": {"requests": {pod.resource: qty, "cpu": "4"},
                                          "limits": {pod.resource: qty}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
        if pod.priority_class:
            spec["priorityClassName"] = pod.priority_class
        if running:
            spec["nodeName"] = pod.node
            state: dict[str, Any] = {"running": {"startedAt": iso(created)}}
            if finished is not None:
                state = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": iso(created),
                                        "finishedAt": iso(self.wall_start + finished)}}
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
                "message": self.pending_message(pod), "lastTransitionTime": iso(created)}]}
        meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace,
                                "uid": self._pod_uids[(pod.namespace, pod.name)],
                                "labels": labels, "creationTimestamp": iso(created)}
        if owner_refs:
            meta["ownerReferences"] = owner_refs
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}

    def _quota_object(self, ns: str, hard: int, used: int) -> dict[str, Any]:
        key = "requests.nvidia.com/gpu"
        return {"apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": "gpu-quota", "namespace": ns,
                             "uid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"quota/{ns}")),
                             "creationTimestamp": iso(self.wall_start)},
                "spec": {"hard": {key: str(hard)}},
                "status": {"hard": {key: str(hard)}, "used": {key: str(used)}}}

    def _queue_objects(self) -> None:
        """Volcano Queues and Kueue ClusterQueues (+ a LocalQueue per served namespace) of the scenario."""
        for q in self.scenario.queues:
            used = str(sum(self.quota_used(ns) for ns in q.namespaces))
            meta = {"name": q.name, "uid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"queue/{q.name}")),
                    "creationTimestamp": iso(self.wall_start)}
            if q.kind == "volcano":
                self.store.upsert("queues", {
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta,
                    "spec": {"capability": {"nvidia.com/gpu": str(q.gpus)}, "weight": 1, "reclaimable": True},
                    "status": {"state": "Open", "allocated": {"nvidia.com/gpu": used}}})
            else:
                self.store.upsert("clusterqueues", {
                    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": meta,
                    "spec": {"namespaceSelector": {}, "resourceGroups": [{
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [{"name": "default-flavor",
                                     "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(q.gpus)}]}]}]},
                    "status": {"flavorsUsage": [{"name": "default-flavor",
                                                 "resources": [{"name": "nvidia.com/gpu", "total": used}]}]}})
                for ns in q.namespaces:
                    self.store.upsert("localqueues", {
                        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                        "metadata": {"name": f"{q.name}-lq", "namespace": ns,
                                     "creationTimestamp": iso(self.wall_start)},
                        "spec": {"clusterQueue": q.name}})

    def quota_used(self, ns: str) -> int:
        """GPUs charged to quota: every pod admitted (running or pending) requesting nvidia.com/gpu."""
        return sum(p.gpus for p in self.scenario.pods
                   if p.namespace == ns and p.resource == "nvidia.com/gpu" and p.start <= self.t
                   and (p.end is None or self.t < p.end))

    def _update_quota(self, ns: str) -> None:
        if any(ns in q.namespaces for q in self.scenario.queues):
            self._queue_objects()
        spec = next((n for n in self.scenario.namespaces if n.name == ns), None)
        if spec is not None and spec.gpu_quota is not None:
            self.store.upsert("resourcequotas", self._quota_object(ns, spec.gpu_quota, self.quota_used(ns)))

    def _quota_rejection(self, ev: EventSpec, at: float) -> None:
        ns = ev.namespace or "default"
        spec = next((n for n in self.scenario.namespaces if n.name == ns), None)
        hard = spec.gpu_quota if spec and spec.gpu_quota is not None else 0
        key = "requests.nvidia.com/gpu"
        msg = (f'Error creating: pods "rejected-{self.event_counter}" is forbidden: exceeded quota: gpu-quota, '
               f"requested: {key}={ev.requested}, used: {key}={self.quota_used(ns)}, limited: {key}={hard}")
        self._add_event(ns, "ReplicaSet", f"burst-{self.event_counter}", "FailedCreate", msg, at,
                        source="replicaset-controller")

    def _add_event(self, ns: str, kind: str, name: str, reason: str, message: str, at: float, source: str) -> None:
        self.event_counter += 1
        ts = iso(self.wall_start + at)
        ev_name = f"{name}.{self.event_counter:016x}"
        self.store.upsert("events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": ev_name, "namespace": ns,
                         "uid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"event/{ns}/{ev_name}")),
                         "creationTimestamp": ts},
            "involvedObject": {"kind": kind, "namespace": ns, "name": name},
            "reason": reason, "message": message, "type": "Warning", "count": 1,
            "firstTimestamp": ts, "lastTimestamp": ts, "source": {"component": source}})

    # -- DCGM Exporter text --------------------------------------------------------------------------
    def render_dcgm(self, node: str) -> str:
        layout = self.layouts[node]
        spec = layout.spec
        util = self.gpu_utilization(node)
        holders = self.device_holders(node) if spec.dcgm_pod_labels else {}
        fb_total = _lookup(_MODEL_FB_MIB, spec.model, 16384)
        slices = gpu_slices(spec.model)
        entities: list[tuple[str, bool, float, float, dict[str, str], GpuLayout]] = []
        for gpu in layout.gpus:
            base = (f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="{gpu.pci_bus_id}",'
                    f'device="nvidia{gpu.index}",modelName="{spec.model}"')
            if gpu.mig:
                for inst in gpu.mig:
                    labels = f'{base},GPU_I_PROFILE="{inst.profile}",GPU_I_ID="{inst.gpu_instance_id}"'
                    pods = holders.get(inst.uuid, [])
                    share = profile_slices(inst.profile) / slices
                    entities.append((labels, True, util[inst.uuid], fb_total * share, self._pod_labels(pods), gpu))
            else:
                pods = holders.get(gpu.uuid, [])
                if gpu.replicas:
                    pods = [p for k in range(gpu.replicas) for p in holders.get(f"{gpu.uuid}::{k}", [])]
                entities.append((base, False, util[gpu.uuid], float(fb_total), self._pod_labels(pods[:1]), gpu))
        host = f'Hostname="{self.hostnames[node]}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"'
        out: list[str] = []

        def family(name: str, mtype: str, help_text: str, values: list[tuple[str, str]]) -> None:
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} {mtype}\n")
            out.extend(f"{name}{{{labels}}} {value}\n" for labels, value in values)

        def lbl(e: tuple[str, bool, float, float, dict[str, str], GpuLayout]) -> str:
            pod = e[4]
            extra = "".join(f',{k}="{v}"' for k, v in pod.items())
            return f"{e[0]},{host}{extra}"

        family("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
               [(lbl(e), str(1980 if e[2] > 0 else 345)) for e in entities])
        family("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
               [(lbl(e), "2619") for e in entities])
        family("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).",
               [(lbl(e), str(int(38 + 30 * e[2]))) for e in entities])
        family("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
               [(lbl(e), str(int(33 + 40 * e[2]))) for e in entities])
        family("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
               [(lbl(e), f"{self._gpu_power(node, e[5], util):.6f}") for e in entities])
        family("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
               "Total energy consumption since boot (in mJ).",
               [(lbl(e), str(int(self.energy_mj.get(e[5].uuid, 0.0)))) for e in entities])
        family("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
               [(lbl(e), "0") for e in entities])
        whole = [e for e in entities if not e[1]]
        if whole:
            family("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
                   [(lbl(e), str(round(e[2] * 100))) for e in whole])
            family("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
                   [(lbl(e), str(round(e[2] * 40))) for e in whole])
        family("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", [(lbl(e), "0") for e in entities])
        family("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", [(lbl(e), "0") for e in entities])
        family("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
               [(lbl(e), str(int(e[3] - self._fb_used(e)))) for e in entities])
        family("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
               [(lbl(e), str(int(self._fb_used(e)))) for e in entities])
        family("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).",
               [(lbl(e), "510") for e in entities])
        if "L4" not in spec.model:
            family("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
                   "Total number of NVLink bandwidth counters for all lanes.", [(lbl(e), "0") for e in entities])
        family("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", [(lbl(e), "0") for e in entities])
        family("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
               "Number of remapped rows for uncorrectable errors", [(lbl(e), "0") for e in entities])
        family("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
               "Number of remapped rows for correctable errors", [(lbl(e), "0") for e in entities])
        family("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed",
               [(lbl(e), "0") for e in entities])
        family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
               [(lbl(e), f"{e[2]:.6f}") for e in entities])
        family("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.",
               [(lbl(e), f"{e[2] * 0.8:.6f}") for e in entities])
        family("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active "
               "sending or receiving data.", [(lbl(e), f"{e[2] * 0.6:.6f}") for e in entities])
        family("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - "
               "including both protocol headers and data payloads - in bytes per second.",
               [(lbl(e), str(int(1_000_000 + e[2] * 3e7))) for e in entities])
        family("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - "
               "including both protocol headers and data payloads - in bytes per second.",
               [(lbl(e), str(int(2_000_000 + e[2] * 9e7))) for e in entities])
        return "".join(out)

    @staticmethod
    def _fb_used(e: tuple[str, bool, float, float, dict[str, str], GpuLayout]) -> float:
        held = bool(e[4]) or e[2] > 0
        return min(e[3] - 1, 300 + (0.7 * e[3] if held else 0.0))

    @staticmethod
    def _pod_labels(pods: list[PodSpec]) -> dict[str, str]:
        if not pods:
            return {}
        p = pods[0]
        return {"container": p.container, "namespace": p.namespace, "pod": p.name}

    # -- pod-resources -------------------------------------------------------------------------------
    def pod_resources(self, node: str) -> list[tuple[PodSpec, list[str]]]:
        """What the kubelet's List answers: running pods, plus finished ones on kubelets that list them."""
        lists_done = self.layouts[node].spec.kubelet_lists_terminated
        pods = [p for p in self.scenario.pods if p.node == node and p.start <= self.t
                and (p.end is None or self.t < p.end or lists_done)]
        return [(p, self.devices.get((p.namespace, p.name), [])) for p in pods]
