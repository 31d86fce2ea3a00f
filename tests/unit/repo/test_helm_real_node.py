"""The agent as a GPU node needs it (docs/install.md, "What the agent needs from the node"): the owner of the
kubelet's root-owned socket with no capability, tolerated on every vendor's GPU nodes, ready only while it can
account its node, and still scraped while it is not."""

from __future__ import annotations

from typing import Any

from tests.unit.repo.helm_render import FULL, mounts_of, render, volumes_of

AGENT_CONTEXT = {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                 "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                 "seccompProfile": {"type": "RuntimeDefault"}}


def agent_container(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod["containers"]
    return container  # type: ignore[no-any-return]


def test_agent_runs_as_root_with_no_capability_and_mounts_the_socket_folder_read_only() -> None:
    """UID 0 owns the socket (root:root 0755, connecting needs write on it) and the state hostPath; every
    capability dropped, no escalation, read-only root, RuntimeDefault seccomp; no fsGroup (it does not apply to
    hostPath and root needs no group)."""
    pod = render({}).pod("DaemonSet")
    container = agent_container(pod)
    assert container["securityContext"] == AGENT_CONTEXT
    assert "securityContext" not in pod or "fsGroup" not in pod["securityContext"]
    mounts, volumes = mounts_of(container), volumes_of(pod)
    assert mounts["pod-resources"] == {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources",
                                       "readOnly": True}
    assert volumes["pod-resources"]["hostPath"] == {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
    assert mounts["state"]["mountPath"] == "/var/lib/gpu-cost-exporter" and not mounts["state"].get("readOnly")


def test_aggregator_stays_non_root() -> None:
    (container,) = render({}).pod("Deployment")["containers"]
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532 and sc["capabilities"] == {"drop": ["ALL"]}


def test_tolerations_cover_every_vendor_the_affinity_selects_and_extra_resources() -> None:
    """NVIDIA, AMD and Gaudi device plugins' taints by default; an extra resource name is tolerated too, once."""
    keys = {t["key"] for t in render({}).pod("DaemonSet")["tolerations"]}
    assert keys == {"nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi"}
    extra = render({"agent": {"extraResourceNames": ["example.com/npu", "amd.com/gpu"]}}).pod("DaemonSet")
    tolerations = extra["tolerations"]
    assert [t["key"] for t in tolerations].count("amd.com/gpu") == 1
    assert {"key": "example.com/npu", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_probes_readiness_is_readyz_liveness_is_healthz() -> None:
    """Ready only while the node can be accounted; a peer's fault never restarts the agent."""
    container = agent_container(render({}).pod("DaemonSet"))
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_a_not_ready_agent_is_still_scraped() -> None:
    """The headless Service publishes not-ready agents, so GPUCostAgentNotReady sees gpucost_agent_ready 0."""
    service = render({}).named("Service", f"{FULL}-agent")
    assert service["spec"]["publishNotReadyAddresses"] is True and service["spec"]["clusterIP"] == "None"
