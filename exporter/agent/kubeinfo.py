"""Reads what the agent needs from the Kubernetes API to account shared GPUs, and keeps it between ticks.

Only asked when the node shares GPUs (replicas, HAMi IDs or DRA claims in pod-resources): the node's
labels (MPS or time-slicing, physical GPU memory), the HAMi annotation of each pod holding HAMi IDs,
the node's ResourceSlices and the adminAccess results of each listed claim.
An annotation is written before the pod starts and never changes, so a pod is read once (from the
own-node pod watch when it runs, else by one GET) and forgotten when the kubelet stops listing it.
API faults never stop a tick: the last known context is used, and an unknown annotation falls back
to the listed IDs (counted as unresolved).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from exporter.agent.holders.dra import DRIVER, DeviceKey, SliceDevice, admin_devices, consumed_memory, slice_index
from exporter.agent.holders.hami import ANNOTATION, HamiDevice, HamiError, by_container, parse_allocation
from exporter.agent.holders.sharing import ContainerKey, NodeContext
from exporter.clients.errors import PeerError
from exporter.clients.kube import make_api_client, read_core
from exporter.logs import get_logger
from exporter.model.devices import DeviceKind, hami_device_gpu, parse_device_id
from exporter.model.pod_resources import ContainerClaim, ContainerDevices

log = get_logger("agent.kubeinfo")
LABELS_REFRESH_TICKS = 20
RETRY_CLIENT_TICKS = 20
RETRY_READ_TICKS = 4  # a read that failed (or found nothing new) is not repeated before this many ticks


def shares_gpus(held: Iterable[ContainerDevices], allocatable: dict[str, tuple[str, ...]] | None) -> bool:
    """Whether any ID is a replica or a HAMi slot: only then does the API have something to add."""
    ids = [i for cd in held for i in cd.device_ids] + [i for v in (allocatable or {}).values() for i in v]
    return any(parse_device_id(i).kind is DeviceKind.REPLICA or hami_device_gpu(i) for i in ids)


def hami_pods(held: Iterable[ContainerDevices]) -> set[tuple[str, str]]:
    """(namespace, pod) of every holder of a HAMi vGPU: the pods whose annotations must be read."""
    return {(cd.namespace, cd.pod) for cd in held if any(hami_device_gpu(i) for i in cd.device_ids)}


def pod_shares(pod: dict[str, Any]) -> dict[ContainerKey, list[HamiDevice]]:
    """A pod object's HAMi shares by container; {} when it has no (or an unreadable) annotation."""
    meta = pod.get("metadata") or {}
    text = (meta.get("annotations") or {}).get(ANNOTATION)
    if not isinstance(text, str) or not text:
        return {}
    spec = pod.get("spec") or {}
    try:
        named = by_container(parse_allocation(text),
                             init_containers=[str(c.get("name", "")) for c in spec.get("initContainers") or []],
                             containers=[str(c.get("name", "")) for c in spec.get("containers") or []])
    except HamiError as exc:
        log.warning("hami_annotation_unreadable", pod=f"{meta.get('namespace')}/{meta.get('name')}", error=str(exc))
        return {}
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    return {ContainerKey(ns, name, c): devs for c, devs in named.items()}


class KubeInfo:
    """The node's sharing context from the API; one per agent, used from the agent's event loop only."""

    def __init__(self, *, node: str, kubeconfig: Path | None, timeout: float) -> None:
        self.node, self.kubeconfig, self.timeout = node, kubeconfig, timeout
        self.api_client: Any = None
        self._no_client_until = 0
        self._ticks = 0
        self._labels: dict[str, str] = {}
        self._labels_at: int | None = None
        self._pods: dict[tuple[str, str], dict[ContainerKey, list[HamiDevice]]] = {}
        self._listed: set[tuple[str, str]] = set()
        self._slices: dict[DeviceKey, SliceDevice] = {}
        self._slices_at: int | None = None
        self._admin: dict[str, set[DeviceKey]] = {}  # claim -> adminAccess devices, while listed
        self._consumed: dict[str, dict[DeviceKey, float]] = {}  # claim -> its shares' memory bytes per device
        self.errors = 0
        self._tried: dict[str, int] = {}  # read -> tick of the last attempt

    def _may_try(self, what: str, *, every: int) -> bool:
        """At most one attempt per ``every`` ticks per read: an API without RBAC is not asked every tick."""
        last = self._tried.get(what)
        if last is not None and self._ticks - last < every:
            return False
        self._tried[what] = self._ticks
        return True

    def observe_pod(self, pod: dict[str, Any], *, deleted: bool = False) -> None:
        """Feed from the own-node pod watch: annotations arrive before the kubelet lists the pod."""
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if deleted:
            self._pods.pop(key, None)
        elif ANNOTATION in (meta.get("annotations") or {}):
            self._pods[key] = pod_shares(pod)

    async def _client(self) -> Any:
        if self.api_client is None and self._ticks >= self._no_client_until:
            try:
                self.api_client = await make_api_client(self.kubeconfig)
            except Exception as exc:  # no kubeconfig and not in a cluster: run without, retry later
                self._no_client_until = self._ticks + RETRY_CLIENT_TICKS
                log.warning("kube_api_unavailable", node=self.node, error=str(exc)[:200],
                            effect="replicas count as time-slicing; HAMi pods as their listed IDs")
        return self.api_client

    async def _get(self, what: str, *args: str, custom: bool = False, **kwargs: str) -> dict[str, Any] | None:
        """One read; None on any fault (the tick goes on with what it knows)."""
        client = await self._client()
        if client is None:
            return None
        try:
            return await read_core(client, what, *args, timeout=self.timeout, custom=custom, **kwargs)
        except PeerError as exc:
            self.errors += 1
            log.warning("kube_get_failed", call=what, args=list(args), error=str(exc)[:200])
            return None

    async def _dra(self, claims: list[ContainerClaim]) -> None:
        """Slices when a listed device is unknown or due; each newly listed claim once, for adminAccess."""
        keys = {DeviceKey(d.driver, d.pool, d.device) for c in claims for d in c.devices}
        due = self._slices_at is None or self._ticks - self._slices_at >= LABELS_REFRESH_TICKS
        if (due or not keys <= set(self._slices)) and self._may_try("slices", every=RETRY_READ_TICKS):
            doc = await self._get("list_cluster_custom_object", "resource.k8s.io", "v1", "resourceslices",
                                  custom=True, field_selector=f"spec.driver={DRIVER},spec.nodeName={self.node}")
            if doc is not None:
                self._slices = slice_index([i for i in doc.get("items") or [] if isinstance(i, dict)])
                self._slices_at = self._ticks
        listed = {(c.claim_namespace, c.claim_name) for c in claims}
        self._admin = {k: v for k, v in self._admin.items() if tuple(k.split("/", 1)) in listed}
        self._consumed = {k: v for k, v in self._consumed.items() if k in self._admin}
        self._tried = {k: v for k, v in self._tried.items()
                       if not k.startswith("claim/") or tuple(k[6:].split("/", 1)) in listed}
        for ns, name in sorted(listed):
            if f"{ns}/{name}" not in self._admin and self._may_try(f"claim/{ns}/{name}", every=RETRY_READ_TICKS):
                claim = await self._get("get_namespaced_custom_object", "resource.k8s.io", "v1", ns,
                                        "resourceclaims", name, custom=True)
                if claim is not None:
                    self._admin[f"{ns}/{name}"] = admin_devices(claim)
                    self._consumed[f"{ns}/{name}"] = consumed_memory(claim)

    async def context(self, held: list[ContainerDevices], allocatable: dict[str, tuple[str, ...]] | None,
                      *, claims: list[ContainerClaim] | None = None) -> NodeContext:
        """This tick's context; asks the API only for what is missing or due for a refresh."""
        self._ticks += 1
        if claims:
            await self._dra(claims)
        if not shares_gpus(held, allocatable):
            return NodeContext(labels=self._labels, dra_slices=self._slices, dra_admin=self._admin,
                               dra_consumed=self._consumed)
        due = self._labels_at is None or self._ticks - self._labels_at >= LABELS_REFRESH_TICKS
        if due and self._may_try("node", every=RETRY_READ_TICKS):
            node = await self._get("read_node", self.node)
            if node is not None:
                self._labels = {str(k): str(v) for k, v in ((node.get("metadata") or {}).get("labels") or {}).items()}
                self._labels_at = self._ticks
        wanted = hami_pods(held)
        for gone in self._listed - wanted:  # the kubelet stopped listing it: its share is over
            self._pods.pop(gone, None)
            self._tried.pop(f"pod/{gone[0]}/{gone[1]}", None)
        self._listed = wanted
        for ns, name in sorted(wanted - set(self._pods)):
            if not self._may_try(f"pod/{ns}/{name}", every=RETRY_READ_TICKS):
                continue
            pod = await self._get("read_namespaced_pod", name, ns)
            if pod is not None:
                self._pods[(ns, name)] = pod_shares(pod)
        shares = {k: v for pod in self._pods.values() for k, v in pod.items()}
        return NodeContext(labels=self._labels, hami=shares, hami_pods=frozenset(self._pods),
                           dra_slices=self._slices, dra_admin=self._admin, dra_consumed=self._consumed)

    async def close(self) -> None:
        """Close the API client, if one was opened (agent shutdown)."""
        if self.api_client is not None:
            await self.api_client.close()
            self.api_client = None
