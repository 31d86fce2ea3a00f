"""Render the Helm chart with Helm itself (helm-python-sdk) and read the objects it would apply."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

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


def parse(out: dict[str, str]) -> Rendered:
    notes = next(text for path, text in out.items() if path.endswith("NOTES.txt"))
    docs = [d for path, text in out.items() if not path.endswith("NOTES.txt") for d in yaml.safe_load_all(text) if d]
    return Rendered(notes=notes, docs=docs)


def render(values: dict[str, Any], *, release: str = "gce") -> Rendered:
    """Offline render (Helm's lookup finds nothing, as with `helm template`)."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm as a library) is not installed")
    chart = helm.Chart.load(str(CHART))
    try:
        return parse(chart.render(values, name=release, namespace=NAMESPACE, is_install=True))
    finally:
        chart.close()


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def mounts_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in container.get("volumeMounts", [])}


def volumes_of(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in pod.get("volumes", [])}


def containers_of(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def token_of(rendered: Rendered) -> str:
    secret = rendered.named("Secret", TOKEN_SECRET)
    return base64.b64decode(secret["data"]["token"]).decode()



def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Values merged the way Helm coalesces maps (without null deletion)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
