"""The whole product on a simulated cluster: ``simulate`` (virtual clock) and ``demo`` (real time).

Real agents and the real aggregator run against the simulator's real protocol peers; only the clock
differs. Restart events stop and recreate daemon objects exactly as a process restart would (the agent
resumes its state file, the aggregator reopens its ledger).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from exporter.agent.service import Agent
from exporter.agent.state import state_path
from exporter.aggregator.books.pricing_source import PricingSource
from exporter.aggregator.ledger.report import build_report, render
from exporter.aggregator.service import Aggregator
from exporter.clock import Clock, RealClock, VirtualClock
from exporter.config import AgentSettings, AggregatorSettings
from exporter.logs import get_logger
from exporter.sim.cluster import Happening
from exporter.sim.kube.reviews import calling_as_users
from exporter.sim.kube.store import KINDS
from exporter.sim.runner import SimPeers, realtime_loop
from exporter.sim.scenario import Scenario

log = get_logger("pipeline")


class Pipeline:
    """Peers + one agent per node + the aggregator, wired together on loopback."""

    def __init__(self, scenario: Scenario, workdir: Path, *, clock: Clock, ledger: Path | str | None = None,
                 aggregator_listen: str | None = None, aggregator_extra: Mapping[str, Any] | None = None) -> None:
        self.scenario = scenario
        self.clock = clock
        self.peers = SimPeers(scenario, workdir, clock.now())
        self.ledger = ledger
        self.aggregator_extra = dict(aggregator_extra or {})  # more aggregator settings (cluster, ledger password)
        self.aggregator_listen = aggregator_listen
        self.agents: dict[str, Agent] = {}
        self.aggregator: Aggregator | None = None
        # A virtual clock runs ticks far faster than real time: the kubelet budget is per real second, and
        # a power loss is not part of a simulation, so state files skip their fsyncs there.
        self.virtual_time = not isinstance(clock, RealClock)

    def agent_settings(self, node: str) -> AgentSettings:
        """The settings of node ``node``'s agent, pointed at its simulated peers."""
        env = self.peers.agent_env(node)
        return AgentSettings(node_name=node, listen=env["GPUCOST_LISTEN"],
                             # as the chart's default: the exporter pod on its node, found through the API
                             exporter_mode="discover", exporter_selectors=env["GPUCOST_EXPORTER_SELECTORS"],
                             podresources_socket=Path(env["GPUCOST_PODRESOURCES_SOCKET"]),
                             state_dir=Path(env["GPUCOST_STATE_DIR"]), tick=self.scenario.tick,
                             podresources_qps=1e6 if self.virtual_time else 5.0, state_fsync=not self.virtual_time,
                             # the own-node pod watch gives pods' start and end to the second
                             watch_pods=True, kubeconfig=Path(env["GPUCOST_KUBECONFIG"]),
                             usage_token_file=Path(env["GPUCOST_USAGE_TOKEN_FILE"]),
                             hami_monitor_url=env.get("GPUCOST_HAMI_MONITOR_URL", ""))

    def aggregator_settings(self) -> AggregatorSettings:
        """The aggregator's settings, pointed at every agent, the ledger and the simulated API server."""
        return AggregatorSettings(listen=self.peers.aggregator_listen, ledger=self.ledger or self.peers.ledger,
                                  pricing_file=self.peers.pricing_file, agents=self.peers.agent_urls(),
                                  kubeconfig=self.peers.kubeconfig, tick=self.scenario.tick,
                                  agent_token_file=self.peers.token_file,
                                  pool_label=self.scenario.pool_label, window_budgets_file=self.peers.budgets_file,
                                  **{"auth": "kubernetes" if self.scenario.users else "none", **self.aggregator_extra})

    async def start(self, serve_aggregator: bool = True) -> None:
        """Bring up the peers, every node's agent and the aggregator (HTTP only if ``serve_aggregator``)."""
        await self.peers.start(self.aggregator_listen)
        for node in self.peers.nodes:
            await self.start_agent(node)
        await self.start_aggregator(serve_aggregator)

    async def start_agent(self, node: str) -> None:
        """Start node ``node``'s agent (HTTP and pod watch), as its DaemonSet pod starting would."""
        agent = Agent(self.agent_settings(node), clock=self.clock)
        await agent.start_http()
        await agent.start_pod_watch()
        self.agents[node] = agent

    async def start_aggregator(self, serve_http: bool = True) -> None:
        """Start the aggregator and wait until its cluster watches have synced."""
        settings = self.aggregator_settings()
        agg = Aggregator(settings, clock=self.clock, pricing=PricingSource(settings.pricing_file))
        await agg.start(serve_http=serve_http)
        await agg.wait_synced()
        self.aggregator = agg

    async def restart(self, h: Happening) -> None:
        """Act on a restart event: recreate the agent (without its state file on state loss) or the aggregator."""
        if h.type in ("agent_restart", "agent_state_loss") and h.node in self.agents:
            await self.agents.pop(h.node).close()
            if h.type == "agent_state_loss":
                with contextlib.suppress(FileNotFoundError):
                    state_path(self.peers.nodes[h.node].state_dir).unlink()
            await self.start_agent(h.node)
        elif h.type == "aggregator_restart" and self.aggregator is not None:
            serve = self.aggregator.serving
            await self.aggregator.close()
            self.aggregator = None
            await self.start_aggregator(serve)

    async def step(self, t: float) -> None:
        """One virtual-time tick at scenario time ``t``: move the cluster (carrying out restarts), let the
        aggregator's watches catch up, tick every agent, then the aggregator."""
        if not isinstance(self.clock, VirtualClock):
            raise TypeError("step() drives a virtual clock; real time ticks by itself")
        self.clock.set(self.peers.wall_start + t)
        for h in await self.peers.advance(t):
            await self.restart(h)
        await self.wait_watch_caught_up()
        await asyncio.gather(*(self.wait_agent_watch_caught_up(node) for node in self.agents))
        await asyncio.gather(*(a.tick() for a in self.agents.values()))
        assert self.aggregator is not None
        await self.aggregator.tick()

    async def wait_watch_caught_up(self, timeout: float = 10.0) -> None:
        """In virtual time, let the aggregator's watches see every API change made so far."""
        agg = self.aggregator
        if agg is None or agg.watcher is None:
            return
        store = self.peers.cluster.store
        deadline = time.monotonic() + timeout
        watcher = agg.watcher
        while True:
            behind = [k for k in KINDS if k in watcher.synced and (
                not watcher.synced[k] or int(watcher.resource_version.get(k) or 0) < store.latest_rv(k))]
            if not behind:
                return
            if time.monotonic() > deadline:
                log.warning("watch_lagging", kinds=behind)
                return
            await asyncio.sleep(0.001)

    async def wait_agent_watch_caught_up(self, node: str, timeout: float = 10.0) -> None:
        """In virtual time, let an agent's own-node pod watch see every change to its node's pods."""
        agent = self.agents[node]
        store = self.peers.cluster.store
        want = next((c.rv for c in reversed(store.history)
                     if c.kind == "pods" and (c.obj.get("spec") or {}).get("nodeName") == node), 0)
        deadline = time.monotonic() + timeout
        while not agent.pod_watch_reached(want):
            if time.monotonic() > deadline:
                log.warning("agent_watch_lagging", node=node)
                return
            await asyncio.sleep(0.001)

    async def close(self) -> None:
        """Stop every daemon, then the peers."""
        for agent in self.agents.values():
            await agent.close()
        if self.aggregator is not None:
            await self.aggregator.close()
        await self.peers.close()


async def run_simulation(scenario: Scenario, ledger: Path | str, *, workdir: Path, out: TextIO | None = None,
                         aggregator_extra: Mapping[str, Any] | None = None) -> dict[str, float]:
    """``gpu-cost-exporter simulate``: the whole scenario on a virtual clock that ends by now (so the default
    export and report windows hold all of it); returns run statistics."""
    wall0 = time.time()
    # Scenario time 0 on an hour boundary (readable hourly rows), as late as lets the run end by now: never
    # booked in the future, where a window ending now would leave part of it out.
    start = float(int((wall0 - scenario.duration) // 3600) * 3600)
    clock = VirtualClock(start)
    pipe = Pipeline(scenario, workdir, clock=clock, ledger=ledger, aggregator_extra=aggregator_extra)
    await pipe.start(serve_aggregator=False)
    ticks = int(scenario.duration // scenario.tick)
    try:
        for k in range(ticks + 1):
            await pipe.step(k * scenario.tick)
    finally:
        await pipe.close()
    elapsed = time.time() - wall0
    stats = {"ticks": ticks + 1, "simulated_seconds": scenario.duration, "wall_seconds": elapsed,
             "speed": scenario.duration / elapsed if elapsed > 0 else 0.0, "start": start,
             "end": start + scenario.duration}
    if out is not None:
        span = f"{_utc(start)} to {_utc(start + scenario.duration)} UTC"
        print(f"simulated {scenario.duration:g}s of '{scenario.source}' ({span}) in {elapsed:.1f}s "
              f"({stats['speed']:.0f}x), ledger: {ledger}", file=out)
    return stats


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


#: The demo runs for minutes, not weeks: right-sizing and month-end forecasts from what it booked so far.
DEMO_ADVICE: dict[str, float] = {"recommend_window": 3600.0, "recommend_min_evidence": 60.0,
                                 "recommend_refresh": 30.0, "forecast_window": 3600.0, "forecast_refresh": 30.0}


def _advice_tables(agg: Aggregator) -> str:
    """Recommendations and budgets as the aggregator last computed them, as tables (empty until there are some)."""
    from exporter.aggregator.advice import forecasts, recommendations

    out, advice = "", list(agg.advice.rows)
    if advice:
        out += "--- right-sizing (evidence so far) ---\n" + recommendations.render(advice, "table")
    if any(f.budget is not None for f in agg.forecasts.rows):
        out += "--- budgets: month-end forecast ---\n" + forecasts.render(
            [f for f in agg.forecasts.rows if f.budget is not None], "table")
    return out


async def _print_tick(agg: Aggregator, *, out: TextIO, elapsed: float, shown: str) -> str:
    """The tick's tables: cost by namespace and by vendor and model, once something is booked (the first pull
    only marks where the agents' counters start), and the advice when it changed. Returns the advice shown."""
    rows = await agg.ledger.run_report("namespace", since=None, until=None)
    if not any(r["allocated_gpu_hours"] or r["idle_gpu_hours"] for r in rows):
        return shown
    by_model = await agg.ledger.run_report("vendor,gpu_model", since=None, until=None)
    print(f"--- t+{elapsed:5.0f}s  cost so far by namespace ---", file=out)
    print(render(rows, "table"), file=out)
    print("--- by vendor and GPU model (capacity nobody held in its own columns) ---", file=out)
    print(render(by_model, "table"), file=out)
    advice = _advice_tables(agg)
    if advice != shown:  # printed when it changes, not every tick
        print(advice, file=out)
    out.flush()
    return advice


async def run_demo(scenario: Scenario, workdir: Path, *, listen: str, duration: float | None,
                   out: TextIO = sys.stdout, refresh: float | None = None, keep: bool = True) -> None:
    """``gpu-cost-exporter demo``: real time, real daemons, a cost table every tick."""
    from exporter.runtime import install_stop_signals

    stop = asyncio.Event()
    install_stop_signals(stop)
    clock = RealClock()
    pipe = Pipeline(scenario, workdir, clock=clock, aggregator_listen=listen, aggregator_extra=DEMO_ADVICE)
    await pipe.start()
    agg_url = f"http://{listen}"
    print(f"gpu-cost-exporter demo: simulated cluster '{scenario.source}' with {len(pipe.agents)} GPU nodes",
          file=out)
    print(f"  status page {agg_url}/", file=out)
    print(f"  aggregator  {agg_url}/metrics  {agg_url}/api/v1/report?by=pod  {agg_url}/healthz", file=out)
    for node, agent in pipe.agents.items():
        print(f"  agent {node:<14} http://{agent.settings.listen}/metrics  /v1/usage", file=out)
    first = next(iter(pipe.agents.values()), None)
    if first is not None:  # /v1/usage asks for the agents' bearer token, as in a cluster
        print(f"  the agents' /v1/usage asks for the bearer token in {pipe.peers.token_file}:\n"
              f"    curl -H \"Authorization: Bearer $(cat {pipe.peers.token_file})\" "
              f"http://{first.settings.listen}/v1/usage", file=out)
    print(f"  {agg_url}/api/v1/recommendations  {agg_url}/api/v1/report?view=budgets", file=out)
    print(calling_as_users(scenario.users, workdir=workdir, listen=listen), end="", file=out)
    print(f"  ledger {pipe.peers.ledger}: " + ("kept after the demo stops, for `gpu-cost-exporter report --ledger "
          f"{pipe.peers.ledger}`" if keep else "deleted when the demo stops (--keep keeps it)"), file=out)
    print(f"  ticks every {scenario.tick:g}s; right-sizing and budget forecasts from the first minutes' evidence "
          "(window 1h, at least 1m); Ctrl-C to stop\n", file=out)
    out.flush()

    async def on_happening(h: Happening) -> None:
        log.info("scenario_event", type=h.type, node=h.node)
        await pipe.restart(h)

    tasks = [asyncio.create_task(realtime_loop(pipe.peers, stop,
                                                on_happening=lambda h: asyncio.ensure_future(on_happening(h))))]
    deadline = None if duration is None else time.monotonic() + duration
    period = refresh or scenario.tick
    shown = ""
    try:
        while not stop.is_set():
            await asyncio.gather(*(a.tick() for a in pipe.agents.values()))
            if pipe.aggregator is not None:
                await pipe.aggregator.tick()
                shown = await _print_tick(pipe.aggregator, out=out, elapsed=clock.now() - pipe.peers.wall_start,
                                          shown=shown)
            if deadline is not None and time.monotonic() >= deadline:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await stop.wait()
    finally:
        stop.set()
        for t in tasks:
            await t
        await pipe.close()
        if keep:
            print(f"ledger kept: gpu-cost-exporter report --ledger {pipe.peers.ledger} --by vendor,gpu_model", file=out)


__all__ = ["Pipeline", "build_report", "run_demo", "run_simulation"]
