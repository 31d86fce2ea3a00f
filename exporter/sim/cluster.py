"""The simulated cluster's state as a function of scenario time.

``SimCluster.advance(t)`` applies every happening up to ``t`` (pods starting and ending, pending pods,
quota rejections, DCGM and pod-resources outages) to the Kubernetes object store and integrates GPU
energy. The peers (DCGM endpoint, gRPC server, API server) read from it; how objects, DCGM text and
kubelet answers look is decided by ``kube_objects``, ``dcgm_text`` and ``kubelet_answers``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from exporter.sim import dcgm_text, dra_objects, kai
from exporter.sim.kube import admission, exporter_pods
from exporter.sim.kube import objects as kube_objects
from exporter.sim.kube import queues as kube_queues
from exporter.sim.kube.objects import EventInfo, stable_uid
from exporter.sim.kube.store import KubeStore
from exporter.sim.kubelet_answers import PodDevices, list_answer
from exporter.sim.layout import NodeLayout, place_pods
from exporter.sim.power import EnergyMeter, gpu_power, gpu_utilization
from exporter.sim.spec import EventSpec, Hold, PodSpec, Scenario
from exporter.sim.vendors.text import amd_text, dcgm_per_pod_lines, gaudi_text, hami_monitor_text


@dataclass(frozen=True, slots=True)
class Happening:
    """Something the driver (not the cluster) must act on: restarts and outages of peers."""

    type: str
    node: str | None
    at: float


@dataclass(frozen=True, slots=True)
class _Step:
    """One entry of the timeline; ``order`` breaks ties at the same instant (ends before starts)."""

    at: float
    order: int
    kind: str
    pod: PodSpec | None = None
    event: EventSpec | None = None


class SimCluster:
    """All simulated state; single-threaded, owned by one event loop."""

    def __init__(self, scenario: Scenario, wall_start: float) -> None:
        self.scenario = scenario
        self.wall_start = wall_start
        placement = place_pods(scenario)
        self.layouts: dict[str, NodeLayout] = placement.layouts
        self.devices = placement.devices
        self.hami = placement.hami
        self.claims = placement.claims
        self.t = -1.0
        self.store = KubeStore()
        self.energy = EnergyMeter()
        self._timeline = self._build_timeline()
        self._next = 0
        # The exporter's Hostname label: NODE_NAME, which every upstream install sets from spec.nodeName.
        self.hostnames = {n: layout.spec.exporter_hostname or n for n, layout in self.layouts.items()}
        self.event_counter = 0
        self.waiting: dict[tuple[str, str], tuple[str, float]] = {}  # pods held back by their queue: (node, since)
        self.evicted: set[tuple[str, str]] = set()  # the waiting successors of drained pods: no pod object yet

    # -- time ----------------------------------------------------------------------------------------
    def _build_timeline(self) -> list[_Step]:
        tl = [_Step(0.0, 0, "init")]
        for p in self.scenario.pods:
            tl.append(_Step(p.start, 2, "pending_add" if p.node is None else "pod_start", pod=p))
            if p.end is not None:
                tl.append(_Step(p.end, 1, "pod_end", pod=p))
        for e in self.scenario.events:
            if e.start is not None and e.end is not None:
                tl.append(_Step(e.start, 3, f"{e.type}:start", event=e))
                tl.append(_Step(e.end, 3, f"{e.type}:end", event=e))
            else:
                tl.append(_Step(e.at or 0.0, 3, e.type, event=e))
        tl.sort(key=lambda s: (s.at, s.order))
        return tl

    def advance(self, t: float) -> list[Happening]:
        """Apply everything due up to scenario time ``t``; return what the driver must act on."""
        if t < self.t:
            return []
        self._integrate_energy(t)
        fired: list[Happening] = []
        while self._next < len(self._timeline) and self._timeline[self._next].at <= t:
            step = self._timeline[self._next]
            self._next += 1
            self.t = max(self.t, step.at)
            fired.extend(self._apply(step))
        self.t = t
        admission.run_commands(self.store)
        self._drain()
        self._admit_waiting()
        return fired

    def _apply(self, step: _Step) -> list[Happening]:
        pod = step.pod
        if step.kind == "init":
            self._init_objects()
        elif pod is not None and step.kind == "pod_start" and admission.is_held(self.store, pod):
            self._hold_back(pod, at=step.at)
        elif pod is not None and step.kind == "pod_start":
            self._kai_configmap(pod, keep=True)
            self._group_objects(pod, admitted=True)
            self.store.upsert("pods", self.pod_object(pod, running=True))
            self._update_quota(pod.namespace)
        elif pod is not None and step.kind == "pending_add":
            self._group_objects(pod, admitted=False)
            self.store.upsert("pods", self.pod_object(pod, running=False))
            self._add_event(EventInfo(pod.namespace, "Pod", pod.name, "FailedScheduling", self.pending_message(pod),
                                      "default-scheduler", stable_uid(f"pod/{pod.namespace}/{pod.name}")), step.at)
            self._update_quota(pod.namespace)
        elif pod is not None and step.kind == "pod_end" and ((pod.namespace, pod.name) in self.waiting
                                                             or pod.end != step.at):
            pass  # it has not started (its end moves with its start, ``_admit_waiting``), or it ended earlier
        elif pod is not None and step.kind == "pod_end":
            self._end(pod, at=step.at)
        elif step.event is not None and step.kind == "quota_rejection":
            self._quota_rejection(step.event, step.at)
        elif step.event is not None and step.kind == "budget_change":
            budget = next(b for b in self.scenario.budgets if b.get("name") == step.event.budget)
            budget.update(step.event.amounts)
            return [Happening(step.kind, None, step.at)]
        elif step.event is not None and step.kind == "queue_hold":
            admission.hold_by_hand(self.store, step.event.queue or "")
        elif step.kind == "watch_expire":
            self.store.expire_history()
        elif step.event is not None:
            return [Happening(step.kind, step.event.node, step.at)]
        return []

    def _end(self, pod: PodSpec, *, at: float) -> None:
        """The pod's containers terminate at ``at`` (finishedAt), then it goes (unless its kubelet lists it on)."""
        if pod.node is not None:
            self.store.upsert("pods", self.pod_object(pod, running=True, finished=at))
        if pod.node is None or not self.layouts[pod.node].spec.kubelet_lists_terminated:
            self.store.delete("pods", pod.namespace, name=pod.name)
            self._kai_configmap(pod, keep=False)  # garbage-collected with its owner
        self._update_quota(pod.namespace)

    def _drain(self) -> None:
        """Kueue's ``HoldAndDrain``: each running pod of a drained queue has its Workload evicted and stops now (charged
        up to here); a Job's new pod waits for the queue to admit again (``admission.successor``)."""
        for pod, reason in admission.drained(self.store, self.scenario.pods, t=self.t):
            node, nxt = str(pod.node), admission.successor(pod, at=self.t, devices=self.devices, hami=self.hami)
            pod.end = self.t
            self._end(pod, at=self.t)
            self._group_objects(pod, admitted=False, evicted=reason)
            if nxt is not None:
                self.scenario.pods.append(nxt)
                self.waiting[(nxt.namespace, nxt.name)] = (node, self.t)
                self.evicted.add((nxt.namespace, nxt.name))

    def _hold_back(self, pod: PodSpec, *, at: float) -> None:
        """A pod whose queue is held when it is submitted: Pending (its Workload or PodGroup not admitted)."""
        self.waiting[(pod.namespace, pod.name)] = (str(pod.node), at)
        pod.node = None
        self._group_objects(pod, admitted=False)
        self.store.upsert("pods", self.pod_object(pod, running=False))

    def _admit_waiting(self) -> None:
        """Start the held-back pods whose queue admits again; each one's end moves by its wait."""
        for key, (node, since) in list(self.waiting.items()):
            pod = next(p for p in self.scenario.pods if (p.namespace, p.name) == key)
            if admission.is_held(self.store, pod):
                continue
            del self.waiting[key]
            self.evicted.discard(key)
            pod.node, pod.start = node, self.t
            if pod.end is not None:
                pod.end += self.t - since
                bisect.insort(self._timeline, _Step(pod.end, 1, "pod_end", pod=pod), lo=self._next,
                              key=lambda s: (s.at, s.order))
            self._group_objects(pod, admitted=True)
            self.store.upsert("pods", self.pod_object(pod, running=True))
            self._update_quota(pod.namespace)

    def seconds_to_next(self) -> float | None:
        """Scenario seconds until the next timeline step is due; None once the timeline is exhausted."""
        if self._next >= len(self._timeline):
            return None
        return self._timeline[self._next].at - self.t

    # -- what runs where -----------------------------------------------------------------------------
    def running_pods(self, node: str) -> list[PodSpec]:
        """Pods placed on ``node`` and running at the current scenario time."""
        return [p for p in self.scenario.pods if p.node == node and p.running_at(self.t)]

    def in_window(self, etype: str, node: str) -> bool:
        """Whether an outage event of ``etype`` (``dcgm_down``, ``podresources_down``, ``per_pod_metrics_down``)
        covers ``node`` now."""
        return any(e.type == etype and e.node == node and e.start is not None and e.end is not None
                   and e.start <= self.t < e.end for e in self.scenario.events)

    def device_holders(self, node: str) -> dict[str, list[Hold]]:
        """Device ID -> pods holding it now (with which of their devices it is); a HAMi pod holds the
        physical GPUs of its annotation."""
        out: dict[str, list[Hold]] = {}
        for p in self.running_pods(node):
            key = (p.namespace, p.name)
            held = [s.gpu_uuid for s in self.hami[key]] if key in self.hami else list(self.devices.get(key, []))
            layout = self.layouts[node]
            held += [dev.uuid for c in p.claims for name in c.devices if (dev := layout.dra_device(name))]
            if p.kai is not None and not p.kai.reservation:  # a KAI fraction runs on its group's GPUs
                held += [layout.gpus[g].uuid for g in p.kai.placed]
            for i, d in enumerate(held):
                out.setdefault(d, []).append(Hold(p, i))
        return out

    def gpu_utilization(self, node: str) -> dict[str, float]:
        """Entity key (GPU uuid, or MIG uuid) -> utilisation served by DCGM now."""
        return gpu_utilization(self.layouts[node], self.device_holders(node), t=self.t)

    def _integrate_energy(self, t: float) -> None:
        dt = max(0.0, t - self.energy.t)
        if dt > 0 and self.t >= 0:
            for node, layout in self.layouts.items():
                self.energy.add(layout, self.gpu_utilization(node), dt=dt)
        self.energy.t = max(self.energy.t, t)

    @property
    def energy_mj(self) -> dict[str, float]:
        """Energy each GPU (by uuid) has drawn since the scenario began, in millijoules: DCGM's energy counter."""
        return self.energy.mj

    # -- Kubernetes objects --------------------------------------------------------------------------
    def _init_objects(self) -> None:
        for ns in self.scenario.namespaces:
            self.store.upsert("namespaces", kube_objects.namespace_object(ns, created=self.wall_start))
            if ns.gpu_quota is not None:
                self.store.upsert("resourcequotas", kube_objects.quota_object(
                    ns.name, hard=ns.gpu_quota, used=0, created=self.wall_start))
        for index, layout in enumerate(self.layouts.values()):
            self.store.upsert("nodes", self.node_object(layout))
            self.store.upsert("pods", exporter_pods.exporter_pod(layout, index,
                                                                 created=kube_objects.iso(self.wall_start)))
            if layout.spec.dra:
                shared = frozenset(d for p in self.scenario.pods if p.node == layout.spec.name for c in p.claims
                                   if c.memory_mib is not None for d in c.devices)
                self.store.upsert("resourceslices", dra_objects.resource_slice(layout, created=self.wall_start,
                                                                               shared=shared))
        for (claim_ns, _name), claim in self.claims.items():
            users = [p for p in self.scenario.pods if p.namespace == claim_ns and claim in p.claims]
            self.store.upsert("resourceclaims", dra_objects.resource_claim(
                claim, namespace=claim_ns, node=str(users[0].node), pods=users, created=self.wall_start))
        self._queue_objects()

    def _kai_configmap(self, pod: PodSpec, *, keep: bool) -> None:
        """A KAI fraction's ConfigMap (``GPU_PORTION``), written by the binder before the pod starts."""
        if (cm := kai.placed_configmap(pod, self.layouts, created=self.wall_start + pod.start)) is None:
            return
        if keep:
            self.store.upsert("configmaps", cm)
        else:
            self.store.delete("configmaps", pod.namespace, name=cm["metadata"]["name"])

    def node_object(self, layout: NodeLayout) -> dict[str, Any]:
        """The Node object the API server serves for ``layout`` (``exporter_pods.node_object``)."""
        return exporter_pods.node_object(layout, list(self.layouts).index(layout.spec.name), created=self.wall_start)

    def pending_message(self, pod: PodSpec) -> str:
        """Why ``pod`` is Pending, as the scheduler's condition message would put it."""
        return kube_objects.pending_message(pod, nodes=len(self.layouts))

    def pod_object(self, pod: PodSpec, running: bool, *, finished: float | None = None) -> dict[str, Any]:
        """The Pod object as the API server serves it (with its queue's marks); ``finished`` (scenario time) renders
        it Succeeded."""
        obj = kube_objects.pod_object(pod, running=running, wall_start=self.wall_start,
                                      pending=self.pending_message(pod),
                                      hami=self.hami.get((pod.namespace, pod.name), []), finished=finished)
        labels, annotations = kube_queues.pod_queue_marks(pod)
        obj["metadata"]["labels"].update(labels)
        if annotations:
            obj["metadata"]["annotations"] = {**obj["metadata"].get("annotations", {}), **annotations}
        return obj

    def _group_objects(self, pod: PodSpec, *, admitted: bool, evicted: str | None = None) -> None:
        """The pod's Workload or PodGroup as its scheduler's controller makes it now (Kueue: evicts it, ``evicted``)."""
        for ko in kube_queues.group_objects(pod, admitted=admitted, created=self.wall_start + pod.start,
                                            evicted=evicted, at=self.wall_start + self.t):
            self.store.upsert(ko.kind, ko.obj)

    def _queue_objects(self) -> None:
        """Volcano and KAI Queues and Kueue ClusterQueues (+ their LocalQueues) of the scenario."""
        for q in self.scenario.queues:
            used = sum(self.quota_used(ns) for ns in q.namespaces)
            for ko in kube_queues.queue_objects(q, used=used, created=self.wall_start):
                self.store.upsert(ko.kind, admission.keep_state(self.store, ko).obj)

    def quota_used(self, ns: str) -> int:
        """GPUs charged to quota: every pod admitted (running or pending) requesting nvidia.com/gpu."""
        return sum(p.gpus for p in self.scenario.pods
                   if p.namespace == ns and p.resource == "nvidia.com/gpu" and not p.claims and p.start <= self.t
                   and (p.end is None or self.t < p.end) and (p.namespace, p.name) not in self.evicted)

    def _update_quota(self, ns: str) -> None:
        if any(ns in q.namespaces for q in self.scenario.queues):
            self._queue_objects()
        spec = next((n for n in self.scenario.namespaces if n.name == ns), None)
        if spec is not None and spec.gpu_quota is not None:
            self.store.upsert("resourcequotas", kube_objects.quota_object(
                ns, hard=spec.gpu_quota, used=self.quota_used(ns), created=self.wall_start))

    def _quota_rejection(self, ev: EventSpec, at: float) -> None:
        ns = ev.namespace or "default"
        hard = next((n.gpu_quota or 0 for n in self.scenario.namespaces if n.name == ns), 0)
        self._add_event(kube_objects.quota_rejection(ns, seq=self.event_counter, requested=ev.requested,
                                                     used=self.quota_used(ns), hard=hard), at)

    def _add_event(self, info: EventInfo, at: float) -> None:
        self.event_counter += 1
        self.store.upsert("events", kube_objects.event_object(info, seq=self.event_counter, at=self.wall_start + at))

    # -- peers' answers ------------------------------------------------------------------------------
    def render_dcgm(self, node: str) -> str:
        """The DCGM exporter's ``/metrics`` body for ``node`` at the current scenario time."""
        layout = self.layouts[node]
        util = self.gpu_utilization(node)
        readings = dcgm_text.NodeReadings(
            util=util, power_w={g.uuid: gpu_power(layout.spec.model, g, util=util, watts=layout.spec.power)
                                  for g in layout.gpus},
            energy_mj=self.energy.mj, hostname=self.hostnames[node])
        holders = self.device_holders(node)
        if layout.spec.vendor != "nvidia":
            render = amd_text if layout.spec.vendor == "amd" else gaudi_text
            return render(layout, holders=holders, readings=readings)
        per_pod = layout.spec.per_pod_metrics == "dcgm"  # the device series then carries no pod labels
        rows = dcgm_text.entities(layout, util=util, holders=holders, t=self.t,
                                  pod_labels=layout.spec.dcgm_pod_labels and not per_pod)
        served = per_pod and not self.in_window("per_pod_metrics_down", node)
        extra = dcgm_per_pod_lines(rows, holders=holders, readings=readings, t=self.t) if served else []
        return dcgm_text.render(layout, rows, readings=readings, per_pod=extra)

    def render_hami(self, node: str) -> str:
        """HAMi's vGPU monitor ``/metrics`` body for ``node`` now (no container's series in a
        ``per_pod_metrics_down`` window: the monitor answers, but has lost its containers)."""
        down = self.in_window("per_pod_metrics_down", node)
        return hami_monitor_text(self.layouts[node], holders={} if down else self.device_holders(node), t=self.t)

    def pod_resources(self, node: str) -> list[PodDevices]:
        """What the kubelet's List answers: running pods, plus finished ones on kubelets that list them."""
        return list_answer(self.scenario.pods, node=node, t=self.t, devices=self.devices,
                           lists_terminated=self.layouts[node].spec.kubelet_lists_terminated)
