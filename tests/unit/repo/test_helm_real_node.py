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


def agent_rules(values: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = render(values)
    role = rendered.named("ClusterRole", f"{FULL}-agent")
    return role["rules"]  # type: ignore[no-any-return]


def test_default_mode_discovers_the_exporter_pod_with_each_upstream_installs_labels() -> None:
    """Discover by default: the GPU Operator's, the dcgm-exporter chart's, AMD's and Gaudi's labels and ports;
    no node-IP URL (no upstream install answers there); the API reachable (token mounted)."""
    pod = render({}).pod("DaemonSet")
    env = {e["name"]: e.get("value") for e in agent_container(pod)["env"]}
    assert env["GPUCOST_EXPORTER_MODE"] == "discover" and "GPUCOST_DCGM_URL" not in env
    assert env["GPUCOST_EXPORTER_SELECTORS"].split(";") == [
        "app=nvidia-dcgm-exporter@9400", "app=nvidia-dcgm-exporter-dra@9400",
        "app.kubernetes.io/name=dcgm-exporter@9400", "app.kubernetes.io/name=metrics-exporter@5000",
        "app=metric-exporter-ds@41611", "app=habana-metric-exporter-ds@41611"]
    assert "GPUCOST_EXPORTER_TOKEN_FILE" not in env  # no https selector: the token goes nowhere
    assert pod["automountServiceAccountToken"] is True


def test_discovery_rbac_is_list_on_pods_and_nothing_more() -> None:
    """With every other API read off, discovery alone grants list on pods: no get, no watch, no other kind."""
    off = {"watchPods": False, "sharing": {"enabled": False}, "dra": {"enabled": False}}
    assert agent_rules({"agent": off}) == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    at_node_ip = render({"agent": {**off, "dcgm": {"mode": "hostIP"}}})
    assert f"{FULL}-agent" not in {d["metadata"]["name"] for d in at_node_ip.of_kind("ClusterRole")}
    assert at_node_ip.pod("DaemonSet")["automountServiceAccountToken"] is False
    pods = [r for r in agent_rules({}) if r["resources"] == ["pods"]]
    assert pods == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]


def test_https_exporter_selector_sends_the_service_account_token() -> None:
    values = {"agent": {"dcgm": {"selectors": [{"labels": "app.kubernetes.io/name=metrics-exporter", "port": 5000,
                                                "scheme": "https"}]}}}
    env = {e["name"]: e.get("value") for e in agent_container(render(values).pod("DaemonSet"))["env"]}
    assert env["GPUCOST_EXPORTER_SELECTORS"] == "app.kubernetes.io/name=metrics-exporter@5000/https"
    assert env["GPUCOST_EXPORTER_TOKEN_FILE"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
