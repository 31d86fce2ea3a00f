"""Which agents to pull, which node each URL may speak for, and which deleted nodes' books close now.

Kept apart from the daemon: it reads the settings, the API cache and the gate's pins, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from exporter.aggregator.books.booking import NodeGone
from exporter.aggregator.books.gate import SnapshotGate
from exporter.aggregator.kube.state import KubeState
from exporter.config import AggregatorSettings

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace() -> str | None:
    """This pod's namespace (where the chart puts the agents too), when running in a cluster."""
    try:
        return SA_NAMESPACE_FILE.read_text().strip() or None
    except OSError:
        return None


def parse_selector(text: str) -> dict[str, str]:
    """``k=v,k2=v2`` as a dict (the equality-based label selectors the chart renders)."""
    out = {}
    for term in filter(None, (t.strip() for t in text.split(","))):
        k, _, v = term.partition("=")
        out[k.strip()] = v.strip()
    return out


@dataclass(slots=True)
class AgentTargets:
    """Agent URLs and the node each is bound to: discovered agent pods (by ``spec.nodeName``), or static
    URLs pinned to the node they first proved."""

    settings: AggregatorSettings
    kube: KubeState
    gate: SnapshotGate

    def discovered(self) -> dict[str, str]:
        """URL -> node of the agent pods in the configured namespace (the only URLs that may speak for a node)."""
        port, scheme = self.settings.agent_port, self.settings.agent_scheme
        return {f"{scheme}://{pod.pod_ip}:{port}": pod.node for pod in self.kube.agent_pods()}

    def urls(self) -> list[str]:
        """The agent URLs to pull: the static ``GPUCOST_AGENTS`` if set, else the discovered agent pods."""
        return list(self.settings.agents) if self.settings.agents else list(self.discovered())

    def url_nodes(self) -> dict[str, str]:
        """URL -> the node it may speak for: static URLs by their pins, discovered ones by their pod's node."""
        if self.settings.agents:
            return {url: node for node, url in self.gate.pins.items()}
        return self.discovered()


@dataclass(slots=True)
class DeletedNodes:
    """Nodes deleted from the API, waiting out the grace before their books close.

    The grace matters: a kubelet re-registers a node deleted by hand within seconds, with the same agent
    and counters; pruning its marks at once would book those counters whole a second time."""

    grace: float
    waiting: dict[str, NodeGone] = field(default_factory=dict)

    def due(self, kube: KubeState, *, now: float) -> list[NodeGone]:
        """Nodes gone longer than the grace and not back: their books close now."""
        for d in kube.take_deleted_nodes():
            self.waiting.setdefault(d.name, NodeGone(d.name, min(now, d.deleted_at) if d.deleted_at else now,
                                                     d.gpus, d.gpu_model or "unknown"))
        for name in [n for n in self.waiting if n in kube.nodes]:
            del self.waiting[name]  # came back: its agent's counters carry on from the marks
        out = [g for g in self.waiting.values() if now - g.deleted_at >= self.grace]
        for g in out:
            del self.waiting[g.node]
        return out
