"""This node's GPU exporter: where it answers (a URL setting, or the exporter pod the API lists on this node)
and whether what it answered is this node's (``exporters.own_node``), before the agent books any of it."""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping

from exporter.agent.exporters.discovery import ExporterFinder, ListPods, discover, parse_selectors
from exporter.agent.exporters.own_node import ScrapeOrigin, check_own_node, scrape_origin
from exporter.agent.health import Health
from exporter.clients.device_metrics import DeviceMetricsClient, split_urls
from exporter.clients.errors import PeerUnavailable
from exporter.logs import get_logger
from exporter.model.samples import Sample
from exporter.secrets import SecretFile
from exporter.settings.agent import AgentSettings

log = get_logger("agent")


class NodeExporter:
    """Fetches the node's exporter text; in discover mode finds the exporter pod first (and again when due)."""

    def __init__(self, settings: AgentSettings, health: Health, *, list_pods: ListPods | None) -> None:
        self.settings, self.health, self.list_pods = settings, health, list_pods
        self.discovering = settings.exporter_mode == "discover"
        self.selectors = parse_selectors(settings.exporter_selectors)
        self.token = SecretFile(settings.exporter_token_file) if settings.exporter_token_file else None
        self.ssl_context = (ssl.create_default_context(cafile=str(settings.exporter_ca_file))
                            if settings.exporter_ca_file else None)
        self.finder = ExporterFinder()
        self.pod = ""  # the discovered exporter pod's name: its hostname label when NODE_NAME is unset
        self.origin = ScrapeOrigin(frozenset(), frozenset())  # hostnames and GPU UUIDs of the last scrape
        self.client = None if self.discovering else self._client(
            split_urls(settings.device_metrics_url or settings.dcgm_url))
        self._ticks = 0
        self._failed = False

    def _client(self, urls: list[str]) -> DeviceMetricsClient:
        return DeviceMetricsClient(urls, self.settings.dcgm_timeout, max_bytes=self.settings.dcgm_max_bytes,
                                   token=self.token, ssl_context=self.ssl_context)

    @property
    def url(self) -> str:
        """Where the last scrape went ("" before an exporter pod is found)."""
        return self.client.url if self.client is not None else ""

    async def _discover(self) -> None:
        node = self.settings.node_name
        found = None if self.list_pods is None else await discover(self.list_pods, self.selectors, node=node)
        if not self.finder.looked(self._ticks, found):
            return
        if self.client is not None:
            await self.client.close()
        exporters = self.finder.found or []
        self.client = self._client([d.url for d in exporters]) if exporters else None
        self.pod = exporters[0].pod if exporters else ""
        log.info("exporter_discovered", node=node, exporters=[f"{d.namespace}/{d.pod} {d.url}" for d in exporters])

    async def fetch(self) -> str:
        """The exporter's text; PeerError when it does not answer or (discover mode) no exporter pod is found."""
        self._ticks += 1
        if self.discovering and self.finder.due(self._ticks, scrape_failed=self._failed):
            await self._discover()
        if self.client is None:
            self._failed = True
            node = self.settings.node_name
            raise PeerUnavailable(
                f"no exporter pod on node {node} matches {self.settings.exporter_selectors!r}"
                if self.finder.found is not None else
                f"exporter discovery could not list the pods of node {node} (the API: in-cluster or kubeconfig, "
                "and list on pods)")
        try:
            text = await self.client.fetch()
        except Exception:
            self._failed = True
            raise
        self._failed = False
        if self.client.current != 0 and self.discovering and self.finder.found:
            self.pod = self.finder.found[self.client.current].pod
        return text

    def observe(self, samples: Iterable[Sample]) -> None:
        """Note where the parsed scrape says it comes from (its hostname labels and GPU UUIDs)."""
        self.origin = scrape_origin(samples)

    def accept(self, allocatable: Mapping[str, tuple[str, ...]] | None) -> bool:
        """Whether the last scrape is this node's; a refusal is counted by reason, logged when it starts or
        changes, and keeps /readyz not ready until a scrape is accepted again."""
        node = self.settings.node_name
        verdict = check_own_node(self.origin, node=node, exporter_pod=self.pod, allocatable=allocatable)
        h = self.health
        if verdict.ok:
            if h.exporter_refused:
                log.info("exporter_accepted", node=node, url=self.url)
            h.exporter_refused = ""
            return True
        if h.exporter_refused != verdict.detail:
            log.warning("exporter_refused", node=node, reason=verdict.reason, detail=verdict.detail, url=self.url)
        h.exporter_refused = verdict.detail
        h.exporter_refusals[verdict.reason] = h.exporter_refusals.get(verdict.reason, 0) + 1
        return False

    async def close(self) -> None:
        """Close the exporter's keep-alive sessions."""
        if self.client is not None:
            await self.client.close()
