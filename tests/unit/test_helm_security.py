"""The chart's default install is secure: agent token, NetworkPolicies, scoped discovery, TLS on one value.

Every test renders the chart with Helm itself (helm-python-sdk) and reads the objects it would apply.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import REPO

CHART = REPO / "helm" / "gpu-cost-exporter"
NAMESPACE = "gpu-cost-exporter"
FULL = "gce-gpu-cost-exporter"  # release "gce" + chart name
TOKEN_SECRET = f"{FULL}-agent-token"
TOKEN_DIR = "/var/run/gpu-cost-exporter/agent-token"
TLS_DIR = "/var/run/gpu-cost-exporter/agent-tls"
WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet")
CERT_MANAGER = {"agent": {"tls": {"enabled": True, "certManager": {
    "enabled": True, "issuerRef": {"name": "internal-ca", "kind": "ClusterIssuer"}}}},
    "monitoring": {"serviceMonitor": {"enabled": True}}}


@dataclass(frozen=True)
class Rendered:
    """One `helm template` result: NOTES.txt and every object, in render order."""

    notes: str
    docs: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def named(self, kind: str, name: str) -> dict[str, Any]:
        found = [d for d in self.of_kind(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in self.of_kind(kind)])
        return found[0]

    def pod(self, kind: str) -> dict[str, Any]:
        """The pod spec of the only workload of this kind."""
        (workload,) = self.of_kind(kind)
        spec: dict[str, Any] = workload["spec"]["template"]["spec"]
        return spec


def _parse(out: dict[str, str]) -> Rendered:
    notes = next(text for path, text in out.items() if path.endswith("NOTES.txt"))
    docs = [d for path, text in out.items() if not path.endswith("NOTES.txt") for d in yaml.safe_load_all(text) if d]
    return Rendered(notes=notes, docs=docs)


def _render(values: dict[str, Any], *, release: str = "gce") -> Rendered:
    """Offline render (Helm's lookup finds nothing, as with `helm template`)."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    chart = helm.Chart.load(str(CHART))
    try:
        return _parse(chart.render(values, name=release, namespace=NAMESPACE, is_install=True))
    finally:
        chart.close()


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in container.get("volumeMounts", [])}


def _volumes(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in pod.get("volumes", [])}


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _token(rendered: Rendered) -> str:
    secret = rendered.named("Secret", TOKEN_SECRET)
    return base64.b64decode(secret["data"]["token"]).decode()


# -- the bearer token ------------------------------------------------------------------------------------

def test_default_install_generates_a_48_character_token_secret() -> None:
    """No values needed: the chart generates the token (randAlphaNum 48) in a Secret of its own."""
    rendered = _render({})
    secret = rendered.named("Secret", TOKEN_SECRET)
    assert set(secret["data"]) == {"token"} and "stringData" not in secret
    assert re.fullmatch(r"[A-Za-z0-9]{48}", _token(rendered))


@pytest.mark.parametrize(("values", "aggregator_kind"), [({}, "Deployment"), ({"aggregator": {"replicas": 3}},
                                                                               "StatefulSet")])
def test_both_daemons_mount_the_token_read_only_and_point_their_setting_at_the_file(
        values: dict[str, Any], aggregator_kind: str) -> None:
    """The agent's GPUCOST_USAGE_TOKEN_FILE and the aggregator's GPUCOST_AGENT_TOKEN_FILE name the same file
    of the same Secret, mounted read-only as a whole volume (no subPath, so kubelet updates it in place)."""
    rendered = _render(values)
    for kind, setting in (("DaemonSet", "GPUCOST_USAGE_TOKEN_FILE"), (aggregator_kind, "GPUCOST_AGENT_TOKEN_FILE")):
        pod = rendered.pod(kind)
        (container,) = pod["containers"]
        mount = _mounts(container)["agent-token"]
        assert mount["mountPath"] == TOKEN_DIR and mount["readOnly"] is True and "subPath" not in mount, kind
        assert _env(container)[setting] == f"{TOKEN_DIR}/token", kind
        secret = _volumes(pod)["agent-token"]["secret"]
        assert secret["secretName"] == TOKEN_SECRET and secret["items"] == [{"key": "token", "path": "token"}]
        assert secret["defaultMode"] == 0o440, kind


def test_token_is_never_in_an_env_value_an_arg_or_any_other_object() -> None:
    """The token reaches the daemons only as a file: no env value, arg, secretKeyRef or envFrom carries it,
    and no object but its Secret contains it (plain or base64)."""
    rendered = _render(CERT_MANAGER | {"aggregator": {"replicas": 2}})
    token = _token(rendered)
    secret = rendered.named("Secret", TOKEN_SECRET)
    for doc in rendered.docs:
        if doc is not secret:
            text = json.dumps(doc)
            assert token not in text and base64.b64encode(token.encode()).decode() not in text, doc["kind"]
    assert token not in rendered.notes
    for kind in WORKLOADS:
        for workload in rendered.of_kind(kind):
            for container in _containers(workload["spec"]["template"]["spec"]):
                assert "envFrom" not in container
                assert all("secretKeyRef" not in e.get("valueFrom", {}) for e in container["env"]), kind
                assert token not in json.dumps(container.get("args", [])), kind


def test_auth_disabled_removes_secret_mounts_and_settings_and_warns() -> None:
    """`agentAuth.enabled=false` is the only way off, and it is loud: NOTES warns."""
    rendered = _render({"agentAuth": {"enabled": False}})
    assert not [s for s in rendered.of_kind("Secret") if "token" in s["metadata"]["name"]]
    for kind in ("DaemonSet", "Deployment"):
        pod = rendered.pod(kind)
        assert "agent-token" not in _volumes(pod) and "agent-token" not in _mounts(pod["containers"][0]), kind
        assert not {"GPUCOST_USAGE_TOKEN_FILE", "GPUCOST_AGENT_TOKEN_FILE"} & set(_env(pod["containers"][0])), kind
    assert "WARNING: agentAuth.enabled=false" in rendered.notes
    assert "WARNING: agentAuth" not in _render({}).notes


def test_existing_secret_is_used_by_name_and_no_secret_is_rendered() -> None:
    """`agentAuth.existingSecret` (and its key) replace the chart's Secret; the file name stays `token`."""
    rendered = _render({"agentAuth": {"existingSecret": "vault-agent-token", "secretKey": "bearer"}})
    assert not [s for s in rendered.of_kind("Secret") if "token" in s["metadata"]["name"]]
    for kind in ("DaemonSet", "Deployment"):
        secret = _volumes(rendered.pod(kind))["agent-token"]["secret"]
        assert secret["secretName"] == "vault-agent-token", kind
        assert secret["items"] == [{"key": "bearer", "path": "token"}], kind


class _SecretApi(BaseHTTPRequestHandler):
    """The two requests Helm's `lookup "v1" "Secret"` makes: core discovery, then GET of the object."""

    stored: dict[str, dict[str, Any]] = {}  # Secret name -> object; set per test before serving

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        prefix = f"/api/v1/namespaces/{NAMESPACE}/secrets/"
        body: dict[str, Any] | None = None
        if path == "/api/v1":
            body = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [
                {"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret",
                 "verbs": ["get", "list"]}]}
        elif path.startswith(prefix):
            body = self.stored.get(path.removeprefix(prefix))
        if body is None:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                             "code": 404})
        else:
            self._send(200, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the results, not the access log."""


@pytest.fixture(name="secret_api")
def _secret_api() -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    """A real HTTP server answering Helm's lookup; yields its kubeconfig and its Secret store."""
    stored: dict[str, dict[str, Any]] = {}
    handler = type("Handler", (_SecretApi,), {"stored": stored})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "test", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test", "namespace": NAMESPACE}}],
    })
    try:
        yield kubeconfig, stored
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _render_against(kubeconfig: str) -> Rendered:
    """Cluster-aware render, as `helm upgrade` does it: `lookup` asks the API server."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    chart = helm.Chart.load(str(CHART))
    try:
        with helm.Config(kubeconfig_content=kubeconfig, namespace=NAMESPACE) as cfg:
            return _parse(cfg.render(chart, {}, name="gce", namespace=NAMESPACE, is_upgrade=True))
    finally:
        chart.close()


def test_upgrade_keeps_the_token_already_in_the_cluster(secret_api: tuple[str, dict[str, dict[str, Any]]]) -> None:
    """With the Secret in the cluster, two upgrades render its token unchanged; without it, each render
    generates a new one, so `lookup` is what keeps the token stable."""
    kubeconfig, stored = secret_api
    assert _token(_render_against(kubeconfig)) != _token(_render_against(kubeconfig))
    kept = "a" * 40 + "rotated1"
    stored[TOKEN_SECRET] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": TOKEN_SECRET,
                                                                                "namespace": NAMESPACE},
                            "data": {"token": base64.b64encode(kept.encode()).decode()}}
    assert _token(_render_against(kubeconfig)) == kept
    assert _token(_render_against(kubeconfig)) == kept


# -- NetworkPolicies -------------------------------------------------------------------------------------

def _only_rule(policy: dict[str, Any]) -> dict[str, Any]:
    (rule,) = policy["spec"]["ingress"]
    return dict(rule)


def test_network_policies_are_on_by_default_with_the_expected_peers() -> None:
    """Agents: port 9500 from this release's aggregator pods and from Prometheus only. Aggregator: port 9501
    from Prometheus only. Both select exactly their own pods; egress is not restricted."""
    rendered = _render({})
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
    # Helm merges maps into the defaults; null drops a default (as the README says).
    prom_values = {"namespaceSelector": {"matchLabels": None, "matchExpressions": [
        {"key": "team", "operator": "In", "values": ["obs"]}]},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": None, "app": "vmagent"}}}
    prom = {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["obs"]}]},
            "podSelector": {"matchLabels": {"app": "vmagent"}}}
    rendered = _render({"networkPolicy": {"prometheus": prom_values,
                                          "aggregator": {"extraFrom": [keda], "egress": dns}}})
    aggregator = rendered.named("NetworkPolicy", f"{FULL}-aggregator")
    assert _only_rule(aggregator)["from"] == [prom, keda]
    assert aggregator["spec"]["policyTypes"] == ["Ingress", "Egress"] and aggregator["spec"]["egress"] == dns
    agent = rendered.named("NetworkPolicy", f"{FULL}-agent")
    assert _only_rule(agent)["from"][1] == prom and agent["spec"]["policyTypes"] == ["Ingress"]
    assert "NetworkPolicy" not in {d["kind"] for d in _render({"networkPolicy": {"enabled": False}}).docs}


# -- discovery scope and the agent's pod watch ------------------------------------------------------------

@pytest.mark.parametrize(("release", "values"), [("gce", {}), ("prod", {"nameOverride": "gpucost"}),
                                                 ("x", {"fullnameOverride": "costs"})])
def test_aggregator_discovers_only_this_releases_agents_in_its_namespace(release: str,
                                                                         values: dict[str, Any]) -> None:
    """GPUCOST_AGENT_NAMESPACE is the release namespace and GPUCOST_AGENT_SELECTOR is exactly the DaemonSet's
    selector, which equals its pod labels."""
    rendered = _render(values, release=release)
    env = _env(rendered.pod("Deployment")["containers"][0])
    assert env["GPUCOST_AGENT_NAMESPACE"] == NAMESPACE
    selector = dict(term.split("=", 1) for term in env["GPUCOST_AGENT_SELECTOR"].split(","))
    (ds,) = rendered.of_kind("DaemonSet")
    assert selector == ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
    assert selector["app.kubernetes.io/instance"] == release and selector["app.kubernetes.io/component"] == "agent"


def test_agent_pod_watch_is_on_by_default_with_read_only_pod_rbac() -> None:
    """GPUCOST_WATCH_PODS=true, the ServiceAccount token mounted, and one ClusterRole: get/list/watch pods."""
    rendered = _render({})
    pod = rendered.pod("DaemonSet")
    assert _env(pod["containers"][0])["GPUCOST_WATCH_PODS"] == "true" and pod["automountServiceAccountToken"] is True
    role = rendered.named("ClusterRole", f"{FULL}-agent")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    binding = rendered.named("ClusterRoleBinding", f"{FULL}-agent")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": f"{FULL}-agent", "namespace": NAMESPACE}]
    off = _render({"agent": {"watchPods": False}})
    assert "GPUCOST_WATCH_PODS" not in _env(off.pod("DaemonSet")["containers"][0])
    assert off.pod("DaemonSet")["automountServiceAccountToken"] is False
    assert f"{FULL}-agent" not in {r["metadata"]["name"] for r in off.of_kind("ClusterRole")}


def test_no_role_reads_secrets_or_writes_outside_the_lease() -> None:
    """Every rule is get/list/watch, except get/create/update on Leases for HA; nothing grants Secrets
    (Helm's lookup runs with the installer's credentials, not the daemons')."""
    rendered = _render(CERT_MANAGER | {"aggregator": {"replicas": 2}})
    roles = rendered.of_kind("ClusterRole") + rendered.of_kind("Role")
    assert len(roles) == 3
    for role in roles:
        for rule in role["rules"]:
            assert "secrets" not in rule["resources"] and "*" not in rule["resources"] + rule["verbs"]
            allowed = {"get", "create", "update"} if rule["resources"] == ["leases"] else {"get", "list", "watch"}
            assert set(rule["verbs"]) <= allowed, role["metadata"]["name"]


# -- TLS -------------------------------------------------------------------------------------------------

def test_tls_with_cert_manager_renders_certificate_mounts_and_https() -> None:
    """One value family turns TLS on: a Certificate, cert and key into the agent only, the CA only into the
    aggregator, https scheme for the aggregator's pulls, the probes and the ServiceMonitor."""
    rendered = _render(CERT_MANAGER)
    server_name = f"{FULL}-agent.{NAMESPACE}.svc"
    (cert,) = rendered.of_kind("Certificate")
    assert cert["apiVersion"] == "cert-manager.io/v1" and cert["spec"]["secretName"] == f"{FULL}-agent-tls"
    assert cert["spec"]["issuerRef"] == {"name": "internal-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert cert["spec"]["dnsNames"] == [server_name, f"{FULL}-agent", f"{server_name}.cluster.local"]
    custom = _render(_merge(CERT_MANAGER, {"agent": {"tls": {"serverName": "agents.gpu.internal"}}}))
    assert custom.of_kind("Certificate")[0]["spec"]["dnsNames"][0] == "agents.gpu.internal"
    assert _env(custom.pod("Deployment")["containers"][0])["GPUCOST_AGENT_TLS_SERVER_NAME"] == "agents.gpu.internal"

    agent_pod = rendered.pod("DaemonSet")
    agent = agent_pod["containers"][0]
    assert _mounts(agent)["agent-tls"] == {"name": "agent-tls", "mountPath": TLS_DIR, "readOnly": True}
    assert _volumes(agent_pod)["agent-tls"]["secret"]["items"] == [{"key": "tls.crt", "path": "tls.crt"},
                                                                   {"key": "tls.key", "path": "tls.key"}]
    assert _env(agent)["GPUCOST_TLS_CERT_FILE"] == f"{TLS_DIR}/tls.crt"
    assert _env(agent)["GPUCOST_TLS_KEY_FILE"] == f"{TLS_DIR}/tls.key"
    assert agent["livenessProbe"]["httpGet"]["scheme"] == agent["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"

    agg_pod = rendered.pod("Deployment")
    agg = agg_pod["containers"][0]
    assert _volumes(agg_pod)["agent-ca"]["secret"] == {"secretName": f"{FULL}-agent-tls", "defaultMode": 0o440,
                                                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert _mounts(agg)["agent-ca"]["readOnly"] is True
    env = _env(agg)
    assert env["GPUCOST_AGENT_SCHEME"] == "https" and env["GPUCOST_AGENT_CA_FILE"] == f"{TLS_DIR}/ca.crt"
    assert env["GPUCOST_AGENT_TLS_SERVER_NAME"] == server_name
    assert not {"GPUCOST_TLS_CERT_FILE", "GPUCOST_TLS_KEY_FILE"} & set(env)

    monitor = rendered.named("ServiceMonitor", f"{FULL}-agent")["spec"]["endpoints"][0]
    assert monitor["scheme"] == "https" and monitor["tlsConfig"]["serverName"] == server_name
    assert "scheme" not in rendered.named("ServiceMonitor", f"{FULL}-aggregator")["spec"]["endpoints"][0]


def test_tls_is_off_by_default_and_an_existing_secret_needs_no_cert_manager() -> None:
    """Default: plain HTTP, no Certificate. `agent.tls.secretName`: that Secret, still no Certificate."""
    default = _render({})
    assert not default.of_kind("Certificate")
    assert "GPUCOST_AGENT_SCHEME" not in _env(default.pod("Deployment")["containers"][0])
    rendered = _render({"agent": {"tls": {"enabled": True, "secretName": "agent-certs", "caKey": "bundle.pem"}}})
    assert not rendered.of_kind("Certificate")
    assert _volumes(rendered.pod("DaemonSet"))["agent-tls"]["secret"]["secretName"] == "agent-certs"
    ca = _volumes(rendered.pod("Deployment"))["agent-ca"]["secret"]
    assert ca["secretName"] == "agent-certs" and ca["items"] == [{"key": "bundle.pem", "path": "ca.crt"}]


def test_tls_without_cert_material_fails_with_a_clear_message() -> None:
    """TLS on with neither a Secret nor cert-manager is refused at render time, naming the values."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    with pytest.raises(helm.HelmError, match=re.escape("agent.tls.secretName or agent.tls.certManager.enabled")):
        _render({"agent": {"tls": {"enabled": True}}})
    with pytest.raises(helm.HelmError, match=re.escape("issuerRef.name is required")):
        _render({"agent": {"tls": {"enabled": True, "certManager": {"enabled": True}}}})


# -- every container, every variant ------------------------------------------------------------------------

@pytest.mark.parametrize("values", [{}, CERT_MANAGER, {"aggregator": {"replicas": 3}},
                                    {"agentAuth": {"enabled": False}},
                                    {"agent": {"nvml": {"enabled": True}, "watchPods": False}}],
                         ids=["defaults", "tls", "ha", "auth-off", "nvml"])
def test_every_container_is_non_root_read_only_without_capabilities(values: dict[str, Any]) -> None:
    """Each container of each workload: non-root UID, read-only root filesystem, no privilege escalation,
    every capability dropped and none added."""
    rendered = _render(values)
    seen = 0
    for kind in WORKLOADS:
        for workload in rendered.of_kind(kind):
            for container in _containers(workload["spec"]["template"]["spec"]):
                sc = container["securityContext"]
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
    merged = _merge(yaml.safe_load((CHART / "values.yaml").read_text()), values)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(merged, _schema())


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
