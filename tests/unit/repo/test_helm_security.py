"""The agent bearer token and agent TLS in the Helm chart: generated, kept, mounted as files, never leaked."""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from tests.unit.repo.helm_render import (
    CERT_MANAGER,
    CHART,
    FULL,
    NAMESPACE,
    TLS_DIR,
    TOKEN_DIR,
    TOKEN_SECRET,
    WORKLOADS,
    Rendered,
    containers_of,
    env_of,
    merge,
    mounts_of,
    parse,
    render,
    token_of,
    volumes_of,
)

# -- the bearer token ------------------------------------------------------------------------------------

def test_default_install_generates_a_48_character_token_secret() -> None:
    """No values needed: the chart generates the token (randAlphaNum 48) in a Secret of its own."""
    rendered = render({})
    secret = rendered.named("Secret", TOKEN_SECRET)
    assert set(secret["data"]) == {"token"} and "stringData" not in secret
    assert re.fullmatch(r"[A-Za-z0-9]{48}", token_of(rendered))


@pytest.mark.parametrize(("values", "aggregator_kind"), [({}, "Deployment"), ({"aggregator": {"replicas": 3}},
                                                                               "StatefulSet")])
def test_both_daemons_mount_the_token_read_only_and_point_their_setting_at_the_file(
        values: dict[str, Any], aggregator_kind: str) -> None:
    """The agent's GPUCOST_USAGE_TOKEN_FILE and the aggregator's GPUCOST_AGENT_TOKEN_FILE name the same file
    of the same Secret, mounted read-only as a whole volume (no subPath, so kubelet updates it in place)."""
    rendered = render(values)
    for kind, setting in (("DaemonSet", "GPUCOST_USAGE_TOKEN_FILE"), (aggregator_kind, "GPUCOST_AGENT_TOKEN_FILE")):
        pod = rendered.pod(kind)
        (container,) = pod["containers"]
        mount = mounts_of(container)["agent-token"]
        assert mount["mountPath"] == TOKEN_DIR and mount["readOnly"] is True and "subPath" not in mount, kind
        assert env_of(container)[setting] == f"{TOKEN_DIR}/token", kind
        secret = volumes_of(pod)["agent-token"]["secret"]
        assert secret["secretName"] == TOKEN_SECRET and secret["items"] == [{"key": "token", "path": "token"}]
        assert secret["defaultMode"] == 0o440, kind


def test_token_is_never_in_an_env_value_an_arg_or_any_other_object() -> None:
    """The token reaches the daemons only as a file: no env value, arg, secretKeyRef or envFrom carries it,
    and no object but its Secret contains it (plain or base64)."""
    rendered = render(CERT_MANAGER | {"aggregator": {"replicas": 2}})
    token = token_of(rendered)
    secret = rendered.named("Secret", TOKEN_SECRET)
    for doc in rendered.docs:
        if doc is not secret:
            text = json.dumps(doc)
            assert token not in text and base64.b64encode(token.encode()).decode() not in text, doc["kind"]
    assert token not in rendered.notes
    for kind in WORKLOADS:
        for workload in rendered.of_kind(kind):
            for container in containers_of(workload["spec"]["template"]["spec"]):
                assert "envFrom" not in container
                assert all("secretKeyRef" not in e.get("valueFrom", {}) for e in container["env"]), kind
                assert token not in json.dumps(container.get("args", [])), kind


def test_auth_disabled_removes_secret_mounts_and_settings_and_warns() -> None:
    """`agentAuth.enabled=false` is the only way off, and it is loud: NOTES warns."""
    rendered = render({"agentAuth": {"enabled": False}})
    assert not [s for s in rendered.of_kind("Secret") if "token" in s["metadata"]["name"]]
    for kind in ("DaemonSet", "Deployment"):
        pod = rendered.pod(kind)
        assert "agent-token" not in volumes_of(pod) and "agent-token" not in mounts_of(pod["containers"][0]), kind
        assert not {"GPUCOST_USAGE_TOKEN_FILE", "GPUCOST_AGENT_TOKEN_FILE"} & set(env_of(pod["containers"][0])), kind
    assert "WARNING: agentAuth.enabled=false" in rendered.notes
    assert "WARNING: agentAuth" not in render({}).notes


def test_existing_secret_is_used_by_name_and_no_secret_is_rendered() -> None:
    """`agentAuth.existingSecret` (and its key) replace the chart's Secret; the file name stays `token`."""
    rendered = render({"agentAuth": {"existingSecret": "vault-agent-token", "secretKey": "bearer"}})
    assert not [s for s in rendered.of_kind("Secret") if "token" in s["metadata"]["name"]]
    for kind in ("DaemonSet", "Deployment"):
        secret = volumes_of(rendered.pod(kind))["agent-token"]["secret"]
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
            return parse(cfg.render(chart, {}, name="gce", namespace=NAMESPACE, is_upgrade=True))
    finally:
        chart.close()


def test_upgrade_keeps_the_token_already_in_the_cluster(secret_api: tuple[str, dict[str, dict[str, Any]]]) -> None:
    """With the Secret in the cluster, two upgrades render its token unchanged; without it, each render
    generates a new one, so `lookup` is what keeps the token stable."""
    kubeconfig, stored = secret_api
    assert token_of(_render_against(kubeconfig)) != token_of(_render_against(kubeconfig))
    kept = "a" * 40 + "rotated1"
    stored[TOKEN_SECRET] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": TOKEN_SECRET,
                                                                                "namespace": NAMESPACE},
                            "data": {"token": base64.b64encode(kept.encode()).decode()}}
    assert token_of(_render_against(kubeconfig)) == kept
    assert token_of(_render_against(kubeconfig)) == kept



def test_tls_with_cert_manager_renders_certificate_mounts_and_https() -> None:
    """One value family turns TLS on: a Certificate, cert and key into the agent only, the CA only into the
    aggregator, https scheme for the aggregator's pulls, the probes and the ServiceMonitor."""
    rendered = render(CERT_MANAGER)
    server_name = f"{FULL}-agent.{NAMESPACE}.svc"
    (cert,) = rendered.of_kind("Certificate")
    assert cert["apiVersion"] == "cert-manager.io/v1" and cert["spec"]["secretName"] == f"{FULL}-agent-tls"
    assert cert["spec"]["issuerRef"] == {"name": "internal-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert cert["spec"]["dnsNames"] == [server_name, f"{FULL}-agent", f"{server_name}.cluster.local"]
    custom = render(merge(CERT_MANAGER, {"agent": {"tls": {"serverName": "agents.gpu.internal"}}}))
    assert custom.of_kind("Certificate")[0]["spec"]["dnsNames"][0] == "agents.gpu.internal"
    assert env_of(custom.pod("Deployment")["containers"][0])["GPUCOST_AGENT_TLS_SERVER_NAME"] == "agents.gpu.internal"

    agent_pod = rendered.pod("DaemonSet")
    agent = agent_pod["containers"][0]
    assert mounts_of(agent)["agent-tls"] == {"name": "agent-tls", "mountPath": TLS_DIR, "readOnly": True}
    assert volumes_of(agent_pod)["agent-tls"]["secret"]["items"] == [{"key": "tls.crt", "path": "tls.crt"},
                                                                   {"key": "tls.key", "path": "tls.key"}]
    assert env_of(agent)["GPUCOST_TLS_CERT_FILE"] == f"{TLS_DIR}/tls.crt"
    assert env_of(agent)["GPUCOST_TLS_KEY_FILE"] == f"{TLS_DIR}/tls.key"
    assert agent["livenessProbe"]["httpGet"]["scheme"] == agent["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"

    agg_pod = rendered.pod("Deployment")
    agg = agg_pod["containers"][0]
    assert volumes_of(agg_pod)["agent-ca"]["secret"] == {"secretName": f"{FULL}-agent-tls", "defaultMode": 0o440,
                                                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert mounts_of(agg)["agent-ca"]["readOnly"] is True
    env = env_of(agg)
    assert env["GPUCOST_AGENT_SCHEME"] == "https" and env["GPUCOST_AGENT_CA_FILE"] == f"{TLS_DIR}/ca.crt"
    assert env["GPUCOST_AGENT_TLS_SERVER_NAME"] == server_name
    assert not {"GPUCOST_TLS_CERT_FILE", "GPUCOST_TLS_KEY_FILE"} & set(env)

    monitor = rendered.named("ServiceMonitor", f"{FULL}-agent")["spec"]["endpoints"][0]
    assert monitor["scheme"] == "https" and monitor["tlsConfig"]["serverName"] == server_name
    assert "scheme" not in rendered.named("ServiceMonitor", f"{FULL}-aggregator")["spec"]["endpoints"][0]


def test_tls_is_off_by_default_and_an_existing_secret_needs_no_cert_manager() -> None:
    """Default: plain HTTP, no Certificate. `agent.tls.secretName`: that Secret, still no Certificate."""
    default = render({})
    assert not default.of_kind("Certificate")
    assert "GPUCOST_AGENT_SCHEME" not in env_of(default.pod("Deployment")["containers"][0])
    rendered = render({"agent": {"tls": {"enabled": True, "secretName": "agent-certs", "caKey": "bundle.pem"}}})
    assert not rendered.of_kind("Certificate")
    assert volumes_of(rendered.pod("DaemonSet"))["agent-tls"]["secret"]["secretName"] == "agent-certs"
    ca = volumes_of(rendered.pod("Deployment"))["agent-ca"]["secret"]
    assert ca["secretName"] == "agent-certs" and ca["items"] == [{"key": "bundle.pem", "path": "ca.crt"}]


def test_tls_without_cert_material_fails_with_a_clear_message() -> None:
    """TLS on with neither a Secret nor cert-manager is refused at render time, naming the values."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    with pytest.raises(helm.HelmError, match=re.escape("agent.tls.secretName or agent.tls.certManager.enabled")):
        render({"agent": {"tls": {"enabled": True}}})
    with pytest.raises(helm.HelmError, match=re.escape("issuerRef.name is required")):
        render({"agent": {"tls": {"enabled": True, "certManager": {"enabled": True}}}})


# -- every container, every variant ------------------------------------------------------------------------
