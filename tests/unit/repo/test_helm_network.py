"""The Helm chart's NetworkPolicies, scoped agent discovery, RBAC, container hardening and values schema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import yaml

from tests.unit.repo.helm_render import (
    CERT_MANAGER,
    CHART,
    FULL,
    NAMESPACE,
    WORKLOADS,
    containers_of,
    env_of,
    merge,
    render,
)

# -- NetworkPolicies -------------------------------------------------------------------------------------

def _only_rule(policy: dict[str, Any]) -> dict[str, Any]:
    (rule,) = policy["spec"]["ingress"]
    return dict(rule)


def test_network_policies_are_on_by_default_with_the_expected_peers() -> None:
    """Agents: port 9500 from this release's aggregator pods and from Prometheus only. Aggregator: port 9501
    from Prometheus only. Both select exactly their own pods; egress is not restricted."""
    rendered = render({})
    agent_labels = rendered.of_kind("DaemonSet")[0]["spec"]["template"]["metadata"]["labels"]
    aggregator_labels = rendered.of_kind("Deployment")[0]["spec"]["template"]["metadata"]["labels"]
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}

    agent = rendered.named("NetworkPolicy", f"{FULL}-agent")
    assert agent["spec"]["podSelector"] == {"matchLabels": agent_labels}
    assert agent["spec"]["policyTypes"] == ["Ingress"]
    assert _only_rule(agent) == {"from": [{"podSelector": {"matchLabels": aggregator_labels}}, prometheus],
                                 "ports": [{"port": 9500, "protocol": "TCP"}]}

    aggregator = rendered.named("NetworkPolicy", f"{FULL}-aggregator")
    assert aggregator["spec"]["podSelector"] == {"matchLabels": aggregator_labels}
    assert aggregator["spec"]["policyTypes"] == ["Ingress"]
    assert _only_rule(aggregator) == {"from": [prometheus], "ports": [{"port": 9501, "protocol": "TCP"}]}


def test_network_policy_peers_and_egress_are_configurable() -> None:
    """Prometheus' selectors, the aggregator's extra peers (KEDA) and egress rules come from values."""
    keda = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}},
            "podSelector": {"matchLabels": {"app": "keda-operator"}}}
    dns = [{"to": [{"namespaceSelector": {}}], "ports": [{"port": 53, "protocol": "UDP"}]}]
    # Helm merges maps into the defaults; null drops a default (as docs/security.md says).
    prom_values = {"namespaceSelector": {"matchLabels": None, "matchExpressions": [
        {"key": "team", "operator": "In", "values": ["obs"]}]},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": None, "app": "vmagent"}}}
    prom = {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["obs"]}]},
            "podSelector": {"matchLabels": {"app": "vmagent"}}}
    rendered = render({"networkPolicy": {"prometheus": prom_values,
                                          "aggregator": {"extraFrom": [keda], "egress": dns}}})
    aggregator = rendered.named("NetworkPolicy", f"{FULL}-aggregator")
    assert _only_rule(aggregator)["from"] == [prom, keda]
    assert aggregator["spec"]["policyTypes"] == ["Ingress", "Egress"] and aggregator["spec"]["egress"] == dns
    agent = rendered.named("NetworkPolicy", f"{FULL}-agent")
    assert _only_rule(agent)["from"][1] == prom and agent["spec"]["policyTypes"] == ["Ingress"]
    assert "NetworkPolicy" not in {d["kind"] for d in render({"networkPolicy": {"enabled": False}}).docs}


# -- discovery scope and the agent's pod watch ------------------------------------------------------------

@pytest.mark.parametrize(("release", "values"), [("gce", {}), ("prod", {"nameOverride": "gpucost"}),
                                                 ("x", {"fullnameOverride": "costs"})])
def test_aggregator_discovers_only_this_releases_agents_in_its_namespace(release: str,
                                                                         values: dict[str, Any]) -> None:
    """GPUCOST_AGENT_NAMESPACE is the release namespace and GPUCOST_AGENT_SELECTOR is exactly the DaemonSet's
    selector, which equals its pod labels."""
    rendered = render(values, release=release)
    env = env_of(rendered.pod("Deployment")["containers"][0])
    assert env["GPUCOST_AGENT_NAMESPACE"] == NAMESPACE
    selector = dict(term.split("=", 1) for term in env["GPUCOST_AGENT_SELECTOR"].split(","))
    (ds,) = rendered.of_kind("DaemonSet")
    assert selector == ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
    assert selector["app.kubernetes.io/instance"] == release and selector["app.kubernetes.io/component"] == "agent"


def test_agent_pod_watch_is_on_by_default_with_read_only_pod_rbac() -> None:
    """GPUCOST_WATCH_PODS=true, the ServiceAccount token mounted, and one ClusterRole: get/list/watch pods
    (beside the sharing and DRA grants, see test_helm_sharing_rbac.py); with every API read off, no role."""
    rendered = render({})
    pod = rendered.pod("DaemonSet")
    assert env_of(pod["containers"][0])["GPUCOST_WATCH_PODS"] == "true" and pod["automountServiceAccountToken"] is True
    role = rendered.named("ClusterRole", f"{FULL}-agent")
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]} in role["rules"]
    binding = rendered.named("ClusterRoleBinding", f"{FULL}-agent")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": f"{FULL}-agent", "namespace": NAMESPACE}]
    off = render({"agent": {"watchPods": False, "sharing": {"enabled": False}, "dra": {"enabled": False},
                            "dcgm": {"mode": "hostIP"}}})  # discover lists exporter pods through the API
    assert "GPUCOST_WATCH_PODS" not in env_of(off.pod("DaemonSet")["containers"][0])
    assert off.pod("DaemonSet")["automountServiceAccountToken"] is False
    assert f"{FULL}-agent" not in {r["metadata"]["name"] for r in off.of_kind("ClusterRole")}


def test_aggregator_may_read_every_kind_it_watches() -> None:
    """The aggregator's ClusterRole covers each kind its watcher lists: the five core kinds, the GPU
    queue kinds and the DRA kinds (a refused watch never syncs, and an unsynced aggregator never reports
    ready)."""
    from exporter.clients.kube import CORE_KINDS, DRA_KINDS, QUEUE_KINDS

    role = render({}).named("ClusterRole", f"{FULL}-aggregator")
    granted = {(group, resource) for rule in role["rules"] if {"get", "list", "watch"} <= set(rule["verbs"])
               for group in rule["apiGroups"] for resource in rule["resources"]}
    watched = {(spec.group or "", spec.plural or spec.kind) for spec in CORE_KINDS + QUEUE_KINDS + DRA_KINDS}
    assert watched == granted


def test_no_role_reads_secrets_or_writes_outside_the_lease() -> None:
    """Every rule is get/list/watch, except get/create/update on Leases for HA and create on token and access
    reviews (who may read costs); nothing grants Secrets (Helm's lookup runs with the installer's credentials,
    not the daemons')."""
    rendered = render(CERT_MANAGER | {"aggregator": {"replicas": 2}})
    roles = rendered.of_kind("ClusterRole") + rendered.of_kind("Role")
    assert len(roles) == 6  # aggregator, agent, lease; cost-viewer, cost-admin, metrics-reader
    for role in roles:
        for rule in role["rules"]:
            resources = rule.get("resources", rule.get("nonResourceURLs"))
            assert "secrets" not in resources and "*" not in resources + rule["verbs"]
            allowed = ({"get", "create", "update"} if resources == ["leases"] else {"create"}
                       if resources in (["tokenreviews"], ["subjectaccessreviews"]) else {"get", "list", "watch"})
            assert set(rule["verbs"]) <= allowed, role["metadata"]["name"]


# -- TLS -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("values", [{}, CERT_MANAGER, {"aggregator": {"replicas": 3}},
                                    {"agentAuth": {"enabled": False}},
                                    {"agent": {"nvml": {"enabled": True}, "watchPods": False}}],
                         ids=["defaults", "tls", "ha", "auth-off", "nvml"])
def test_every_container_is_non_root_read_only_without_capabilities(values: dict[str, Any]) -> None:
    """Each container of each workload: read-only root filesystem, no privilege escalation, every capability
    dropped and none added; a non-root UID, except the agent's UID 0, which connecting to the kubelet's root-owned
    pod-resources socket needs (docs/security.md; without capabilities it is no more than any other UID there)."""
    rendered = render(values)
    seen = 0
    for kind in WORKLOADS:
        for workload in rendered.of_kind(kind):
            for container in containers_of(workload["spec"]["template"]["spec"]):
                sc = container["securityContext"]
                if container["name"] == "agent":
                    assert sc["runAsUser"] == 0 and sc["runAsNonRoot"] is False
                else:
                    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0, container["name"]
                assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
                assert sc["capabilities"] == {"drop": ["ALL"]} and "privileged" not in sc
                seen += 1
    assert seen == 2


# -- values schema -----------------------------------------------------------------------------------------

def _schema() -> dict[str, Any]:
    return dict(json.loads((CHART / "values.schema.json").read_text()))


@pytest.mark.parametrize("values", [
    {"agentAuth": {"existingSecret": "x", "secretKey": "k", "enabled": True}},
    CERT_MANAGER,
    {"networkPolicy": {"aggregator": {"extraFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}}},
])
def test_schema_accepts_the_new_keys(values: dict[str, Any]) -> None:
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    chart = helm.Chart.load(str(CHART))
    try:
        chart.validate_schema(chart.merge_values(values))
    finally:
        chart.close()


@pytest.mark.parametrize("values", [
    {"agentAuth": {"enabeld": False}},
    {"agentAuth": {"enabled": "no"}},
    {"agent": {"tls": {"enabled": True, "certFile": "x"}}},
    {"agent": {"tls": {"certManager": {"issuerRef": {"kind": "Vault"}}}}},
    {"networkPolicy": {"prometheusNamespaceSelector": {"name": "monitoring"}}},
    {"networkPolicy": {"prometheus": {"podSelector": {"app": "prometheus"}}}},
    {"networkPolicy": {"aggregator": {"extraFrom": [{}]}}},
], ids=["typo", "type", "tls-unknown", "issuer-kind", "old-key", "selector-without-matchLabels", "empty-peer"])
def test_schema_rejects_unknown_keys_and_wrong_shapes(values: dict[str, Any]) -> None:
    """Unknown keys, wrong types and selectors that are not label selectors are refused."""
    merged = merge(yaml.safe_load((CHART / "values.yaml").read_text()), values)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(merged, _schema())
