"""The aggregator daemon: watch the API, pull agents each tick, book deltas, serve metrics and reports."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter import runtime
from exporter.aggregator.advice.budget_control import BudgetControl
from exporter.aggregator.advice.forecasts import MonthForecasts
from exporter.aggregator.advice.recommendations import Advice
from exporter.aggregator.books.booking import Books, NodeModel, NodePrice, Prepared
from exporter.aggregator.books.committed import booked_latest, mirror_commit
from exporter.aggregator.books.gate import Admitted, SnapshotGate
from exporter.aggregator.books.gauges import Gauges, HeldNow, held_now, ratios
from exporter.aggregator.books.pricing_source import PricingSource
from exporter.aggregator.books.teams import book_teams
from exporter.aggregator.fleet.handover import Handover
from exporter.aggregator.fleet.leader import LeaderElector, take_over_ledger
from exporter.aggregator.fleet.targets import AgentTargets, DeletedNodes, own_namespace, parse_selector
from exporter.aggregator.kube.budgets import BudgetSource
from exporter.aggregator.kube.state import KubeState, PodInfo
from exporter.aggregator.ledger.store import Ledger, LedgerState
from exporter.aggregator.web.http import build_app
from exporter.aggregator.web.metrics import AggregatorCollector, MetricsInputs
from exporter.clients.agents import AgentPuller
from exporter.clients.kube import CORE_KINDS, DRA_KINDS, QUEUE_KINDS, Watcher, make_api_client, served_custom_kinds
from exporter.clock import Clock, RealClock
from exporter.config import AggregatorSettings
from exporter.logs import get_logger
from exporter.model.books import hour_of
from exporter.model.rightsizing.types import RuleSettings
from exporter.model.usage import UsageSnapshot
from exporter.secrets import SecretFile
from exporter.tlsconf import client_context, server_context

log = get_logger("aggregator")


class Aggregator:
    """One aggregator replica: its ledger, API cache, agent pulls, books, leadership and HTTP server."""
    def __init__(self, settings: AggregatorSettings, clock: Clock | None = None, *,
                 pricing: PricingSource | None = None) -> None:
        self.settings = settings
        self.clock = clock or RealClock()
        self.pricing = pricing or PricingSource(settings.pricing_file)
        self.shard = (handover := Handover(settings.shard())).shard
        self.handover = handover
        cluster, fenced = settings.cluster_name(), settings.is_postgres() and settings.leader_election
        self.ledger = Ledger(settings.ledger, cluster=cluster, fenced=fenced, guard_marks=self.shard.sharded,
                             password_file=settings.ledger_password_file, fence_key=self.shard.fence_key(cluster))
        self.kube = KubeState(pool_label=settings.pool_label, agent_selector=parse_selector(settings.agent_selector),
                              agent_namespace=settings.agent_namespace or own_namespace(), now=self.clock.now)
        self.kube.on_pod_deleted = self._on_pod_deleted
        self.gate = SnapshotGate()
        self.targets = AgentTargets(settings, self.kube, self.gate)
        self.puller = AgentPuller(settings.pull_timeout, settings.pull_concurrency,
                                  token=SecretFile(settings.agent_token_file) if settings.agent_token_file else None,
                                  ssl_context=client_context(settings.agent_ca_file),
                                  server_hostname=settings.agent_tls_server_name or None)
        self.books: Books | None = None
        self.gauges = Gauges()
        self.advice = Advice(settings=RuleSettings(  # right-sizing rows, refreshed after a commit at most hourly
            idle_threshold=settings.idle_threshold, min_evidence_hours=settings.recommend_min_evidence / 3600.0),
            every=settings.recommend_refresh, window_s=settings.recommend_window)
        self.budget_source = BudgetSource(overrides=settings.budgets)
        self.forecasts = MonthForecasts(window_s=settings.forecast_window, every=settings.forecast_refresh)
        self.budget_control = BudgetControl.of(settings, namespace=own_namespace() or "default")
        self.latest: dict[str, UsageSnapshot] = {}
        self.idle_since: dict[tuple[str, str], float] = {}
        self._deleted = DeletedNodes(settings.node_prune_grace)  # books close after the grace
        self.watcher: Watcher | None = None
        self.is_leader = not settings.leader_election
        self.elector: LeaderElector | None = None
        self.ticks = self.pulls = 0
        self.pods_deleted = 0  # deletions seen, so gauges worked out before one are not shown after it
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._api_client: Any = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = AggregatorCollector(self.metrics_inputs)
        self.registry.register(self.collector)

    # -- lifecycle -----------------------------------------------------------------------------------
    async def start(self, serve_http: bool = True) -> None:
        """Open the ledger, restore the books; in a cluster, start the watch and election; serve HTTP if asked."""
        await self.ledger.open()
        self._restore(await self.ledger.load_state())
        if not self.settings.agents and self.kube.agent_namespace is None:
            log.error("agent_discovery_off", reason="GPUCOST_AGENT_NAMESPACE is unset and this pod's namespace is "
                      "unknown: no agent is pulled (discovery is limited to one namespace)")
        if self.settings.kubeconfig is not None or os.environ.get("KUBERNETES_SERVICE_HOST"):
            self._api_client = await make_api_client(self.settings.kubeconfig)
            queues = await served_custom_kinds(self._api_client, QUEUE_KINDS + DRA_KINDS)
            if queues:
                log.info("optional_kinds_served", kinds=[s.kind for s in queues])
            self.watcher = Watcher(self._api_client, lambda kind, etype, obj: self.kube.handle(kind, etype, obj=obj),
                                   specs=CORE_KINDS + queues, watch_timeout=self.settings.watch_timeout)
            self._spawn(self.watcher.run(), "kube-watch")
            if self.settings.leader_election:
                self.elector = LeaderElector(
                    self._api_client, self.settings.lease_namespace, on_change=self._leadership_changed,
                    name=self.shard.lease_name(self.settings.lease_name),
                    lease_duration=self.settings.lease_duration, renew_period=self.settings.lease_renew_period)
                self._spawn(self.elector.run(), "leader-election")
        else:
            log.warning("kube_disabled", reason="no kubeconfig and not in a cluster: no workloads, pools or quotas")
        if serve_http:
            host, port = runtime.split_listen(self.settings.listen)
            self._runner = web.AppRunner(build_app(self), access_log=None)
            await self._runner.setup()
            tls = server_context(self.settings.tls_cert_file, self.settings.tls_key_file)
            await web.TCPSite(self._runner, host, port, ssl_context=tls).start()
        log.info("aggregator_started", listen=self.settings.listen, ledger=self.ledger.path,
                 cluster=self.ledger.cluster, agents=len(self.settings.agents) or "discovered",
                 kube=self.watcher is not None)

    def _restore(self, state: LedgerState) -> None:  # at start, and when taking over a shared ledger
        self.books = Books(state)
        self.books.books_commitments = self.shard.primary  # one shard books what is not a node's
        self.kube.quota_event_counts.update(state.quota_events)
        self.kube.quota_rejection_base.update(state.quota_rejection_base)
        self.gate.pins.update(state.agent_urls)
        self.handover.restored(self.books, self.gate)

    def _leadership_changed(self, leader: bool) -> None:
        self.is_leader = leader
        if self.ledger.fenced:  # a shared ledger: book nothing until this replica holds the newest term
            self.ledger.term = None
            if leader:
                self._spawn(take_over_ledger(self.ledger, holder=self.elector.identity if self.elector else "local",
                                             leading=lambda: self.is_leader, lock=self._lock, restore=self._restore,
                                             retry=self.settings.lease_renew_period), "ledger-take-over")

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task_failed", task=task.get_name(), error=repr(task.exception()))

    async def close(self) -> None:
        """Stop every task, the HTTP server and the clients, then close the ledger."""
        await runtime.cancel_all(list(self._tasks), grace=runtime.TASK_STOP_GRACE)  # names one that does not stop
        if self._runner is not None:
            await self._runner.cleanup()
        await self.puller.close()
        if self._api_client is not None:
            await self._api_client.close()
        await self.ledger.close()

    def metrics_inputs(self) -> MetricsInputs:
        """Everything the metrics are made of, taken afresh at each scrape."""
        return MetricsInputs(
            is_leader=self.is_leader, books=self.books, gauges=self.gauges, kube=self.kube,
            pricing=self.pricing.current, now=self.clock.now(), kube_up=self.kube_up,
            pricing_reload_errors=self.pricing.reload_errors, snapshots_rejected=self.gate.rejected,
            team_label=self.settings.team_label, breakdown_series=self.settings.breakdown_series,
            ledger_up=self.ledger.up, ledger_write_failures=self.ledger.health.write_failures,
            recommendations=self.advice.rows, budgets=self.budgets(), forecasts=self.forecasts.rows,
            budget_annotations_invalid=self.budget_source.invalid_total, window_budgets=self.budget_control)

    def budgets(self) -> dict[str, float]:
        """Every namespace's monthly budget now: annotations, with the configured ones on top."""
        current = self.budget_source.current(self.kube.budget_annotations.by_namespace)
        return {ns: b.amount for ns, b in current.items()}

    @property
    def serving(self) -> bool:
        """Whether this aggregator serves HTTP (a restart in a simulation keeps it so)."""
        return self._runner is not None

    @property
    def kube_up(self) -> bool:
        """Whether the Kubernetes watch is running and healthy (False without a cluster)."""
        return self.watcher is not None and self.watcher.up

    def health_report(self) -> dict[str, Any]:
        """``/readyz``: ready once the books are loaded, the watch synced and this leader may book (ledger up)."""
        synced = self.watcher.all_synced if self.watcher else True
        ready = self.books is not None and synced and self.is_leader and self.ledger.up and self.ledger.may_book
        return {"ready": ready, "leader": self.is_leader, "kube_synced": synced, "kube_up": self.kube_up,
                "ledger_up": self.ledger.up, "ledger_fault": self.ledger.health.fault, "ticks": self.ticks,
                "last_commit": self.gauges.last_commit,
                "agents_up": sum(1 for a in self.gauges.agents.values() if a.up), "agents": len(self.gauges.agents)}

    async def wait_synced(self, timeout: float = 30.0) -> bool:
        """Wait for the watch's first lists (at most ``timeout`` seconds); False on timeout. True without a watch."""
        deadline = time.monotonic() + timeout
        while self.watcher is not None and not self.watcher.all_synced:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    # -- targets -------------------------------------------------------------------------------------
    def agent_urls(self) -> list[str]:
        """The agent URLs this replica pulls: discovered or static, narrowed to its shard."""
        return self.handover.targets(self.targets.urls(), self.targets.url_nodes())

    def _ack(self, url: str, url_nodes: dict[str, str]) -> float | None:
        if not self.is_leader or not self.ledger.up:
            return None  # standbys, and a ledger that is down, never let agents forget counters
        node = url_nodes.get(url)
        return self.books.acked(node) if (self.books and node) else None

    # -- the tick ------------------------------------------------------------------------------------
    async def tick(self, urls: list[str] | None = None) -> None:
        """Pull agents (all, or ``urls``), book the deltas in one transaction, refresh gauges. The cycle collector
        is paused while this tick holds the lock (not while it waits for it), and resumes once its frame is gone."""
        async with self._lock:
            with runtime.cyclic_gc_paused():
                await self._locked_tick(urls)

    async def _locked_tick(self, urls: list[str] | None) -> None:
        assert self.books is not None, "start() first"
        if not self.ledger.may_book:
            return  # a shared ledger: only the leader holding the current term books
        started = time.perf_counter()
        await asyncio.to_thread(self.pricing.maybe_reload)  # a stat, and a YAML parse when changed
        url_nodes = self.targets.url_nodes()
        targets = self.agent_urls() if urls is None else urls  # ``urls``: an owned node's agent
        results = await self.puller.pull_all({u: self._ack(u, url_nodes) for u in targets})
        self.pulls += len(results)
        admitted = self.gate.admit(results, expected=None if self.settings.agents else url_nodes,
                                   known_nodes=self._known_nodes())
        gone = await self.handover.own(admitted, self._deleted.due(self.kube, now=self.clock.now())
                                       if urls is None else [], ledger=self.ledger, books=self.books,
                                       gate=self.gate)  # this shard's nodes, marks loaded
        snapshots = [snap for _url, snap in admitted.snapshots.values()]
        if self.shard.sharded and any(p.doc.commitments for p in self.pricing.current.book.lists):
            self.books.others = await self.ledger.load_fleet()  # commitments cover the whole cluster
        prepared = self.books.prepare(snapshots, self.kube, pricing=self.pricing.current, gone=gone,
                                      now=self.clock.now())
        book_teams(prepared.write, kube=self.kube, team_label=self.settings.team_label)
        for node, reason in prepared.rejected.items():
            self.gate.refuse(url=admitted.snapshots[node].url, node=node, reason=reason)
        prepared.write.agent_urls.update(
            {n: u for n, u in admitted.new_pins.items() if n not in prepared.rejected})
        held = await self._commit_holding(prepared, admitted)  # committed and applied
        if snapshots or not prepared.write.empty():
            self.gauges.last_commit = self.clock.now()
        mirror_commit(prepared, admitted, results=results, url_nodes=url_nodes, gate=self.gate, gauges=self.gauges,
                      latest=self.latest, kube=self.kube)
        self._refresh_held(held)
        self.handover.drop_foreign(self.gauges.agents)
        if urls is None:
            self.gauges.ns_utilization = ratios(prepared.ns_delta)
            self.gauges.workload_utilization = ratios(prepared.workload_delta)
            self.ticks += 1
            await self.advice.after_commit(self.ledger)  # after the marks moved: a cancel need not wait for it
            now, currency, monthly = self.clock.now(), self.pricing.current.currency, self.budgets()
            await self.forecasts.after_commit(self.ledger, budgets=monthly, currency=currency, now=now)
            await self.budget_control.after_commit(self.ledger, monthly=monthly, currency=currency, now=now,
                                                   leader=self.is_leader, api=self._api_client)
        self.gauges.tick_duration = time.perf_counter() - started

    async def _commit_holding(self, prepared: Prepared, admitted: Admitted) -> HeldNow | None:
        """Commit on the ledger's thread, then advance the marks, and meanwhile work out the held-now gauges of what
        it books (the SQL runs without the GIL); shown only once it committed. A failure of the gauges never stops
        the books; None (work them out again after) also when a pod was deleted meanwhile. Cancelled (SIGTERM)
        once the commit is on its thread, the tick ends only after the marks followed it: else the final tick
        would book the same deltas again."""
        assert self.books is not None
        deletions = self.pods_deleted
        commit = asyncio.ensure_future(self.handover.commit(prepared, ledger=self.ledger, books=self.books))
        held: HeldNow | None = None
        cancelled = False
        try:
            await asyncio.sleep(0)  # the commit has reached the ledger's thread
            held = self._held(booked_latest(self.latest, prepared=prepared, admitted=admitted),
                              booked=prepared.node_prices)
        except asyncio.CancelledError:  # stops below, once the commit is applied (or refused)
            cancelled = True
        except Exception as exc:  # a bug in the gauges: the books go on
            log.error("held_gauges_failed", error=repr(exc))
        await runtime.finish(commit, cancelled=cancelled)  # never left running unawaited, even when cancelled
        return held if self.pods_deleted == deletions else None

    def _known_nodes(self) -> set[str] | None:
        """Nodes the API has now, or None when there is no synced node list to judge by."""
        if self.watcher is None or not self.watcher.synced.get("nodes", False):
            return None
        return set(self.kube.nodes)

    def _pod_gone(self, ns: str, pod: str) -> bool:
        return self.watcher is not None and self.watcher.synced.get("pods", False) and (ns, pod) not in self.kube.pods

    def _held(self, latest: dict[str, UsageSnapshot], *, booked: dict[NodeModel, NodePrice] | None) -> HeldNow:
        return held_now(latest, kube=self.kube, pricing=self.pricing.current, now=self.clock.now(),
                        idle_threshold=self.settings.idle_threshold, idle_since=self.idle_since,
                        max_pods_per_namespace=self.settings.max_pods_per_namespace, pod_gone=self._pod_gone,
                        booked=booked)

    def _refresh_held(self, held: HeldNow | None = None) -> None:  # ``held``: worked out beside the commit
        booked = self.books.node_prices if self.books else None
        self.gauges.show_held(held if held is not None else self._held(self.latest, booked=booked))

    def _on_pod_deleted(self, pod: PodInfo) -> None:
        """Close the pod's books at once: drop it from the gauges and pull its node's agent now."""
        if self.books is None:
            return
        self.pods_deleted += 1
        self._refresh_held()  # the watch already removed the pod: the gauges lose it here
        urls = [u for u, n in self.targets.url_nodes().items() if n == pod.node]
        if urls and self.shard.owns(pod.node):
            self._spawn(self.tick(urls), f"close-books-{pod.namespace}-{pod.name}")

    # -- the daemon ----------------------------------------------------------------------------------
    async def _safe_tick(self) -> None:
        try:
            await self.tick()
        except Exception as exc:  # a failed tick is retried next tick; nothing was committed
            log.error("tick_failed", error=repr(exc))

    async def compact(self) -> None:
        """Drop hourly rows past the retention and quota events not seen for a while (kept as totals)."""
        now = self.clock.now()
        events_before = now - self.settings.quota_event_retention
        async with self._lock:
            removed = await self.ledger.compact(hour_of(now - self.settings.ledger_retention),
                                                quota_events_before=events_before)
            self.kube.forget_quota_events(before=events_before)
        log.info("ledger_compacted", rows_removed=removed)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """The daemon: start, tick (and compact, on shard 0) on schedule until ``stop`` or a signal, then close."""
        stop = stop or asyncio.Event()
        runtime.install_stop_signals(stop)
        await self.start()
        runtime.freeze_long_lived()  # the daemon's books, modules and clients live as long as the process
        await self.wait_synced(timeout=self.settings.tick)
        compaction = [(self.compact, 6 * 3600.0)] if self.shard.primary else []  # shard 0: the cluster's rows
        scheduler = runtime.start_ticking(self._safe_tick, self.settings.tick, others=compaction)
        try:
            await stop.wait()
        finally:
            scheduler.shutdown(wait=False)
            await self._safe_tick()
            await self.close()
            log.info("aggregator_stopped")
