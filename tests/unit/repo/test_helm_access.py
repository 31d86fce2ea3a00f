"""Who may read costs, as the chart installs it (docs/security.md): access control on by default, the
aggregator may create reviews and nothing more, the viewer/admin ClusterRoles, Prometheus's grant on /metrics
and its bearer token, and a warning when access control is turned off."""

from __future__ import annotations

from typing import Any

from tests.unit.repo.helm_render import FULL, env_of, render

REVIEWS = {("authentication.k8s.io", "tokenreviews", ("create",)),
           ("authorization.k8s.io", "subjectaccessreviews", ("create",))}
COSTS = {"apiGroups": ["gpu-cost-exporter.io"], "resources": ["costs"], "verbs": ["get"]}
METRICS = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}


def _aggregator_rules(values: dict[str, Any]) -> set[tuple[str, str, tuple[str, ...]]]:
    role = render(values).named("ClusterRole", f"{FULL}-aggregator")
    return {(g, res, tuple(rule["verbs"])) for rule in role["rules"] for g in rule["apiGroups"]
            for res in rule["resources"]}


def test_auth_is_on_by_default_in_the_aggregators_env() -> None:
    (agg,) = render({}).pod("Deployment")["containers"]
    env = env_of(agg)
    assert env["GPUCOST_AUTH"] == "kubernetes"
    assert env["GPUCOST_AUTH_CACHE_TTL"] == "10s"
    (off,) = render({"auth": {"mode": "none"}}).pod("Deployment")["containers"]
    assert env_of(off)["GPUCOST_AUTH"] == "none"


def test_aggregator_may_create_reviews_only_when_auth_is_on() -> None:
    """create on tokenreviews and subjectaccessreviews, no other verb on them; nothing of it with auth off."""
    rules = _aggregator_rules({})
    assert rules >= REVIEWS
    assert {r for r in rules if r[0] in ("authentication.k8s.io", "authorization.k8s.io")} == REVIEWS
    assert not REVIEWS & _aggregator_rules({"auth": {"mode": "none"}})


def test_viewer_and_admin_cluster_roles() -> None:
    """<release>-cost-viewer gets costs (bound per namespace); <release>-cost-admin also /metrics; aggregated
    into view/admin only when asked."""
    rendered = render({})
    viewer = rendered.named("ClusterRole", "gce-cost-viewer")
    admin = rendered.named("ClusterRole", "gce-cost-admin")
    assert viewer["rules"] == [COSTS]
    assert admin["rules"] == [COSTS, METRICS]
    assert not any(k.startswith("rbac.authorization.k8s.io/aggregate") for k in viewer["metadata"]["labels"])
    aggregated = render({"auth": {"aggregateToDefaultRoles": True}})
    assert aggregated.named("ClusterRole", "gce-cost-viewer")["metadata"]["labels"][
        "rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert aggregated.named("ClusterRole", "gce-cost-admin")["metadata"]["labels"][
        "rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    off = {r["metadata"]["name"] for r in render({"auth": {"mode": "none"}}).of_kind("ClusterRole")}
    assert not {"gce-cost-viewer", "gce-cost-admin", f"{FULL}-metrics-reader"} & off


def test_prometheus_is_granted_metrics_and_scrapes_with_its_token() -> None:
    """The configured ServiceAccounts may get /metrics; the aggregator's ServiceMonitor sends a bearer token
    file, the agent's does not (the agents' /metrics is not guarded by it)."""
    rendered = render({"monitoring": {"serviceMonitor": {"enabled": True}},
                       "auth": {"metricsReaders": [{"namespace": "obs", "name": "prom"}]}})
    assert rendered.named("ClusterRole", f"{FULL}-metrics-reader")["rules"] == [METRICS]
    binding = rendered.named("ClusterRoleBinding", f"{FULL}-metrics-reader")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prom", "namespace": "obs"}]
    assert binding["roleRef"]["name"] == f"{FULL}-metrics-reader"
    (agg_ep,) = rendered.named("ServiceMonitor", f"{FULL}-aggregator")["spec"]["endpoints"]
    assert agg_ep["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    (agent_ep,) = rendered.named("ServiceMonitor", f"{FULL}-agent")["spec"]["endpoints"]
    assert "bearerTokenFile" not in agent_ep
    off = render({"monitoring": {"serviceMonitor": {"enabled": True}}, "auth": {"mode": "none"}})
    (plain,) = off.named("ServiceMonitor", f"{FULL}-aggregator")["spec"]["endpoints"]
    assert "bearerTokenFile" not in plain


def test_turning_auth_off_warns_in_the_notes() -> None:
    assert "WARNING: auth.mode=none" in render({"auth": {"mode": "none"}}).notes
    notes = render({}).notes
    assert "WARNING: auth.mode" not in notes
    assert "Authorization: Bearer" in notes and "gce-cost-viewer" in notes


def test_oidc_issuer_reaches_the_aggregator_only_when_set() -> None:
    (agg,) = render({"auth": {"oidc": {"issuer": "https://login.example.com", "audience": "gce"}}}).pod(
        "Deployment")["containers"]
    env = env_of(agg)
    assert env["GPUCOST_OIDC_ISSUER"] == "https://login.example.com" and env["GPUCOST_OIDC_AUDIENCE"] == "gce"
    assert env["GPUCOST_OIDC_USERNAME_CLAIM"] == "sub" and env["GPUCOST_OIDC_GROUPS_CLAIM"] == "groups"
    (plain,) = render({}).pod("Deployment")["containers"]
    assert not any(k.startswith("GPUCOST_OIDC") for k in env_of(plain))
