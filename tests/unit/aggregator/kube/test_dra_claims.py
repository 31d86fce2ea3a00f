"""Reading DRA claims and pods' claim references (pure): which claims are GPU claims, which are allocated."""

from __future__ import annotations

from exporter.aggregator.kube.dra_claims import ClaimCount, DraState, claim_state, pod_claim_names


def test_gpu_claim_by_device_class_or_result_driver_and_allocated_by_status() -> None:
    mig = {"metadata": {"namespace": "a", "name": "m"}, "spec": {"devices": {"requests": [
        {"name": "r", "firstAvailable": [{"name": "big", "deviceClassName": "mig.nvidia.com"}]}]}}}
    assert claim_state(mig).gpu and not claim_state(mig).allocated
    by_result = {"metadata": {"namespace": "a", "name": "x"},
                 "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "custom-gpus"}}]}},
                 "status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "device": "gpu-0"}]}}}}
    assert claim_state(by_result).gpu and claim_state(by_result).allocated
    nic = {"metadata": {"namespace": "a", "name": "n"},
           "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "rdma.example.com"}}]}}}
    assert not claim_state(nic).gpu


def test_pod_claim_names_resolve_templates_through_status_and_skip_ungenerated() -> None:
    spec = {"resourceClaims": [{"name": "shared", "resourceClaimName": "team-gpu"},
                               {"name": "own", "resourceClaimTemplateName": "tpl"},
                               {"name": "later", "resourceClaimTemplateName": "tpl"}]}
    status = {"resourceClaimStatuses": [{"name": "own", "resourceClaimName": "p-own-x7k2p"}]}
    assert pod_claim_names(spec, status) == ("team-gpu", "p-own-x7k2p")


def test_claim_reason_and_counts() -> None:
    """Two allocated and one pending GPU claim in ``a``, one non-GPU claim not counted: 2 + 1 = 3 GPU claims."""
    dra = DraState()
    gpu = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
    done = {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com"}]}}}
    dra.handle("resourceclaims", "LISTED", obj={"items": [
        {"metadata": {"namespace": "a", "name": "c1"}, "spec": gpu, "status": done},
        {"metadata": {"namespace": "a", "name": "c2"}, "spec": gpu, "status": done},
        {"metadata": {"namespace": "a", "name": "c3"}, "spec": gpu},
        {"metadata": {"namespace": "a", "name": "nic"}, "spec": {}}]})
    assert dra.claim_counts() == [ClaimCount("a", "allocated", 2), ClaimCount("a", "pending", 1)]
    assert dra.with_claim_reason("a", ("c1", "c3"), reasons=["other"]) == ["dra_unallocated"]
    assert dra.with_claim_reason("a", ("c3",), reasons=["node_affinity"]) == ["dra_unallocated", "node_affinity"]
    assert dra.with_claim_reason("a", ("c1", "nic", "unseen"), reasons=["other"]) == ["other"]
    dra.handle("resourceclaims", "DELETED", obj={"metadata": {"namespace": "a", "name": "c3"}})
    assert dra.claim_counts() == [ClaimCount("a", "allocated", 2)]
