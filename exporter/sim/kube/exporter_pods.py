"""Each node's GPU exporter as the API shows it: a pod of its upstream install (namespace, labels), on its node,
with its own address as ``status.podIP`` -- where the simulated exporter really answers (real-nodes.md §2).

Addresses are loopback ones, one per node and index: nodes ``127.2.x.y`` (``status.addresses`` InternalIP),
exporter pods ``127.1.x.y``. A hostNetwork exporter (Gaudi's, or ``exporter_host_network``) answers on its
node's address, which is then its pod IP too; nothing answers on a node's address otherwise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from exporter.sim.kube import objects
from exporter.sim.layout import NodeLayout


@dataclass(frozen=True, slots=True)
class ExporterInstall:
    """Where an upstream install puts its exporter pods and how it labels them."""

    namespace: str
    name: str
    labels: dict[str, str]

    @property
    def selector(self) -> str:
        """The label selector an agent finds these pods by."""
        return ",".join(f"{k}={v}" for k, v in self.labels.items())


INSTALLS = {
    "nvidia": ExporterInstall("gpu-operator", "nvidia-dcgm-exporter", {"app": "nvidia-dcgm-exporter"}),
    "amd": ExporterInstall("kube-amd-gpu", "amd-gpu-metrics-exporter", {"app.kubernetes.io/name": "metrics-exporter"}),
    "gaudi": ExporterInstall("habana-system", "metric-exporter-ds", {"app": "metric-exporter-ds"}),
}


def _loopback(second: int, index: int) -> str:
    return f"127.{second}.{index // 250}.{index % 250 + 1}"


def node_address(index: int) -> str:
    """The ``index``-th node's InternalIP."""
    return _loopback(2, index)


def node_object(layout: NodeLayout, index: int, *, created: float) -> dict[str, Any]:
    """The Node object the API server serves for the ``index``-th node, its InternalIP a loopback address of its
    own."""
    node = objects.node_object(layout, created=created)
    node["status"]["addresses"] = [{"type": "InternalIP", "address": node_address(index)},
                                   {"type": "Hostname", "address": layout.spec.name}]
    return node


def exporter_address(layout: NodeLayout, index: int) -> str:
    """Where the ``index``-th node's exporter answers: its pod's address, or its node's with hostNetwork."""
    return node_address(index) if layout.spec.exporter_host_network else _loopback(1, index)


def install_of(layout: NodeLayout) -> ExporterInstall:
    """The upstream install of the node's vendor."""
    return INSTALLS[layout.spec.vendor]


def exporter_pod(layout: NodeLayout, index: int, *, created: str) -> dict[str, Any]:
    """The exporter's DaemonSet pod on this node, Running and Ready, with no device request of its own."""
    install, node = install_of(layout), layout.spec.name
    name = f"{install.name}-{hashlib.sha1(node.encode()).hexdigest()[:5]}"
    ip = exporter_address(layout, index)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": install.namespace, "labels": dict(install.labels),
                     "uid": hashlib.sha1(f"pod/{install.namespace}/{name}".encode()).hexdigest(),
                     "creationTimestamp": created,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": install.name,
                                          "uid": hashlib.sha1(install.name.encode()).hexdigest(),
                                          "controller": True}]},
        "spec": {"nodeName": node, "hostNetwork": layout.spec.exporter_host_network,
                 "containers": [{"name": "exporter", "image": f"{install.name}:sim"}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": node_address(index),
                   "startTime": created, "conditions": [{"type": "Ready", "status": "True"}]},
    }
