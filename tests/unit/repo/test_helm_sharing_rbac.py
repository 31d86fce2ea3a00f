"""The agent's grants for shared GPUs (MPS, HAMi) and DRA: each behind its value, read-only, no more
than the agent's API calls need (``exporter/agent/kubeinfo.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.repo.helm_render import FULL, render

#: Every API read off, the exporter read at the node's IP (discovery, the default, lists pods).
OFF = {"watchPods": False, "sharing": {"enabled": False}, "dra": {"enabled": False}, "dcgm": {"mode": "hostIP"}}


def rules_of(values: dict[str, Any]) -> set[tuple[str, str, tuple[str, ...]]]:
    """(group, resource, verbs) of the agent's ClusterRole; empty when it is not rendered."""
    roles = [r for r in render(values).of_kind("ClusterRole") if r["metadata"]["name"] == f"{FULL}-agent"]
    return {(g, res, tuple(rule["verbs"])) for role in roles for rule in role["rules"]
            for g in rule["apiGroups"] for res in rule["resources"]}


def test_default_agent_role_is_pod_watch_node_get_slices_list_and_claims_get() -> None:
    """By default: the pod watch, get on nodes (MPS label, GPU memory), list on ResourceSlices and get on
    ResourceClaims, and nothing else (no list of nodes, no watch of slices, no claims list)."""
    assert rules_of({}) == {
        ("", "pods", ("get", "list", "watch")),
        ("", "nodes", ("get",)),
        ("resource.k8s.io", "resourceslices", ("list",)),
        ("resource.k8s.io", "resourceclaims", ("get",)),
    }


def test_dra_grant_only_when_dra_is_enabled() -> None:
    assert not any(g == "resource.k8s.io" for g, _r, _v in rules_of({"agent": {"dra": {"enabled": False}}}))
    only_dra = rules_of({"agent": OFF | {"dra": {"enabled": True}}})
    assert only_dra == {("resource.k8s.io", "resourceslices", ("list",)),
                        ("resource.k8s.io", "resourceclaims", ("get",))}


def test_sharing_without_the_pod_watch_gets_single_pods_and_nodes_only() -> None:
    """HAMi annotations are read by one GET per pod when the watch is off: get on pods, not list/watch."""
    assert rules_of({"agent": OFF | {"sharing": {"enabled": True}}}) == {
        ("", "pods", ("get",)), ("", "nodes", ("get",))}


@pytest.mark.parametrize("on", ["watchPods", "sharing", "dra"])
def test_token_is_mounted_exactly_when_some_grant_needs_it(on: str) -> None:
    values: dict[str, Any] = dict(OFF)
    values[on] = True if on == "watchPods" else {"enabled": True}
    assert render({"agent": values}).pod("DaemonSet")["automountServiceAccountToken"] is True
    off = render({"agent": OFF})
    assert off.pod("DaemonSet")["automountServiceAccountToken"] is False
    assert f"{FULL}-agent" not in {r["metadata"]["name"] for r in off.of_kind("ClusterRole")}
    assert f"{FULL}-agent" not in {r["metadata"]["name"] for r in off.of_kind("ClusterRoleBinding")}


def test_aggregator_reads_claims_and_slices_whatever_the_agent_values() -> None:
    """The aggregator watches claims and slices wherever the API serves them, so its grant is unconditional."""
    role = render({"agent": OFF}).named("ClusterRole", f"{FULL}-aggregator")
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceslices"],
            "verbs": ["get", "list", "watch"]} in role["rules"]


def test_agent_and_aggregator_dra_roles_validate_as_kubernetes_objects() -> None:
    """The rendered roles are valid RBAC objects (kubernetes-validate, 1.33 schemas, strict)."""
    import kubernetes_validate

    rendered = render({})
    for role in rendered.of_kind("ClusterRole") + rendered.of_kind("ClusterRoleBinding"):
        kubernetes_validate.validate(role, "1.33", strict=True)


def _agent_pod(values: dict[str, Any]) -> dict[str, Any]:
    (ds,) = render(values).of_kind("DaemonSet")
    return dict(ds["spec"]["template"]["spec"])


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in _agent_pod(values)["containers"][0]["env"]}


def test_agent_scrapes_every_vendors_exporter_port_and_runs_on_every_vendors_gpu_nodes() -> None:
    """One DaemonSet for NVIDIA, AMD and Gaudi nodes: DCGM Exporter (9400), device-metrics-exporter (5000) and
    gaudi-metric-exporter (41611) on the node's IP (mode hostIP), tried in that order; node affinity selects a
    node labelled as a GPU node by any vendor's discovery."""
    assert _env({"agent": {"dcgm": {"mode": "hostIP"}}})["GPUCOST_DCGM_URL"] == ("http://$(HOST_IP):9400/metrics,http://$(HOST_IP):5000/metrics,"
                                            "http://$(HOST_IP):41611/metrics")
    terms = _agent_pod({})["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert [t["matchExpressions"] for t in terms] == [
        [{"key": k, "operator": "In", "values": ["true"]}]
        for k in ("nvidia.com/gpu.present", "feature.node.kubernetes.io/amd-gpu",
                  "feature.node.kubernetes.io/pci-1da3.present")]
    assert "nodeSelector" not in _agent_pod({})


def test_vendor_ports_and_hami_monitor_are_values() -> None:
    """A port of 0 is not tried; HAMi's monitor URL (port 9394) is set only when enabled."""
    env = _env({"agent": {"vendorExporters": {"gaudiPort": 0, "amdPort": 5001}, "hamiMonitor": {"enabled": True},
                          "dcgm": {"mode": "hostIP"}}})
    assert env["GPUCOST_DCGM_URL"] == "http://$(HOST_IP):9400/metrics,http://$(HOST_IP):5001/metrics"
    assert env["GPUCOST_HAMI_MONITOR_URL"] == "http://$(HOST_IP):9394/metrics"
    assert "GPUCOST_HAMI_MONITOR_URL" not in _env({})
