"""DRA objects as the NVIDIA DRA driver and the scheduler leave them: one ResourceSlice per node (pool =
node name, driver gpu.nvidia.com) and one allocated ResourceClaim per claim, reserved for its pods.
Also the kubelet's view: each device's CDI name, as the driver v25.12 writes it."""

from __future__ import annotations

from typing import Any

from exporter.sim.hardware import framebuffer_mib
from exporter.sim.kube.objects import iso, stable_uid
from exporter.sim.layout import NodeLayout
from exporter.sim.spec import ClaimSpec, PodSpec

DRIVER = "gpu.nvidia.com"


def resource_slice(layout: NodeLayout, *, created: float, shared: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The node's slice; a whole GPU's only capacity is its memory. Devices in ``shared`` take
    consumable-capacity shares (``allowMultipleAllocations``, alpha DRAConsumableCapacity)."""
    node = layout.spec.name
    devices = []
    for d in layout.dra:
        attrs: dict[str, Any] = {"type": {"string": d.type}, "uuid": {"string": d.uuid},
                                 "productName": {"string": layout.spec.model},
                                 "driverVersion": {"version": "580.105.8"}}
        device: dict[str, Any] = {"name": d.name, "attributes": attrs}
        if d.type == "mig":
            attrs.update(parentUUID={"string": d.parent_uuid}, profile={"string": d.profile})
        else:
            device["capacity"] = {"memory": {"value": f"{framebuffer_mib(layout.spec.model)}Mi"}}
        if d.name in shared:
            device["allowMultipleAllocations"] = True
        devices.append(device)
    name = f"{node}-{DRIVER}-{stable_uid(f'slice/{node}')[:5]}"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "uid": stable_uid(f"slice/{node}"), "creationTimestamp": iso(created)},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": devices}}


def claim_uid(namespace: str, claim: str) -> str:
    """The stable UID of ResourceClaim ``claim`` in ``namespace``; CDI device names embed it."""
    return stable_uid(f"claim/{namespace}/{claim}")


def resource_claim(claim: ClaimSpec, *, namespace: str, node: str, pods: list[PodSpec],
                   created: float) -> dict[str, Any]:
    """An allocated claim: one result per device (adminAccess when asked), reserved for ``pods``. A
    consumable-capacity share's results carry the scheduler's ``shareID`` and ``consumedCapacity``."""
    results = [{"request": claim.request_name, "driver": DRIVER, "pool": node, "device": d,
                **({"adminAccess": True} if claim.admin_access else {}), **share_fields(claim, namespace, device=d)}
               for d in claim.devices]
    capacity = {} if claim.memory_mib is None else {"capacity": {"requests": {"memory": f"{claim.memory_mib}Mi"}}}
    meta: dict[str, Any] = {"name": claim.name, "namespace": namespace, "uid": claim_uid(namespace, claim.name),
                            "creationTimestamp": iso(created)}
    if claim.pod_claim is not None or claim.extended:  # the pod's own claim: owned by it
        (owner,) = pods
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner.name, "controller": True,
                                    "blockOwnerDeletion": True,
                                    "uid": stable_uid(f"pod/{owner.namespace}/{owner.name}")}]
        if claim.extended:  # the scheduler's, for an extended-resource request: no pod-claim-name
            meta["generateName"] = f"{owner.name}-extended-resources-"
            meta["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
        else:  # generated from the pod's template: the claim controller's mark
            meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": claim.pod_claim}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": [{"name": claim.request_name, "exactly": {
                "deviceClassName": claim.device_class, "allocationMode": "ExactCount", "count": len(claim.devices),
                **({"adminAccess": True} if claim.admin_access else {}), **capacity}}]}},
            "status": {"allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                       "reservedFor": [{"resource": "pods", "name": p.name,
                                        "uid": stable_uid(f"pod/{p.namespace}/{p.name}")} for p in pods]}}


def share_id(namespace: str, claim: str, *, device: str) -> str:
    """The stable shareID of a consumable-capacity share of ``device`` by one claim."""
    return stable_uid(f"share/{namespace}/{claim}/{device}")


def share_fields(claim: ClaimSpec, namespace: str, *, device: str) -> dict[str, Any]:
    """A claim result's ``shareID`` and ``consumedCapacity``; empty unless the claim consumes a share of memory."""
    if claim.memory_mib is None:
        return {}
    return {"shareID": share_id(namespace, claim.name, device=device),
            "consumedCapacity": {"memory": f"{claim.memory_mib}Mi"}}


def cdi_name(namespace: str, claim: str, *, device: str) -> str:
    """The CDI device name the DRA driver gives ``device`` as allocated to one claim."""
    return f"k8s.{DRIVER}/claim={claim_uid(namespace, claim)}-{device}"
