"""DRA objects as the NVIDIA DRA driver and the scheduler leave them: one ResourceSlice per node (pool =
node name, driver gpu.nvidia.com) and one allocated ResourceClaim per claim, reserved for its pods.
Also the kubelet's view: each device's CDI name, as the driver v25.12 writes it."""

from __future__ import annotations

from typing import Any

from exporter.sim.kube_objects import iso, stable_uid
from exporter.sim.layout import NodeLayout
from exporter.sim.spec import ClaimSpec, PodSpec

DRIVER = "gpu.nvidia.com"


def resource_slice(layout: NodeLayout, *, created: float) -> dict[str, Any]:
    node = layout.spec.name
    devices = []
    for d in layout.dra:
        attrs: dict[str, Any] = {"type": {"string": d.type}, "uuid": {"string": d.uuid},
                                 "productName": {"string": layout.spec.model},
                                 "driverVersion": {"version": "580.105.8"}}
        if d.type == "mig":
            attrs.update(parentUUID={"string": d.parent_uuid}, profile={"string": d.profile})
        devices.append({"name": d.name, "attributes": attrs})
    name = f"{node}-{DRIVER}-{stable_uid(f'slice/{node}')[:5]}"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "uid": stable_uid(f"slice/{node}"), "creationTimestamp": iso(created)},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": devices}}


def claim_uid(namespace: str, claim: str) -> str:
    return stable_uid(f"claim/{namespace}/{claim}")


def resource_claim(claim: ClaimSpec, *, namespace: str, node: str, pods: list[PodSpec],
                   created: float) -> dict[str, Any]:
    """An allocated claim: one result per device (adminAccess when asked), reserved for ``pods``."""
    results = [{"request": "gpu", "driver": DRIVER, "pool": node, "device": d,
                **({"adminAccess": True} if claim.admin_access else {})} for d in claim.devices]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim.name, "namespace": namespace, "uid": claim_uid(namespace, claim.name),
                         "creationTimestamp": iso(created)},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": len(claim.devices),
                **({"adminAccess": True} if claim.admin_access else {})}}]}},
            "status": {"allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                       "reservedFor": [{"resource": "pods", "name": p.name,
                                        "uid": stable_uid(f"pod/{p.namespace}/{p.name}")} for p in pods]}}


def cdi_name(namespace: str, claim: str, device: str) -> str:
    return f"k8s.{DRIVER}/claim={claim_uid(namespace, claim)}-{device}"
