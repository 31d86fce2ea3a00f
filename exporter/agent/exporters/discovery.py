"""Finding this node's GPU exporter through the API: the exporter pods scheduled on the agent's node.

No upstream install serves its exporter on the node's address: the GPU Operator's and the chart's
dcgm-exporter and AMD's device-metrics-exporter listen on their pod IP only (no hostNetwork, no hostPort),
and their Services spread a per-node scraper over random nodes (``internalTrafficPolicy: Cluster``). So the
agent lists the pods with ``spec.nodeName=<its node>`` matching each upstream install's labels and scrapes the
pod's IP. Gaudi's exporter runs with hostNetwork, so its pod IP is the node's and the same rule holds.

Pure: the list call is the caller's (one per selector, bounded by the node's pods); ``ExporterFinder`` only
decides when to look again (first tick, after a failed scrape at most every ``retry_ticks``, and every
``refresh_ticks`` so a restarted exporter pod's new IP is found).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ExporterSelector:
    """Pods of one upstream exporter install: a label selector, the port and scheme its metrics answer on."""

    labels: str
    port: int
    scheme: str = "http"


#: Each upstream install's pod labels and port (reference: real-nodes.md section 2).
DEFAULT_SELECTORS = (
    ExporterSelector("app=nvidia-dcgm-exporter", 9400),  # GPU Operator
    ExporterSelector("app=nvidia-dcgm-exporter-dra", 9400),  # GPU Operator, DRA path
    ExporterSelector("app.kubernetes.io/name=dcgm-exporter", 9400),  # dcgm-exporter chart / static YAML
    ExporterSelector("app.kubernetes.io/name=metrics-exporter", 5000),  # AMD device-metrics-exporter
    ExporterSelector("app=metric-exporter-ds", 41611),  # Intel gaudi-metric-exporter (hostNetwork)
    ExporterSelector("app=habana-metric-exporter-ds", 41611),
)
DEFAULT_SELECTORS_SETTING = ";".join(f"{s.labels}@{s.port}" for s in DEFAULT_SELECTORS)


def parse_selectors(spec: str) -> tuple[ExporterSelector, ...]:
    """Settings form ``LABELS@PORT[/https];...`` (LABELS a label selector, commas allowed). ValueError names
    the bad entry."""
    out = []
    for entry in filter(None, (e.strip() for e in spec.split(";"))):
        labels, sep, rest = entry.rpartition("@")
        port_s, _, scheme = rest.partition("/")
        scheme = scheme or "http"
        if not sep or not labels.strip() or not port_s.isdigit() or not 0 < int(port_s) < 65536 or \
                scheme not in ("http", "https"):
            raise ValueError(f"bad exporter selector {entry!r}: expected LABELS@PORT or LABELS@PORT/https")
        out.append(ExporterSelector(labels.strip(), int(port_s), scheme))
    if not out:
        raise ValueError("no exporter selector")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class DiscoveredExporter:
    """One exporter pod on this node and the URL of its metrics."""

    namespace: str
    pod: str
    url: str


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def exporters_in(pods: Iterable[dict[str, Any]], selector: ExporterSelector, *, node: str) -> list[DiscoveredExporter]:
    """The running pods of ``selector`` on ``node`` that have an IP, ready ones first (then by name)."""
    found = []
    for pod in pods:
        meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
        ip = str(status.get("podIP") or "")
        if spec.get("nodeName") != node or status.get("phase") != "Running" or not ip:
            continue  # the API was asked for this node only; a pod elsewhere is never this node's exporter
        host = f"[{ip}]" if ":" in ip else ip
        found.append((not _ready(pod), str(meta.get("name", "")), DiscoveredExporter(
            str(meta.get("namespace", "")), str(meta.get("name", "")), f"{selector.scheme}://{host}:{selector.port}/metrics")))
    return [d for _, _, d in sorted(found, key=lambda f: (f[0], f[1]))]


ListPods = Callable[[str], Awaitable[list[dict[str, Any]] | None]]


async def discover(list_pods: ListPods, selectors: Iterable[ExporterSelector], *,
                   node: str) -> list[DiscoveredExporter] | None:
    """Every selector's exporters on ``node``, in selector order; None when the API could not be read."""
    out: list[DiscoveredExporter] = []
    for selector in selectors:
        pods = await list_pods(selector.labels)
        if pods is None:
            return None
        out += exporters_in(pods, selector, node=node)
    return out


@dataclass(slots=True)
class ExporterFinder:
    """When to list again; what was found last."""

    refresh_ticks: int = 40
    retry_ticks: int = 4
    found: list[DiscoveredExporter] | None = None
    _last: int | None = None

    def due(self, tick: int, *, scrape_failed: bool) -> bool:
        """First time, after a failed scrape (at most every ``retry_ticks``), or every ``refresh_ticks``."""
        if self._last is None or not self.found:
            return self._last is None or tick - self._last >= self.retry_ticks
        since = tick - self._last
        return since >= self.refresh_ticks or (scrape_failed and since >= self.retry_ticks)

    def looked(self, tick: int, found: list[DiscoveredExporter] | None) -> bool:
        """Record a listing at ``tick``; True when the exporters' URLs changed (None keeps what was known)."""
        self._last = tick
        if found is None:
            return False
        changed = self.found is None or [d.url for d in found] != [d.url for d in self.found]
        self.found = found
        return changed
