"""DRA behind an extended resource (``nvidia.com/gpu`` served by the DRA driver), pure: the scheduler's claim is
listed under every container that asked, each container with every device; the claim's results joined with the
pod's ``requestMappings`` give each device to its container, and the pod is charged each device once."""

from __future__ import annotations

from exporter.agent.holders.dra import DeviceKey, SliceDevice, claim_requests, dra_holds, extended_claim
from exporter.model.pod_resources import ClaimDevice, ContainerClaim

NV = "gpu.nvidia.com"
CLAIM = "p-extended-resources-x7k2q"
SLICES = {DeviceKey(NV, "node-a", "gpu-0"): SliceDevice("gpu", "GPU-0000"),
          DeviceKey(NV, "node-a", "gpu-1"): SliceDevice("gpu", "GPU-1111")}
CLAIM_OBJ = {"metadata": {"name": CLAIM, "namespace": "ml",
                          "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "container-0-request-0", "driver": NV, "pool": "node-a", "device": "gpu-0"},
                 {"request": "container-1-request-0", "driver": NV, "pool": "node-a", "device": "gpu-1"}]}}}}
POD = {"metadata": {"namespace": "ml", "name": "p"},
       "status": {"extendedResourceClaimStatus": {"resourceClaimName": CLAIM, "requestMappings": [
           {"containerName": "train", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-0"},
           {"containerName": "eval", "resourceName": "nvidia.com/gpu", "requestName": "container-1-request-0"}]}}}


def _listed(container: str) -> ContainerClaim:
    """What pod-resources says for one container: the whole claim, both devices (no request name)."""
    return ContainerClaim("ml", "p", container, "ml", CLAIM,
                          (ClaimDevice(NV, "node-a", "gpu-0"), ClaimDevice(NV, "node-a", "gpu-1")))


def test_extended_claim_and_its_requests_are_read() -> None:
    assert extended_claim(POD) == (f"ml/{CLAIM}", {"container-0-request-0": "train", "container-1-request-0": "eval"})
    assert extended_claim({"metadata": {"namespace": "ml"}, "status": {}}) is None
    assert claim_requests(CLAIM_OBJ) == {DeviceKey(NV, "node-a", "gpu-0"): "container-0-request-0",
                                         DeviceKey(NV, "node-a", "gpu-1"): "container-1-request-0"}


def test_each_device_goes_to_the_container_whose_request_it_answers() -> None:
    """train asked nvidia.com/gpu: 1 (gpu-0), eval 1 (gpu-1): 2 devices, 2 holds, 1 GPU each, never 4."""
    ext = extended_claim(POD)
    assert ext is not None
    requests = claim_requests(CLAIM_OBJ)
    containers = {ext[0]: {k: ext[1][r] for k, r in requests.items()}}
    holds = dra_holds([_listed("train"), _listed("eval")], slices=SLICES, admin={}, containers=containers)
    assert [(h.container, h.key.device, h.share) for h in holds] == [("train", "gpu-0", 1.0), ("eval", "gpu-1", 1.0)]


def test_without_the_mapping_the_pod_still_holds_each_device_once() -> None:
    """No pod status (no watch): both devices on the first container by name, each once."""
    holds = dra_holds([_listed("train"), _listed("eval")], slices=SLICES, admin={})
    assert [(h.container, h.key.device, h.share) for h in holds] == [("eval", "gpu-0", 1.0), ("eval", "gpu-1", 1.0)]
