"""The Helm chart, tested statically (no helm binary here; `helm lint`/`template` run when one exists)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import REPO

CHART = REPO / "helm" / "gpu-cost-exporter"
TEMPLATES = sorted((CHART / "templates").glob("*"))


def _values() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def _schema() -> dict[str, Any]:
    import json

    return dict(json.loads((CHART / "values.schema.json").read_text()))


def test_values_validate_against_schema() -> None:
    """The default values are valid."""
    jsonschema.validate(_values(), _schema())


@pytest.mark.parametrize(("path", "bad"), [
    (["agent", "port"], "9500"),
    (["agent", "bogus"], 1),
    (["bogus"], True),
    (["pricing", "defaultPrice"], 0),
    (["pricing", "models"], {"NVIDIA H100 80GB HBM3": "four"}),
    (["agent", "dcgm", "mode"], "nodeport"),
    (["agent", "tick"], "15 seconds"),
    (["aggregator", "replicas"], 9),
    (["alerts", "thresholds", "quotaRatio"], 1.5),
    (["securityContext", "runAsNonRoot"], "yes"),
])
def test_schema_rejects_wrong_types_and_unknown_keys(path: list[str], bad: object) -> None:
    """Wrong types, unknown keys and out-of-range values are rejected."""
    values = _values()
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values, _schema())


def test_every_values_path_used_by_templates_exists() -> None:
    """A typo in `.Values.x.y` inside a template fails here instead of rendering empty."""
    values = _values()
    missing = []
    for tpl in TEMPLATES:
        for path in re.findall(r"\$?\.Values\.([A-Za-z0-9_.]+)", tpl.read_text()):
            node: Any = values
            for key in path.split("."):
                if not isinstance(node, dict) or key not in node:
                    missing.append(f"{tpl.name}: .Values.{path}")
                    break
                node = node[key]
    assert missing == []


def test_rule_and_alertmanager_sources_are_single() -> None:
    """The PrometheusRule replaces every placeholder of the shared rule template; the chart's
    Alertmanager files are the ones in alerts/."""
    import sys

    sys.path.insert(0, str(REPO / "alerts"))
    try:
        import render
    finally:
        sys.path.pop(0)
    tpl = (CHART / "templates" / "prometheusrule.yaml").read_text()
    assert '.Files.Get "files/alert-rules.tmpl.yaml"' in tpl
    for placeholder, key in render.PLACEHOLDERS.items():
        assert f'replace "{placeholder}" (toString $t.{key})' in tpl, placeholder
    for name in ("alertmanager.yaml", "slack.tmpl"):
        assert (CHART / "files" / name).read_text() == (REPO / "alerts" / name).read_text(), name


def test_metric_names_in_chart_exist() -> None:
    """Every gpucost_* metric the chart renders (KEDA query) is one the exporter produces."""
    sources = "".join(p.read_text() for p in (REPO / "exporter").rglob("*.py"))
    produced = set(re.findall(r'"(gpucost_[a-z_]+)"', sources))
    for tpl in TEMPLATES:
        for metric in re.findall(r"\b(gpucost_[a-z_]+)", tpl.read_text()):
            assert metric in produced or metric.removesuffix("_total") in produced, (tpl.name, metric)


def test_secure_by_default() -> None:
    """Non-root, read-only root filesystem, no privilege escalation, all capabilities dropped, seccomp;
    the pod-resources directory mounted read-only; RBAC is get/list/watch on five kinds only, plus create on
    token and access reviews (who may read costs)."""
    sc = _values()["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0 and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    ds = (CHART / "templates" / "agent-daemonset.yaml").read_text()
    mount = ds[ds.index("- name: pod-resources\n              mountPath"):][:200]
    assert "readOnly: true" in mount
    rbac = (CHART / "templates" / "rbac.yaml").read_text()
    verbs = re.findall(r"verbs: \[(.*?)\]", rbac)
    # cluster reads; the writes of budgets that act, each behind windowBudgets (test_helm_budget_rbac); the Lease
    # only for HA; the agent's reads each behind its value (watchPods, sharing, dra, kai; discovery: its pod verbs
    # are composed of get, list, watch, tests/unit/repo/test_helm_real_node.py)
    assert verbs == ["get, list, watch"] * 4 + ["patch", "create", "patch", "create"] + ["get, list, watch"] + [
        "create", "create", "get, create, update", '{{ join ", " . }}', "get", "list", "get", "get"]
    assert re.findall(r"resources: \[(.*?)\]", rbac) == [
        "pods, nodes, namespaces, resourcequotas, events", "queues, podgroups", "clusterqueues, localqueues, workloads",
        "podgroups", "clusterqueues, localqueues", "commands", "queues", "events", "resourceclaims, resourceslices",
        "tokenreviews", "subjectaccessreviews", "leases", "pods", "nodes", "resourceslices", "resourceclaims",
        "configmaps"]
    assert "kind: Role\n" in rbac and "namespace: {{ .Release.Namespace }}" in rbac
    am = (CHART / "files" / "alertmanager.yaml").read_text()
    assert "api_url_file" in am and "https://hooks" not in am
    assert "WARNING" in (CHART / "templates" / "NOTES.txt").read_text()


def test_chart_holds_every_object() -> None:
    """DaemonSet, Deployment, PVC, RBAC, Services, ServiceMonitor, PrometheusRule, dashboards, KEDA,
    Alertmanager Secret, NetworkPolicy, NOTES."""
    kinds = " ".join(t.read_text() for t in TEMPLATES)
    for kind in ("DaemonSet", "Deployment", "StatefulSet", "PersistentVolumeClaim", "ClusterRole", "ClusterRoleBinding",
                 "ServiceAccount", "Service", "ServiceMonitor", "PrometheusRule", "ConfigMap", "ScaledObject",
                 "Secret", "NetworkPolicy"):
        assert f"kind: {kind}\n" in kinds, kind
    assert (REPO / "Dockerfile").read_text().count("FROM ") == 2  # multi-stage
    assert "USER 65532" in (REPO / "Dockerfile").read_text()


HELM_VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "everything-on": {"monitoring": {"serviceMonitor": {"enabled": True}},
                      "alerts": {"prometheusRule": {"enabled": True}, "alertmanagerConfig": {"enabled": True}},
                      "keda": {"scaledObjectExample": {"enabled": True}}, "networkPolicy": {"enabled": True},
                      "agent": {"watchPods": True, "nvml": {"enabled": True}, "dcgm": {"mode": "url",
                                                                                      "url": "http://dcgm:9400/metrics"}}},
    "ha-no-persistence": {"aggregator": {"replicas": 3}},
    "agent-tls-cert-manager": {"agent": {"tls": {"enabled": True, "certManager": {
        "enabled": True, "issuerRef": {"name": "internal-ca", "kind": "ClusterIssuer"}}}},
        "monitoring": {"serviceMonitor": {"enabled": True}},
        "networkPolicy": {"aggregator": {"extraFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                                         "egress": [{"to": [{"namespaceSelector": {}}]}]}}},
    "auth-off-no-netpol": {"agentAuth": {"enabled": False}, "networkPolicy": {"enabled": False},
                           "agent": {"watchPods": False}},
    "existing-token-and-tls-secrets": {"agentAuth": {"existingSecret": "agent-token"},
                                       "agent": {"tls": {"enabled": True, "secretName": "agent-certs"}}},
    "ephemeral": {"aggregator": {"persistence": {"enabled": False}}},
    "postgres": {"aggregator": {"postgres": {
        "url": "postgresql://gpucost@db.example:5432/gpucost?sslmode=verify-full", "cluster": "prod-eu",
        "passwordSecret": {"name": "gpucost-db", "key": "password"}}}},
    "postgres-ha": {"aggregator": {"replicas": 3, "postgres": {
        "url": "postgresql://gpucost@db.example:5432/gpucost?sslmode=verify-full", "cluster": "prod-eu",
        "passwordSecret": {"name": "gpucost-db", "key": "password"}}}},
}


def _render(overrides: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    chart = helm.Chart.load(str(CHART))
    try:
        out = chart.render(overrides, name="gce", namespace="gpu-cost-exporter", is_install=True)
    finally:
        chart.close()
    docs = [d for path, text in out.items() if not path.endswith("NOTES.txt") for d in yaml.safe_load_all(text) if d]
    return out, docs


def test_helm_lint() -> None:
    """`helm lint --strict` through Helm's own code (helm-python-sdk): no errors."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    result = helm.lint(str(CHART), strict=True)
    assert result["errors"] == [], result
    assert all(m["severity"] <= 1 for m in result["messages"]), result["messages"]  # info only (icon)


@pytest.mark.parametrize("variant", sorted(HELM_VARIANTS))
def test_helm_template_renders_valid_kubernetes_objects(variant: str) -> None:
    """Rendered by Helm with each set of values, every built-in object validates against the Kubernetes
    1.33 schemas (kubernetes-validate, strict); the expected kinds are present."""
    import kubernetes_validate

    out, docs = _render(HELM_VARIANTS[variant])
    kinds = {d["kind"] for d in docs}
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, "1.33", strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            assert doc["kind"] in {"ServiceMonitor", "PrometheusRule", "ScaledObject", "Certificate"}, doc["kind"]
    assert {"DaemonSet", "ClusterRole", "Service", "ConfigMap"} <= kinds
    notes = next(text for path, text in out.items() if path.endswith("NOTES.txt"))
    if variant == "postgres-ha":
        assert "Deployment" in kinds and "StatefulSet" not in kinds and "Role" in kinds
    elif variant == "ha-no-persistence":
        assert "StatefulSet" in kinds and "Deployment" not in kinds and "Role" in kinds
        sts = next(d for d in docs if d["kind"] == "StatefulSet")
        env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["GPUCOST_LEADER_ELECTION"] == "true" and sts["spec"]["volumeClaimTemplates"]
    else:
        assert "Deployment" in kinds and "StatefulSet" not in kinds
    assert ("WARNING" in notes) == (variant in {"ephemeral", "auth-off-no-netpol"})
    for doc in docs:
        if doc["kind"] in ("DaemonSet", "Deployment", "StatefulSet"):
            for ctr in doc["spec"]["template"]["spec"]["containers"]:
                sc = ctr["securityContext"]
                assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
                assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
                # the agent is the kubelet socket's owner, root with no capability; the aggregator is not root
                assert sc["runAsNonRoot"] is (doc["kind"] != "DaemonSet"), doc["kind"]
        if doc["kind"] == "DaemonSet":
            mounts = {m["name"]: m for m in doc["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
            assert mounts["pod-resources"]["readOnly"] is True


@pytest.mark.parametrize(("variant", "replicas"), [("postgres", 1), ("postgres-ha", 3)])
def test_postgres_ledger_without_shards(variant: str, replicas: int) -> None:
    """A PostgreSQL ledger renders a Deployment: the URL, the cluster's name and the password file, and no
    ledger volume claimed (none per replica either). More than one replica shares the ledger: Lease leader
    election on, the Lease Role rendered, rolling updates (fenced); one replica is recreated."""
    _out, docs = _render(HELM_VARIANTS[variant])
    (deploy,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-aggregator")]
    assert [d["kind"] for d in docs if d["kind"] in ("StatefulSet", "PersistentVolumeClaim")] == []
    assert deploy["spec"]["replicas"] == replicas
    assert deploy["spec"]["strategy"]["type"] == ("RollingUpdate" if replicas > 1 else "Recreate")
    pod = deploy["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in ctr["env"]}
    assert env["GPUCOST_LEDGER"] == "postgresql://gpucost@db.example:5432/gpucost?sslmode=verify-full"
    assert env["GPUCOST_CLUSTER"] == "prod-eu"
    assert env["GPUCOST_LEDGER_PASSWORD_FILE"] == "/etc/gpu-cost-exporter-ledger/password"
    assert "GPUCOST_SHARDS" not in env
    mounts = {m["name"]: m for m in ctr["volumeMounts"]}
    assert mounts["ledger-password"] == {"name": "ledger-password", "mountPath": "/etc/gpu-cost-exporter-ledger",
                                         "readOnly": True}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["ledger-password"]["secret"] == {"secretName": "gpucost-db", "defaultMode": 0o440,
                                                    "items": [{"key": "password", "path": "password"}]}
    assert volumes["ledger"] == {"name": "ledger", "emptyDir": {}}
    if replicas > 1:
        assert env["GPUCOST_LEADER_ELECTION"] == "true"
        assert env["GPUCOST_LEASE_NAME"] == "gce-gpu-cost-exporter-aggregator"
        assert env["GPUCOST_LEASE_NAMESPACE"] == "gpu-cost-exporter"
        assert any(d["kind"] == "Role" and d["metadata"]["name"].endswith("-aggregator-lease") for d in docs)
    else:
        assert "GPUCOST_LEADER_ELECTION" not in env
        assert not any(d["kind"] == "Role" for d in docs)


def test_postgres_ledger_needs_a_cluster_name() -> None:
    """Rows of many clusters share the database: no name, no render."""
    values = {"aggregator": {"postgres": {"url": "postgresql://gpucost@db.example:5432/gpucost"}}}
    with pytest.raises(Exception, match=r"aggregator\.postgres\.cluster is required with a PostgreSQL ledger"):
        _render(values)


def test_rendered_rules_and_alertmanager_config_are_the_project_ones(tmp_path: Path) -> None:
    """The PrometheusRule Helm renders carries exactly alerts/gpu-cost-exporter.rules.yaml, and the
    rendered Alertmanager Secret passes `amtool check-config`."""
    _out, docs = _render(HELM_VARIANTS["everything-on"])
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((REPO / "alerts" / "gpu-cost-exporter.rules.yaml").read_text())
    secret = next(d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-alertmanager"))
    for name, text in secret["stringData"].items():
        (tmp_path / name).write_text(text)
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("amtool not installed")
    proc = subprocess.run([amtool, "check-config", str(tmp_path / "alertmanager.yaml")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pricing_values_take_a_whole_version_2_document() -> None:
    """``pricing.document`` is rendered as the pricing file as is, and the product's own loader accepts it:
    an instance type (55.04 / 8 = 6.88 per GPU-hour), spot, a commitment and owned hardware."""
    from exporter.model.pricing.document import parse_pricing
    from exporter.model.pricing.labels import NodeFacts
    from tests.unit.repo.helm_render import render

    document = {
        "currency": "USD", "default_price": 1.0, "models": {"NVIDIA H100 80GB HBM3": 4.0},
        "instance_types": {"p5.48xlarge": {"gpus": 8, "hourly": 55.04}}, "capacity_types": {"spot": 0.35},
        "commitments": [{"name": "h100-1yr", "model": "NVIDIA H100 80GB HBM3", "gpus": 8, "hourly": 2.1,
                         "start": "2026-01-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"}],
        "on_prem": [{"model": "NVIDIA A100-SXM4-80GB", "capex_per_gpu": 17520, "years": 4,
                     "energy_price_kwh": 0.12, "pue": 1.5}]}
    out = render({"pricing": {"document": document}})
    (cm,) = [o for o in out.of_kind("ConfigMap") if "pricing.yaml" in o.get("data", {})]
    pricing = parse_pricing(cm["data"]["pricing.yaml"], "pricing.yaml")
    node = NodeFacts.from_labels("n1", "NVIDIA H100 80GB HBM3",
                                 labels={"node.kubernetes.io/instance-type": "p5.48xlarge"}, pool=None)
    assert pricing.rate(node, at=1.8e9).list_per_gpu_hour == pytest.approx(55.04 / 8)
    with pytest.raises(Exception, match="pricing_typo"):
        render({"pricing": {"document": {"currency": "USD", "pricing_typo": 1}}})
