"""The aggregator daemon: watch the API, pull agents each tick, book deltas, serve metrics and reports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter.aggregator.booking import Books, hour_of
from exporter.aggregator.collector import AgentPuller
from exporter.aggregator.http import build_app
from exporter.aggregator.kubestate import KubeState, PodInfo
from exporter.aggregator.leader import LeaderElector
from exporter.aggregator.ledger import Ledger
from exporter.aggregator.metrics import AggregatorCollector
from exporter.aggregator.pricing_source import PricingSource
from exporter.clients.kube import CORE_KINDS, Watcher, make_api_client, served_custom_kinds
from exporter.clock import Clock, RealClock
from exporter.config import AggregatorSettings
from exporter.logs import get_logger
from exporter.model.usage import UsageSnapshot
from exporter.runtime import install_stop_signals, split_listen, start_ticking
from exporter.secrets import SecretFile
from exporter.tlsconf import client_context, server_context

log = get_logger("aggregator")


@dataclass(slots=True)
class PodGauge:
    workload: str
    gpus: float
    gpu_model: str
    utilization: float | None
    idle_seconds: float
    hourly_cost: float


@dataclass(slots=True)
class Gauges:
    """Point-in-time figures recomputed every tick (and on pod deletion)."""

    allocated_gpus: dict[str, float] = field(default_factory=dict)
    ns_utilization: dict[str, float] = field(default_factory=dict)
    workload_utilization: dict[tuple[str, str], float] = field(default_factory=dict)
    pods: dict[tuple[str, str], PodGauge] = field(default_factory=dict)
    agents: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    overflow_pods: dict[str, int] = field(default_factory=dict)
    last_commit: float = 0.0
    tick_duration: float = 0.0


OVERFLOW = "__overflow__"


def fold_overflow(pods: dict[tuple[str, str], PodGauge], limit: int) -> tuple[
        dict[tuple[str, str], PodGauge], dict[str, int]]:
    """Bound label cardinality: per namespace keep the ``limit`` most expensive pods as their own series
    and fold the rest into one ``__overflow__`` pod (GPUs and cost summed, idle time the longest)."""
    by_ns: dict[str, list[tuple[str, PodGauge]]] = {}
    for (ns, pod), g in pods.items():
        by_ns.setdefault(ns, []).append((pod, g))
    out: dict[tuple[str, str], PodGauge] = {}
    folded: dict[str, int] = {}
    for ns, items in by_ns.items():
        if len(items) <= limit:
            out.update({(ns, pod): g for pod, g in items})
            continue
        items.sort(key=lambda item: -item[1].hourly_cost)
        out.update({(ns, pod): g for pod, g in items[: limit - 1]})
        rest = [g for _pod, g in items[limit - 1:]]
        folded[ns] = len(rest)
        out[(ns, OVERFLOW)] = PodGauge(OVERFLOW, sum(g.gpus for g in rest), "mixed", None,
                                       max(g.idle_seconds for g in rest), sum(g.hourly_cost for g in rest))
    return out, folded


def _parse_selector(text: str) -> dict[str, str]:
    out = {}
    for term in filter(None, (t.strip() for t in text.split(","))):
        k, _, v = term.partition("=")
        out[k.strip()] = v.strip()
    return out


class Aggregator:
    def __init__(self, settings: AggregatorSettings, clock: Clock | None = None,
                 pricing: PricingSource | None = None) -> None:
        self.settings = settings
        self.clock = clock or RealClock()
        self.pricing = pricing or PricingSource(settings.pricing_file)
        self.ledger = Ledger(settings.ledger)
        self.kube = KubeState(pool_label=settings.pool_label, agent_selector=_parse_selector(settings.agent_selector))
        self.kube.on_pod_deleted = self._on_pod_deleted
        self.puller = AgentPuller(settings.pull_timeout, settings.pull_concurrency,
                                  token=SecretFile(settings.agent_token_file) if settings.agent_token_file else None,
                                  ssl_context=client_context(settings.agent_ca_file))
        self.books: Books | None = None
        self.gauges = Gauges()
        self.latest: dict[str, UsageSnapshot] = {}
        self.url_node: dict[str, str] = {}
        self.idle_since: dict[tuple[str, str], float] = {}
        self.watcher: Watcher | None = None
        self.is_leader = not settings.leader_election
        self.elector: LeaderElector | None = None
        self.ticks = 0
        self.pulls = 0
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._api_client: Any = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = AggregatorCollector(self)
        self.registry.register(self.collector)

    # -- lifecycle -----------------------------------------------------------------------------------
    async def start(self, serve_http: bool = True) -> None:
        await self.ledger.open()
        state = await self.ledger.load_state()
        self.books = Books(state)
        self.kube.quota_event_counts.update(state.quota_events)
        if self.settings.kubeconfig is not None or os.environ.get("KUBERNETES_SERVICE_HOST"):
            self._api_client = await make_api_client(self.settings.kubeconfig)
            queues = await served_custom_kinds(self._api_client)
            if queues:
                log.info("queue_kinds_served", kinds=[s.kind for s in queues])
            self.watcher = Watcher(self._api_client, self.kube.handle, specs=CORE_KINDS + queues,
                                   watch_timeout=self.settings.watch_timeout)
            self._spawn(self.watcher.run(), "kube-watch")
            if self.settings.leader_election:
                self.elector = LeaderElector(self._api_client, self.settings.lease_namespace, self.settings.lease_name,
                                             self.settings.lease_duration, self.settings.lease_renew_period,
                                             on_change=self._leadership_changed)
                self._spawn(self.elector.run(), "leader-election")
        else:
            log.warning("kube_disabled", reason="no kubeconfig and not in a cluster: no workloads, pools or quotas")
        if serve_http:
            host, port = split_listen(self.settings.listen)
            self._runner = web.AppRunner(build_app(self), access_log=None)
            await self._runner.setup()
            tls = server_context(self.settings.tls_cert_file, self.settings.tls_key_file)
            await web.TCPSite(self._runner, host, port, ssl_context=tls).start()
        log.info("aggregator_started", listen=self.settings.listen, ledger=str(self.settings.ledger),
                 agents=len(self.settings.agents) or "discovered", kube=self.watcher is not None)

    def _leadership_changed(self, leader: bool) -> None:
        self.is_leader = leader

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task_failed", task=task.get_name(), error=repr(task.exception()))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._runner is not None:
            await self._runner.cleanup()
        await self.puller.close()
        if self._api_client is not None:
            await self._api_client.close()
        await self.ledger.close()

    @property
    def kube_up(self) -> bool:
        return self.watcher is not None and self.watcher.up

    def health_report(self) -> dict[str, Any]:
        synced = self.watcher.all_synced if self.watcher else True
        ready = self.books is not None and synced and self.is_leader
        return {"ready": ready, "leader": self.is_leader, "kube_synced": synced, "kube_up": self.kube_up,
                "ticks": self.ticks, "last_commit": self.gauges.last_commit,
                "agents_up": sum(1 for up, _ in self.gauges.agents.values() if up),
                "agents": len(self.gauges.agents)}

    async def wait_synced(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while self.watcher is not None and not self.watcher.all_synced:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    # -- targets -------------------------------------------------------------------------------------
    def agent_urls(self) -> list[str]:
        if self.settings.agents:
            return list(self.settings.agents)
        urls = []
        for pod in self.kube.agent_pods():
            url = f"http://{pod.pod_ip}:{self.settings.agent_port}"
            self.url_node.setdefault(url, pod.node)
            urls.append(url)
        return urls

    def _ack(self, url: str) -> float | None:
        if not self.is_leader:
            return None  # standbys book into their own ledger but never let agents forget counters
        node = self.url_node.get(url)
        return self.books.acked(node) if (self.books and node) else None

    # -- the tick ------------------------------------------------------------------------------------
    async def tick(self, urls: list[str] | None = None) -> None:
        """Pull agents (all, or ``urls``), book the deltas in one transaction, refresh gauges."""
        assert self.books is not None, "start() first"
        async with self._lock:
            started = time.perf_counter()
            await asyncio.to_thread(self.pricing.maybe_reload)  # a stat, and a YAML parse when changed
            targets = urls if urls is not None else self.agent_urls()
            results = await self.puller.pull_all({u: self._ack(u) for u in targets})
            self.pulls += len(results)
            snapshots = []
            for r in results:
                if r.snapshot is not None:
                    self.url_node[r.url] = r.snapshot.node
                    snapshots.append(r.snapshot)
                    self.latest[r.snapshot.node] = r.snapshot
                    self.gauges.agents[r.snapshot.node] = (True, r.snapshot.dcgm_up)
                else:
                    node = self.url_node.get(r.url) or urlparse(r.url).netloc
                    prev = self.gauges.agents.get(node)
                    if prev is None or prev[0]:
                        log.warning("agent_pull_failed", node=node, url=r.url, error=r.error)
                    self.gauges.agents[node] = (False, False)
            prepared = self.books.prepare(snapshots, self.kube, self.pricing.current)
            if not prepared.write.empty():
                await self.ledger.commit(prepared.write)
                self.gauges.last_commit = self.clock.now()
            elif snapshots:
                self.gauges.last_commit = self.clock.now()
            self.books.apply(prepared)
            for uid, _ns, count in prepared.write.quota_events:
                if self.kube.quota_event_counts.get(uid, ("", 0))[1] == count:
                    self.kube.new_quota_rejections.pop(uid, None)
            if prepared.resets:
                log.info("agent_epoch_reset", count=prepared.resets)
            if urls is None:
                self._refresh_gauges(prepared.ns_delta, prepared.workload_delta)
                self.ticks += 1
            else:
                self._refresh_held()
            self.gauges.tick_duration = time.perf_counter() - started

    def _refresh_gauges(self, ns_delta: dict[str, list[float]], wl_delta: dict[tuple[str, str], list[float]]) -> None:
        def ratio(v: list[float]) -> float | None:
            measured = v[0] - v[2]
            return min(1.0, max(0.0, v[1] / measured)) if measured > 1e-9 else None

        self.gauges.ns_utilization = {ns: r for ns, v in ns_delta.items() if (r := ratio(v)) is not None}
        self.gauges.workload_utilization = {k: r for k, v in wl_delta.items() if (r := ratio(v)) is not None}
        self._refresh_held()

    def _pod_gone(self, ns: str, pod: str) -> bool:
        return self.watcher is not None and self.watcher.synced.get("pods", False) and (ns, pod) not in self.kube.pods

    def _refresh_held(self) -> None:
        now = self.clock.now()
        threshold = self.settings.idle_threshold
        alloc: dict[str, float] = {}
        pods: dict[tuple[str, str], list[Any]] = {}
        pricing = self.pricing.current
        for node, snap in self.latest.items():
            pool = self.kube.pool_of(node)
            for h in snap.holders:
                if not h.active or self._pod_gone(h.namespace, h.pod):
                    continue
                alloc[h.namespace] = alloc.get(h.namespace, 0.0) + h.fraction
                acc = pods.setdefault((h.namespace, h.pod), [0.0, 0.0, 0.0, h.gpu_model or "unknown", 0.0])
                acc[0] += h.fraction
                if h.utilization is not None:
                    acc[1] += h.fraction * h.utilization
                    acc[2] += h.fraction
                acc[4] += h.fraction * pricing.price(h.gpu_model, h.mig_profile, pool).per_gpu_hour
        gauges: dict[tuple[str, str], PodGauge] = {}
        for key, (gpus, used, measured, model, hourly) in pods.items():
            util = used / measured if measured > 0 else None
            if util is not None and util < threshold:
                since = self.idle_since.setdefault(key, now)
            elif util is not None:
                self.idle_since.pop(key, None)
                since = now
            else:
                since = self.idle_since.get(key, now)
            info = self.kube.pod(*key)
            gauges[key] = PodGauge(info.workload if info else key[1], gpus, model, util, max(0.0, now - since), hourly)
        for key in list(self.idle_since):
            if key not in gauges:
                del self.idle_since[key]
        self.gauges.allocated_gpus = alloc
        self.gauges.pods, self.gauges.overflow_pods = fold_overflow(gauges, self.settings.max_pods_per_namespace)

    def _on_pod_deleted(self, pod: PodInfo) -> None:
        """Close the pod's books at once: drop it from the gauges and pull its node's agent now."""
        if self.books is None:
            return
        self._refresh_held()  # the watch already removed the pod: the gauges lose it here
        urls = [u for u, n in self.url_node.items() if n == pod.node]
        if urls:
            self._spawn(self.tick(urls), f"close-books-{pod.namespace}-{pod.name}")

    # -- the daemon ----------------------------------------------------------------------------------
    async def _safe_tick(self) -> None:
        try:
            await self.tick()
        except Exception as exc:  # a failed tick is retried next tick; nothing was committed
            log.error("tick_failed", error=repr(exc))

    async def compact(self) -> None:
        before = hour_of(self.clock.now() - self.settings.ledger_retention)
        removed = await self.ledger.compact(before)
        log.info("ledger_compacted", rows_removed=removed)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        install_stop_signals(stop)
        await self.start()
        await self.wait_synced(timeout=self.settings.tick)
        scheduler = start_ticking(self._safe_tick, self.settings.tick, [(self.compact, 6 * 3600.0)])
        try:
            await stop.wait()
        finally:
            scheduler.shutdown(wait=False)
            await self._safe_tick()
            await self.close()
            log.info("aggregator_stopped")
