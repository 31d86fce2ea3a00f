"""The agent daemon: one tick = fetch (DCGM, pod-resources) -> build (attribution) -> apply (meter)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter.agent.collector import AgentCollector, AgentView
from exporter.agent.exporters.amd import amd_devices, looks_like_amd
from exporter.agent.exporters.dcgm import (
    DEFAULT_NAME_TABLE,
    DcgmDevice,
    build_devices,
    extend_name_table,
    parse_name_table,
)
from exporter.agent.exporters.gaudi import gaudi_devices, looks_like_gaudi
from exporter.agent.exporters.per_pod import HAMI_UTIL, PodUse, dcgm_pod_use, hami_pod_use
from exporter.agent.health import Health
from exporter.agent.holders.attribution import MigResolver, attribute
from exporter.agent.http import build_app
from exporter.agent.kubeinfo import KubeInfo, hami_pods
from exporter.agent.lifecycle import PodLifetimes
from exporter.agent.meter import Meter
from exporter.agent.publish import snapshot_of
from exporter.agent.state import StateError, dump_meter, read_state, state_path, write_state
from exporter.clients.device_metrics import DeviceMetricsClient, split_urls
from exporter.clients.errors import PeerError, PeerRateLimited
from exporter.clients.exposition import parse_exposition
from exporter.clients.kube import Watcher, WatchSpec, make_api_client
from exporter.clients.podresources import PodResourcesClient
from exporter.clock import Clock, RealClock
from exporter.config import AgentSettings
from exporter.logs import get_logger
from exporter.model.devices import SharingMode
from exporter.model.pod_resources import ContainerDevices
from exporter.model.usage import UsageSnapshot, snapshot_json
from exporter.runtime import TASK_STOP_GRACE, cancel_all, install_stop_signals, split_listen, start_ticking
from exporter.secrets import SecretFile
from exporter.tlsconf import server_context

log = get_logger("agent")
ALLOCATABLE_REFRESH_TICKS = 20


class Agent:
    """Owns the clients, the meter and the HTTP server of one node."""

    def __init__(self, settings: AgentSettings, clock: Clock | None = None,
                 *, mig_resolver: MigResolver | None = None) -> None:
        if not settings.node_name:
            raise ValueError("GPUCOST_NODE_NAME is required")
        self.settings = settings
        self.clock = clock or RealClock()
        self.mig_resolver = mig_resolver
        self.name_table = {**DEFAULT_NAME_TABLE, **parse_name_table(settings.dcgm_metric_names)}
        self.dcgm = DeviceMetricsClient(split_urls(settings.device_metrics_url or settings.dcgm_url),
                                        settings.dcgm_timeout, max_bytes=settings.dcgm_max_bytes)
        self.hami_monitor = (DeviceMetricsClient([settings.hami_monitor_url], settings.dcgm_timeout,
                                        max_bytes=settings.dcgm_max_bytes) if settings.hami_monitor_url else None)
        self.exporter_vendor = "nvidia"  # whose exporter the device-metrics URL serves, as last seen
        self.pod_use = PodUse()  # measured per-pod use of shared GPUs, from this tick's scrapes
        self.podresources = PodResourcesClient(settings.podresources_socket, settings.podresources_timeout,
                                               rate=settings.podresources_qps)
        self.health = Health()
        self.state_file = state_path(settings.state_dir)
        self.meter = self._load_meter()
        self.published: UsageSnapshot | None = None
        self.published_json: bytes | None = None
        self.acked_until: float | None = None
        self._held: list[ContainerDevices] | None = None
        self._held_at = 0.0
        self._allocatable: dict[str, tuple[str, ...]] | None = None
        self._runner: web.AppRunner | None = None
        self._tick_lock = asyncio.Lock()
        self.lifetimes = PodLifetimes(settings.resource_names)  # from the own-node pod watch
        self.ignored_finished = 0
        self._watcher: Watcher | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._api_client: Any = None
        self.kubeinfo = KubeInfo(node=settings.node_name, kubeconfig=settings.kubeconfig,
                                 timeout=settings.podresources_timeout)
        self.sharing: dict[str, SharingMode] = {}  # physical GPU uuid -> how it is shared (device metric label)
        self.usage_token = SecretFile(settings.usage_token_file) if settings.usage_token_file else None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(AgentCollector(self.metrics_view))
        if self.usage_token is None:
            # An ack makes the agent forget counters: from an unauthenticated caller it could erase
            # unbooked time, so without a token acks are ignored and retention is the safety period.
            log.warning("usage_acks_ignored_without_token", node=settings.node_name,
                        safety_retention=settings.safety_retention)

    def metrics_view(self) -> AgentView:
        """What a scrape reads: the last published tick and the agent's health."""
        return AgentView(node=self.settings.node_name, published=self.published, health=self.health,
                         meter=self.meter, ignored_finished=self.ignored_finished, sharing=self.sharing,
                         max_holder_series=self.settings.max_holder_series)

    def _load_meter(self) -> Meter:
        node = self.settings.node_name
        try:
            meter = read_state(self.state_file, node)
        except (StateError, OSError) as exc:  # corrupt or unreadable: start again, visibly
            self.health.state_resets += 1
            log.warning("state_unusable_new_epoch", node=node, path=str(self.state_file), error=str(exc))
            return Meter(node=node)
        if meter is None:
            log.info("state_missing_new_epoch", node=node, path=str(self.state_file))
            return Meter(node=node)
        log.info("state_resumed", node=node, epoch=meter.epoch, seq=meter.seq, holders=len(meter.holders))
        return meter

    # -- HTTP ----------------------------------------------------------------------------------------
    async def start_http(self) -> None:
        """Serve /metrics, /v1/usage and the health endpoints on ``listen`` (TLS when configured)."""
        host, port = split_listen(self.settings.listen)
        app = build_app(self, self.registry, max_request_bytes=self.settings.max_request_bytes)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        tls = server_context(self.settings.tls_cert_file, self.settings.tls_key_file)
        await web.TCPSite(self._runner, host, port, ssl_context=tls).start()

    async def start_pod_watch(self) -> None:
        """Optional own-node pod watch: pods' start and end times, and which listed pods have finished."""
        self._api_client = await make_api_client(self.settings.kubeconfig)
        spec = WatchSpec("pods", "list_pod_for_all_namespaces",
                         field_selector=f"spec.nodeName={self.settings.node_name}")
        self._watcher = Watcher(self._api_client, self._on_pod_event, specs=(spec,))
        self._watch_task = asyncio.create_task(self._watcher.run(), name="own-node-pod-watch")

    def pod_watch_reached(self, resource_version: int) -> bool:
        """Whether the own-node pod watch has listed and read up to ``resource_version`` (True without a
        watch: there is nothing to wait for). What a harness in virtual time waits on before a tick."""
        w = self._watcher
        if w is None:
            return True
        return bool(w.synced.get("pods")) and int(w.resource_version.get("pods") or 0) >= resource_version

    def _on_pod_event(self, _kind: str, etype: str, obj: dict[str, Any]) -> None:
        self.lifetimes.on_event(etype, obj, now=self.clock.now())
        for pod in obj["items"] if etype == "LISTED" else [obj]:
            self.kubeinfo.observe_pod(pod, deleted=etype == "DELETED")

    @property
    def finished_pods(self) -> set[tuple[str, str]]:
        """Pods the API says have finished (an old kubelet may still list them)."""
        return self.lifetimes.finished

    def acknowledge(self, ts: float) -> None:
        """The aggregator booked everything up to ``ts`` (only ever called for an authenticated request)."""
        if self.published is not None:
            ts = min(ts, self.published.timestamp)
        self.acked_until = ts if self.acked_until is None else max(self.acked_until, ts)

    def health_report(self) -> dict[str, Any]:
        """The /readyz body: "degraded" with its reasons while a peer is down, before the first tick,
        or while the state file cannot be written."""
        h = self.health
        reasons = [r for r, bad in (("dcgm down", not h.dcgm_up), ("pod-resources down", not h.podresources_up),
                                    ("no tick yet", h.ticks == 0),
                                    (f"state write failing: {h.state_write_error}", bool(h.state_write_error)))
                   if bad]
        return {"status": "degraded" if reasons else "ok", "reasons": reasons, "node": self.settings.node_name,
                "dcgm_up": h.dcgm_up, "podresources_up": h.podresources_up, "ticks": h.ticks,
                "epoch": self.meter.epoch, "last_tick_at": h.last_tick_at, "last_error": h.last_error,
                "state_write_failures": h.state_write_failures}

    # -- the tick ------------------------------------------------------------------------------------
    async def _fetch_dcgm(self) -> dict[tuple[str, str], DcgmDevice] | None:
        try:
            text = await self.dcgm.fetch()
        except PeerError as exc:
            if self.health.dcgm_up or self.health.ticks == 0:
                log.warning("dcgm_down", node=self.settings.node_name, error=str(exc))
            self.health.dcgm_up = False
            self.health.last_error = str(exc)
            return None
        if self.exporter_vendor != "nvidia" or looks_like_amd(text) or looks_like_gaudi(text):
            return self._read_vendor(text)  # one URL setting for every vendor's exporter, told apart by what it serves
        parsed = parse_exposition(text, only=self.name_table)
        added = extend_name_table(self.name_table, parsed.help)
        if added:  # renamed fields (an exporter upgrade): learn them once, then parse them every scrape
            log.warning("dcgm_metric_names_inferred", names=added)
            parsed = parse_exposition(text, only=self.name_table)
        if parsed.errors:
            self.health.parse_errors += parsed.errors
            log.warning("dcgm_malformed_lines", count=parsed.errors, first=parsed.first_error)
        if not self.health.dcgm_up and self.health.ticks > 0:
            log.info("dcgm_up", node=self.settings.node_name)
        self.health.dcgm_up = True
        self.pod_use = dcgm_pod_use(parsed.samples)
        return build_devices(parsed.samples, self.name_table)

    async def _fetch_hami(self) -> PodUse:
        """HAMi's per-container use; nothing (and a log line) when its monitor does not answer."""
        if self.hami_monitor is None:
            return PodUse()
        try:
            return hami_pod_use(parse_exposition(await self.hami_monitor.fetch(), only=HAMI_UTIL).samples)
        except PeerError as exc:
            log.warning("hami_monitor_down", node=self.settings.node_name, error=str(exc))
            return PodUse()

    def _read_vendor(self, text: str) -> dict[tuple[str, str], DcgmDevice] | None:
        """AMD's or Gaudi's exporter; None (down) when gaudi-metric-exporter serves no device series, which it
        does for a whole scrape when its own pod-resources List failed: not idle cards."""
        gaudi = looks_like_gaudi(text)
        if not gaudi and self.exporter_vendor == "gaudi":
            self.health.dcgm_up = False
            self.health.last_error = "gaudi-metric-exporter served no device series"
            log.warning("device_metrics_empty", node=self.settings.node_name, vendor="gaudi")
            return None
        parsed = parse_exposition(text)
        scrape = gaudi_devices(parsed.samples) if gaudi else amd_devices(parsed.samples)
        self.exporter_vendor = "gaudi" if gaudi else "amd"
        if parsed.errors or scrape.refused:
            self.health.parse_errors += parsed.errors + scrape.refused
            log.warning("device_metrics_refused", malformed=parsed.errors, refused=scrape.refused,
                        first=parsed.first_error)
        self.health.dcgm_up = True
        return scrape.devices

    async def _fetch_holders(self, now: float) -> list[ContainerDevices] | None:
        cap = self.settings.charge_cap()
        try:
            held = await self.podresources.list()
            if self._allocatable is None or self.health.ticks % ALLOCATABLE_REFRESH_TICKS == 0:
                try:
                    self._allocatable = await self.podresources.allocatable()
                except PeerError as exc:
                    log.warning("allocatable_failed", error=str(exc))
        except PeerRateLimited as exc:
            log.warning("podresources_rate_limited", error=str(exc))
            return self._held if now - self._held_at <= cap else None
        except PeerError as exc:
            if self.health.podresources_up or self.health.ticks == 0:
                log.warning("podresources_down", node=self.settings.node_name, error=str(exc))
            self.health.podresources_up = False
            self.health.last_error = str(exc)
            # Holders a moment ago are still the best knowledge for a short outage; after the cap, stop.
            return self._held if now - self._held_at <= cap else None
        if self.finished_pods:
            before = len(held)
            held = [cd for cd in held if (cd.namespace, cd.pod) not in self.finished_pods]
            self.ignored_finished = before - len(held)
        if not self.health.podresources_up and self.health.ticks > 0:
            log.info("podresources_up", node=self.settings.node_name)
        self.health.podresources_up = True
        self._held, self._held_at = held, now
        return held

    async def tick(self) -> None:
        """Run one tick; never raises for a peer's fault."""
        async with self._tick_lock:
            started = time.perf_counter()
            self.pod_use = PodUse()
            dcgm, held, hami_use = await asyncio.gather(self._fetch_dcgm(), self._fetch_holders(self.clock.now()),
                                                        self._fetch_hami())
            self.pod_use.merge(hami_use)
            self.meter.pod_use = self.pod_use.by_gpu
            now = self.clock.now()
            attribution = None
            if held is not None:
                claims = self.podresources.last_claims
                context = await self.kubeinfo.context(held, self._allocatable, claims=claims)
                if hami_pods(held) and self._watch_task is None and self.kubeinfo.api_client is not None:
                    await self.start_pod_watch()  # HAMi present: the watch brings annotations before pods start
                attribution = attribute(held, dcgm, allocatable=self._allocatable, mig_known=self.meter.mig_known,
                                        inventory=self.meter.inventory, extra_resources=self.settings.resource_names,
                                        resolver=self.mig_resolver,
                                        context=context, claims=claims)
                self.health.unresolved = len(attribution.unresolved)
                self.sharing = attribution.sharing
            stats = self.meter.tick(now, attribution, dcgm=dcgm, cap=self.settings.charge_cap(),
                                    allocatable=self._allocatable, lifetimes=self.lifetimes.pods,
                                    skew=self.settings.tick)
            if stats.unobserved_seconds > 0:
                log.warning("tick_interval_unobserved", charged=stats.charged_seconds,
                            capped=stats.capped_seconds, unobserved=stats.unobserved_seconds)
            self.lifetimes.prune(now - 2 * self.settings.charge_cap())
            self.meter.drop_acknowledged(now, self.acked_until, retention=self.settings.retention,
                                         safety=self.settings.safety_retention)
            snapshot = snapshot_of(self.meter, now, dcgm_up=self.health.dcgm_up,
                                   podresources_up=self.health.podresources_up)
            if await self._persist():
                self.published = snapshot
                self.published_json = snapshot_json(snapshot)
            self.health.ticks += 1
            self.health.last_tick_at = now
            self.health.last_tick_duration = time.perf_counter() - started

    async def _persist(self) -> bool:
        """Durable before visible: what the aggregator books must survive an agent crash.

        When the write fails the last durable snapshot stays published (a crash now resumes exactly
        it, so nothing booked is ever above the resumed counters); the meter goes on counting in
        memory and everything reaches the aggregator with the first write that succeeds."""
        state = dump_meter(self.meter)
        try:
            await asyncio.to_thread(write_state, self.state_file, state, fsync=self.settings.state_fsync)
        except OSError as exc:
            self.health.state_write_failures += 1
            if not self.health.state_write_error:  # once per failure streak
                log.error("state_write_failed", path=str(self.state_file), error=str(exc))
            self.health.state_write_error = str(exc) or type(exc).__name__
            return False
        if self.health.state_write_error:
            log.info("state_write_recovered", path=str(self.state_file),
                     failures=self.health.state_write_failures)
            self.health.state_write_error = ""
        return True

    async def close(self) -> None:
        """Stop the pod watch, the API clients and the HTTP server."""
        if self._watch_task is not None:
            await cancel_all([self._watch_task], grace=TASK_STOP_GRACE)  # names it in the log if it does not stop
        if self._api_client is not None:
            await self._api_client.close()
        await self.kubeinfo.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.dcgm.close()
        if self.hami_monitor is not None:
            await self.hami_monitor.close()
        await self.podresources.close()

    # -- the daemon ----------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve and tick until SIGTERM; then one final tick and state flush."""
        stop = stop or asyncio.Event()
        install_stop_signals(stop)
        await self.start_http()
        if self.settings.watch_pods:
            await self.start_pod_watch()
        log.info("agent_started", node=self.settings.node_name, listen=self.settings.listen,
                 dcgm=self.settings.dcgm_url, socket=str(self.settings.podresources_socket), epoch=self.meter.epoch)
        scheduler = start_ticking(self.tick, self.settings.tick)
        try:
            await stop.wait()
        finally:
            scheduler.shutdown(wait=False)
            await self.tick()
            await self.close()
            log.info("agent_stopped", node=self.settings.node_name, epoch=self.meter.epoch)

