"""The agent's grants for shared GPUs (MPS, HAMi) and DRA: each behind its value, read-only, no more
than the agent's API calls need (``exporter/agent/kubeinfo.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.repo.helm_render import FULL, render

OFF = {"watchPods": False, "sharing": {"enabled": False}, "dra": {"enabled": False}}


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
