"""Discovery documents for every kind the simulated API server serves, so ``kubectl`` can find them.

kubectl resolves ``get pods`` through ``/api``, ``/api/v1``, ``/apis`` and ``/apis/<group>/<version>``
before it lists anything; it asks for aggregated discovery first and falls back to these plain
documents (``APIVersions``, ``APIResourceList``, ``APIGroupList``) when the server answers with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

READ = ("get", "list", "watch")


@dataclass(frozen=True, slots=True)
class Resource:
    """One served resource: where it lives in the API and what kubectl may call it."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = READ
    crd: str | None = None  # served only when the scenario installs this CRD family
    store: str = ""  # the store's kind when the plural alone is ambiguous (KAI's queues beside Volcano's)

    @property
    def store_kind(self) -> str:
        """The kind the object store keeps these objects under."""
        return self.store or self.plural

    @property
    def group_version(self) -> str:
        """``<group>/<version>``, or just ``v1`` for the core group: the objects' ``apiVersion``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base_path(self) -> str:
        """The URL prefix the resource is served under: ``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else "/api/v1"


RESOURCES = (
    Resource("", "v1", "pods", "Pod", True, ("po",)),
    Resource("", "v1", "nodes", "Node", False, ("no",)),
    Resource("", "v1", "namespaces", "Namespace", False, ("ns",)),
    Resource("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",)),
    Resource("", "v1", "events", "Event", True, ("ev",), (*READ, "create")),
    Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True, (), (*READ, "create", "update")),
    Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True),
    Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, ("q", "queue-v1beta1"), (*READ, "patch"),
             crd="volcano"),
    Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, ("pg", "podgroup-v1beta1"),
             crd="volcano"),
    Resource("bus.volcano.sh", "v1alpha1", "commands", "Command", True, (), (*READ, "create", "delete"),
             crd="volcano"),
    Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False, ("cq",), (*READ, "patch"),
             crd="kueue"),
    Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", True, ("queue", "queues", "lq"),
             (*READ, "patch"), crd="kueue"),
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", True, ("wl",), crd="kueue"),
    Resource("scheduling.run.ai", "v2", "queues", "Queue", False, (), crd="kai", store="kaiqueues"),
    Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", True, (), crd="kai", store="kaipodgroups"),
)


def served(crds: frozenset[str]) -> list[Resource]:
    """The resources this server answers for, given the CRD families the scenario installs."""
    return [r for r in RESOURCES if r.crd is None or r.crd in crds]


def by_plural(plural: str) -> Resource:
    """The served resource named ``plural``; StopIteration for one the server does not serve."""
    return next(r for r in RESOURCES if r.store_kind == plural)


def api_versions() -> dict[str, Any]:
    """The ``/api`` document: the core group serves only v1."""
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}


def resource_list(group_version: str, resources: list[Resource]) -> dict[str, Any]:
    """``APIResourceList`` of one group/version."""
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                           "kind": r.kind, "verbs": list(r.verbs),
                           **({"shortNames": list(r.short_names)} if r.short_names else {})}
                          for r in resources if r.group_version == group_version]}


def group_list(resources: list[Resource]) -> dict[str, Any]:
    """``APIGroupList`` of the named groups (the core group is announced by ``/api``)."""
    groups: dict[str, str] = {}
    for r in resources:
        if r.group:
            groups.setdefault(r.group, r.version)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
         "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}} for g, v in groups.items()]}
