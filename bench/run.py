#!/usr/bin/env python3
"""gpu-cost-exporter benchmarks: prints one JSON object, never asserts.

Every figure is taken next to a baseline measured in the same run (these machines are noisy):
prometheus-client's parser for the agent tick, prometheus-client's own Gauge/Counter rendering for
/metrics. ``--quick`` finishes in well under 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench.agents_peer import AGENTS_SERVER  # noqa: E402
from exporter.agent.exporters.dcgm import DEFAULT_NAME_TABLE, build_devices  # noqa: E402
from exporter.agent.holders.attribution import attribute  # noqa: E402
from exporter.agent.meter import Meter  # noqa: E402
from exporter.agent.publish import snapshot_of  # noqa: E402
from exporter.agent.state import dump_meter  # noqa: E402
from exporter.clients.exposition import parse_exposition  # noqa: E402
from exporter.model.exact import exact  # noqa: E402
from exporter.model.pod_resources import ContainerDevices  # noqa: E402
from exporter.model.usage import snapshot_json  # noqa: E402
from exporter.sim.cluster import SimCluster  # noqa: E402
from exporter.sim.scenario import parse_scenario  # noqa: E402


def median_ms(fn: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def rss_mb(pid: int | None = None) -> float:
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- agent tick ------------------------------------------------------------------------------------
def _node_scenario(mig: bool) -> str:
    if mig:
        node = ('{name: n, model: "NVIDIA A100-SXM4-80GB", gpus: 8, mig: {'
                + ", ".join(f"{i}: [{', '.join(['1g.10gb'] * 7)}]" for i in range(8)) + "}}")
        pods = ",".join(f"{{name: p{i}, namespace: ns{i % 4}, node: n, gpus: 1, resource: nvidia.com/mig-1g.10gb, "
                        f"utilization: 0.{i % 9 + 1}}}" for i in range(56))
        prices = '{"NVIDIA A100-SXM4-80GB": 2.5}'
    else:
        node = '{name: n, model: "NVIDIA H100 80GB HBM3", gpus: 8}'
        pods = ",".join(f"{{name: p{i}, namespace: ns{i % 4}, node: n, gpus: 1, utilization: 0.{i + 1}}}"
                        for i in range(8))
        prices = '{"NVIDIA H100 80GB HBM3": 4.0}'
    return f"prices: {prices}\nnodes: [{node}]\npods: [{pods}]\n"


def bench_agent_tick(mig: bool, repeat: int) -> dict[str, float]:
    """One whole agent tick minus the two socket reads: parse DCGM, join pod-resources, count, snapshot."""
    cluster = SimCluster(parse_scenario(_node_scenario(mig), "bench"), 0.0)
    cluster.advance(0.0)
    cluster.advance(60.0)
    text = cluster.render_dcgm("n")
    held = [ContainerDevices(a.pod.namespace, a.pod.name, a.pod.container, a.pod.resource, tuple(a.devices))
            for a in cluster.pod_resources("n")]
    meter = Meter(node="n")
    clock = [0.0]

    def tick() -> None:
        clock[0] += 15.0
        devices = build_devices(parse_exposition(text, only=DEFAULT_NAME_TABLE).samples)
        attribution = attribute(held, devices, allocatable=None, mig_known=meter.mig_known, inventory=meter.inventory)
        meter.tick(clock[0], attribution, dcgm=devices, cap=60.0)
        snapshot_json(snapshot_of(meter, clock[0], dcgm_up=True, podresources_up=True))
        dump_meter(meter)

    tick()
    samples = sum(1 for line in text.splitlines() if line and line[0] != "#")
    return {"tick_ms": median_ms(tick, repeat),
            "baseline_parse_ms": median_ms(lambda: list(text_string_to_metric_families(text)), repeat),
            "samples": samples, "bytes": len(text)}


# -- agent RSS over 1000 ticks (a real agent against a real sim-cluster, separate processes) -----------
RSS_SCRIPT = r"""
import asyncio, json, sys
from pathlib import Path
from exporter.agent.service import Agent
from exporter.config import AgentSettings
from exporter.logs import configure_logging
from exporter.model.exact import exact
env = dict(l.split("=", 1) for l in Path(sys.argv[1]).read_text().splitlines() if l)
ticks = int(sys.argv[2])
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
async def main():
    configure_logging("error", "json")
    s = AgentSettings(node_name=env["GPUCOST_NODE_NAME"], dcgm_url=env["GPUCOST_DCGM_URL"],
                      podresources_socket=Path(env["GPUCOST_PODRESOURCES_SOCKET"]), listen=env["GPUCOST_LISTEN"],
                      state_dir=Path(env["GPUCOST_STATE_DIR"]), podresources_qps=1e6)
    agent = Agent(s)
    await agent.start_http()
    at = {}
    for i in range(1, ticks + 1):
        await agent.tick()
        if i in (100, ticks):
            at[i] = rss()
    await agent.close()
    print(json.dumps({"rss_at_100": at[100], "rss_at_end": at[ticks]}))
asyncio.run(main())
"""


def bare_rss_mb() -> float:
    """The floor every asyncio + aiohttp daemon pays on this interpreter: nothing of ours imported."""
    code = ("import asyncio, aiohttp, aiohttp.web\nfor l in open('/proc/self/status'):\n"
            "    if l.startswith('VmRSS:'): print(int(l.split()[1]) / 1024)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def bench_agent_rss(ticks: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
        scen = Path(tmp) / "s.yaml"
        scen.write_text(_node_scenario(False).replace("prices:", "tick: 1s\nprices:"))
        sim = subprocess.Popen([sys.executable, "-m", "exporter", "sim-cluster", "--scenario", str(scen),
                                "--workdir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 30
            while not (Path(tmp) / "ready").exists() and time.time() < deadline:
                time.sleep(0.1)
            out = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(Path(tmp) / "agents" / "n.env"), str(ticks)],
                                 capture_output=True, text=True, check=True, cwd=REPO).stdout
        finally:
            sim.terminate()
            sim.wait(timeout=20)
    return dict(json.loads(out.strip().splitlines()[-1]))


# -- aggregator tick over N simulated agents ----------------------------------------------------------


def bench_aggregator(nodes: int, ticks: int) -> dict[str, float]:
    from exporter.aggregator.service import Aggregator
    from exporter.config import AggregatorSettings
    from exporter.sim.runner import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", AGENTS_SERVER, str(nodes), str(port)])
    try:
        time.sleep(1.5)
        with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
            settings = AggregatorSettings(listen=f"127.0.0.1:{free_port()}", ledger=Path(tmp) / "l.db",
                                          agents=[f"http://127.0.0.1:{port}/a/{i}" for i in range(nodes)],
                                          pull_concurrency=128, pull_timeout=30)

            async def run() -> list[float]:
                agg = Aggregator(settings)
                await agg.start(serve_http=False)
                times = []
                for _ in range(ticks):
                    t0 = time.perf_counter()
                    await agg.tick()
                    times.append(time.perf_counter() - t0)
                await agg.close()
                return times

            times = asyncio.run(run())
            return {"tick_s": round(statistics.median(times[1:] or times), 3), "first_tick_s": round(times[0], 3),
                    "rss_mb": round(rss_mb(), 1)}
    finally:
        server.terminate()
        server.wait(timeout=20)


def _proc_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _agg_ticks_measured(settings: Any, ticks: int) -> dict[str, Any]:
    """``_agg_ticks`` in this (fresh) process, with its resident memory after the last tick and at its peak."""
    from exporter.logs import configure_logging

    configure_logging("error", "json")
    times = _agg_ticks(settings, ticks)
    return {"times": times, "rss_mb": round(_proc_mb("VmRSS"), 1), "peak_rss_mb": round(_proc_mb("VmHWM"), 1)}


def _agg_ticks_fresh(settings: Any, ticks: int) -> dict[str, Any]:
    """One aggregator's ticks in a fresh interpreter (spawned), so its memory is its own, not what earlier runs
    of this process left behind."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        out: dict[str, Any] = pool.apply(_agg_ticks_measured, (settings, ticks))
    return out


def _agg_ticks(settings: Any, ticks: int) -> list[float]:
    """Seconds per tick of one aggregator (the first, which proves every URL's node, included first)."""
    from exporter.aggregator.service import Aggregator
    from exporter.runtime import freeze_long_lived

    async def run() -> list[float]:
        agg = Aggregator(settings)
        await agg.start(serve_http=False)
        freeze_long_lived()  # as ``Aggregator.run`` does after its start (this process is fresh: once)
        times = []
        for _ in range(ticks):
            t0 = time.perf_counter()
            await agg.tick()
            times.append(time.perf_counter() - t0)
        await agg.close()
        return times

    return asyncio.run(run())


def bench_aggregator_scale(node_counts: tuple[int, ...], ticks: int, shards: int) -> dict[str, Any]:
    """The aggregator tick per backend at each size, side by side in one run, and with ``shards`` shards
    sharing one PostgreSQL ledger at the largest size (run one after another in this process: the slowest
    shard's tick is what bounds the tick interval; on real hardware the shards run on their own cores)."""
    from exporter.config import AggregatorSettings
    from exporter.sim.runner import free_port
    from tests.pg import PG_BIN, start_server

    out: dict[str, Any] = {"ticks": ticks, "how": "agents simulated by one aiohttp server in a separate process; "
                           "median of the ticks after the first; each aggregator in a fresh process: its resident "
                           "memory after the last tick (rss_mb) and at its peak, mid-tick (peak_rss_mb)"}
    server = start_server() if (PG_BIN / "initdb").exists() else None
    try:
        for nodes in node_counts:
            port = free_port()
            agents = subprocess.Popen([sys.executable, "-c", AGENTS_SERVER, str(nodes), str(port)])
            try:
                time.sleep(2.0)
                urls = [f"http://127.0.0.1:{port}/a/{i}" for i in range(nodes)]
                row: dict[str, Any] = {}
                with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
                    targets: list[tuple[str, str, Path | None]] = [("sqlite", str(Path(tmp) / "l.db"), None)]
                    if server is not None:
                        targets.append(("postgres", server.database(), server.password_file))
                    for backend, ledger, pw in targets:
                        settings = AggregatorSettings(listen=f"127.0.0.1:{free_port()}", ledger=ledger,
                                                      ledger_password_file=pw, cluster="bench", agents=urls,
                                                      pull_concurrency=128, pull_timeout=60)
                        run = _agg_ticks_fresh(settings, ticks)
                        times = run["times"]
                        row[backend] = {"tick_s": round(statistics.median(times[1:]), 2),
                                        "first_tick_s": round(times[0], 2), "rss_mb": run["rss_mb"],
                                        "peak_rss_mb": run["peak_rss_mb"]}
                    if server is not None and nodes == max(node_counts) and shards > 1:
                        ledger = server.database()
                        per_shard = []
                        for i in range(shards):
                            settings = AggregatorSettings(
                                listen=f"127.0.0.1:{free_port()}", ledger=ledger,
                                ledger_password_file=server.password_file, cluster="bench", agents=urls,
                                shards=shards, shard_index=i, pull_concurrency=128, pull_timeout=60)
                            times = _agg_ticks_fresh(settings, ticks)["times"]
                            per_shard.append(round(statistics.median(times[1:]), 2))
                        row[f"postgres_{shards}_shards"] = {"tick_s_per_shard": per_shard,
                                                             "slowest_shard_tick_s": max(per_shard)}
                out[str(nodes)] = row
            finally:
                agents.terminate()
                agents.wait(timeout=30)
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.root, ignore_errors=True)
    return out


# -- /metrics rendering ------------------------------------------------------------------------------
def bench_metrics_render(repeat: int) -> dict[str, float]:
    from collections import Counter as Tally

    from exporter.aggregator.books.booking import Books
    from exporter.aggregator.books.gauges import Gauges, PodGauge
    from exporter.aggregator.books.pricing_source import PricingSource
    from exporter.aggregator.kube.state import KubeState
    from exporter.aggregator.ledger.store import LedgerState
    from exporter.aggregator.web.exposition import ExpositionRenderer
    from exporter.aggregator.web.metrics import AggregatorCollector, MetricsInputs
    from exporter.clock import RealClock
    from exporter.model.books import NamespaceKey, NamespaceTotals

    # the collector's view of an aggregator, filled with 500 namespaces and 20 000 pods
    gauges = Gauges()
    gauges.allocated_gpus = {f"ns-{n}": 40.0 for n in range(500)}
    gauges.ns_utilization = {f"ns-{n}": 0.5 for n in range(500)}
    gauges.pods = {(f"ns-{p % 500}", f"pod-{p}"): PodGauge(f"wl-{p // 4}", 1.0, "NVIDIA H100 80GB HBM3", 0.5, 0.0, 4.0)
                   for p in range(20000)}
    gauges.workload_utilization = {(f"ns-{p % 500}", f"wl-{p // 4}"): 0.5 for p in range(0, 20000, 4)}
    inputs = MetricsInputs(
        is_leader=True, gauges=gauges, kube=KubeState(), pricing=PricingSource(None).current, now=RealClock().now(),
        books=Books(LedgerState(totals={NamespaceKey(f"ns-{n}", "USD"): NamespaceTotals(
            allocated_s=exact(1e5), used_s=exact(5e4), unmeasured_s=exact(10.0), cost=exact(100.0),
                idle_cost=exact(40.0)) for n in range(500)})),
        kube_up=True, pricing_reload_errors=0, snapshots_rejected=Tally(), team_label="gpu.platform/team",
        breakdown_series=False)
    collector = AggregatorCollector(lambda: inputs)
    renderer = ExpositionRenderer()  # what /metrics uses; its label cache lives across scrapes
    base = CollectorRegistry()
    c_alloc = Counter("gpucost_allocated_gpu_seconds", "", ["namespace"], registry=base)
    g_alloc = Gauge("gpucost_allocated_gpus", "", ["namespace"], registry=base)
    g_util = Gauge("gpucost_gpu_utilization_ratio", "", ["namespace"], registry=base)
    g_idle = Gauge("gpucost_pod_idle_seconds", "", ["namespace", "pod", "workload"], registry=base)
    g_held = Gauge("gpucost_pod_allocated_gpus", "", ["namespace", "pod", "workload", "gpu_model"], registry=base)
    g_cost = Gauge("gpucost_pod_hourly_cost", "", ["namespace", "pod", "workload", "currency"], registry=base)
    g_wl = Gauge("gpucost_workload_gpu_utilization_ratio", "", ["namespace", "workload"], registry=base)
    for n in range(500):
        c_alloc.labels(f"ns-{n}").inc(1e5)
        g_alloc.labels(f"ns-{n}").set(40)
        g_util.labels(f"ns-{n}").set(0.5)
    for (ns, pod), pg in gauges.pods.items():
        g_idle.labels(ns, pod, pg.workload).set(0)
        g_held.labels(ns, pod, pg.workload, pg.gpu_model).set(1)
        g_cost.labels(ns, pod, pg.workload, "USD").set(4)
    for (ns, wl) in gauges.workload_utilization:
        g_wl.labels(ns, wl).set(0.5)
    renderer.render(list(collector.collect()))
    ticks = [{k: PodGauge(p.workload, p.gpus, p.gpu_model, p.utilization, p.idle_seconds + t, p.hourly_cost)
              for k, p in gauges.pods.items()} for t in range(1, repeat + 1)]  # each a tick's new pod gauges

    def after_tick() -> None:
        gauges.pods = ticks.pop()
        renderer.render(list(collector.collect()))

    changed = median_ms(after_tick, repeat)  # every pod family changed: built and formatted anew
    return {"ms": median_ms(lambda: renderer.render(list(collector.collect())), repeat),  # unchanged: cached bytes
            "changed_ms": changed, "baseline_ms": median_ms(lambda: generate_latest(base), repeat)}


# -- pod deletion -> books closed (real time) ------------------------------------------------------------
def bench_event_to_books_closed(samples: int) -> dict[str, float]:
    from exporter.clock import RealClock
    from exporter.pipeline import Pipeline

    scen = parse_scenario("tick: 1s\nprices: {\"NVIDIA H100 80GB HBM3\": 4}\n"
                          "nodes: [{name: n, model: \"NVIDIA H100 80GB HBM3\", gpus: 8}]\npods: ["
                          + ",".join(f"{{name: p{i}, namespace: ns, node: n, gpus: 1, utilization: 0.5}}"
                                     for i in range(8)) + "]\n", "bench")

    async def run() -> list[float]:
        with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
            pipe = Pipeline(scen, Path(tmp), clock=RealClock())
            await pipe.start(serve_aggregator=False)
            agg = pipe.aggregator
            assert agg is not None
            await pipe.peers.advance(1.0)
            for a in pipe.agents.values():
                await a.tick()
            await agg.tick()
            out = []
            for i in range(samples):
                key = ("ns", f"p{i}")
                assert key in agg.gauges.pods
                t0 = time.perf_counter()
                pipe.peers.cluster.store.delete("pods", "ns", name=f"p{i}")
                while key in agg.gauges.pods:  # noqa: ASYNC110 - polling the effect is what we measure
                    await asyncio.sleep(0.0005)
                out.append((time.perf_counter() - t0) * 1000)
            await pipe.close()
            return out

    values = asyncio.run(run())
    return {"median_ms": round(statistics.median(values), 2), "max_ms": round(max(values), 2)}


# -- simulate speed --------------------------------------------------------------------------------
def bench_simulate(nodes: int, hours: float) -> dict[str, float]:
    from exporter.pipeline import run_simulation

    model = '"NVIDIA H100 80GB HBM3"'
    text = (f"tick: 15s\nduration: {int(hours * 60)}m\nprices: {{{model}: 4}}\nnodes: ["
            + ",".join(f"{{name: n{i}, model: {model}, gpus: 8}}" for i in range(nodes)) + "]\npods: ["
            + ",".join(f"{{name: p{i}-{g}, namespace: ns{g % 3}, node: n{i}, gpus: 1, utilization: 0.5}}"
                       for i in range(nodes) for g in range(6)) + "]\n")
    with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
        stats = asyncio.run(run_simulation(parse_scenario(text, "bench"), Path(tmp) / "l.db", workdir=Path(tmp) / "w"))
    return {"simulated_s": stats["simulated_seconds"], "wall_s": round(stats["wall_seconds"], 2),
            "speed": round(stats["speed"], 1)}


# -- ledger write throughput, SQLite and PostgreSQL side by side --------------------------------------------
def _usage_tick(tick: int, rows: int) -> Any:
    from decimal import Decimal

    from exporter.aggregator.ledger.store import TickWrite
    from exporter.model.books import UsageAmounts, UsageKey

    w = TickWrite()
    hour = 1_793_491_200 + 3600 * (tick // 240)  # a new hour every 240 ticks, as 15 s ticks do
    amounts = UsageAmounts(allocated_s=Decimal(15), used_s=Decimal("7.5"), idle_s=Decimal("7.5"),
                           cost=Decimal("0.0167"), idle_cost=Decimal("0.008"))  # booked: exact decimals
    for i in range(rows):
        w.usage[UsageKey(hour, f"ns-{i % 50}", f"pod-{i}", f"wl-{i // 4}", f"node-{i // 8}", "pool",
                         "NVIDIA H100 80GB HBM3", "", "", "USD")] = amounts
    return w


def bench_ledger_write(rows: int, ticks: int) -> dict[str, Any]:
    """Usage rows per second committed by ``Ledger.commit`` (one transaction per tick of ``rows`` rows,
    upserting the same keys tick after tick as a running cluster does) on each backend."""
    from exporter.aggregator.ledger.store import Ledger

    def measure(target: str, password_file: Path | None) -> float:
        async def run() -> float:
            ledger = Ledger(target, cluster="bench", password_file=password_file)
            await ledger.open()
            writes = [_usage_tick(t, rows) for t in range(ticks)]
            await ledger.commit(writes[0])  # warm: partitions, first inserts
            t0 = time.perf_counter()
            for w in writes[1:]:
                await ledger.commit(w)
            elapsed = time.perf_counter() - t0
            await ledger.close()
            return rows * (ticks - 1) / elapsed

        return asyncio.run(run())

    out: dict[str, Any] = {"rows_per_tick": rows, "ticks": ticks}
    with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
        out["sqlite_rows_per_s"] = round(measure(str(Path(tmp) / "l.db"), None))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg import PG_BIN, start_server

    if not (PG_BIN / "initdb").exists():
        out["postgres_rows_per_s"] = None
        return out
    server = start_server()
    try:
        out["postgres_rows_per_s"] = round(measure(server.database(), server.password_file))
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
    out["how"] = ("one process, loopback TCP to a local PostgreSQL 15 (fsync off, as in the tests) vs a SQLite "
                  "file in WAL mode with synchronous=FULL")
    return out


def _hour_tick(hour_index: int, rows: int) -> Any:
    """One tick's usage and evidence rows for ``rows`` holders, in an hour of their own (new keys)."""
    from exporter.aggregator.ledger.evidence import EvidenceKey, EvidenceRow
    from exporter.model.rightsizing.evidence import UtilHistogram

    w = _usage_tick(hour_index * 240, rows)
    hist = UtilHistogram.empty().add(0.42, 15.0)
    for key in w.usage:
        w.evidence[EvidenceKey(key.hour, key.namespace, key.pod, key.workload, key.node, key.gpu_model, "",
                               "gpu", f"GPU-{key.pod}")] = EvidenceRow(1.0, hist, 6.0e9)
    return w


def bench_ledger_size(rows: int, hours: int) -> dict[str, Any]:
    """Bytes the ledger keeps per usage row and per evidence row (table and indexes), on each backend:
    ``hours`` hours of ``rows`` holders, inserted (no dead rows), sizes read from the database."""
    from exporter.aggregator.ledger.store import Ledger

    async def fill(target: str, password_file: Path | None) -> Ledger:
        ledger = Ledger(target, cluster="bench", password_file=password_file)
        await ledger.open()
        for h in range(hours):
            await ledger.commit(_hour_tick(h, rows))
        return ledger

    total = rows * hours
    out: dict[str, Any] = {"rows_per_hour": rows, "hours": hours}

    async def sqlite_size(path: Path) -> dict[str, float]:
        ledger = await fill(str(path), None)
        await ledger.close()
        import sqlite3

        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        whole = conn.execute("PRAGMA page_count").fetchone()[0] * page
        conn.execute("DELETE FROM evidence")
        conn.commit()
        conn.execute("VACUUM")
        no_evidence = conn.execute("PRAGMA page_count").fetchone()[0] * page
        conn.execute("DELETE FROM usage")
        conn.commit()
        conn.execute("VACUUM")
        empty = conn.execute("PRAGMA page_count").fetchone()[0] * page
        conn.close()
        return {"usage_bytes_per_row": round((no_evidence - empty) / total, 1),
                "evidence_bytes_per_row": round((whole - no_evidence) / total, 1)}

    with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
        out["sqlite"] = asyncio.run(sqlite_size(Path(tmp) / "l.db"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg import PG_BIN, start_server

    if not (PG_BIN / "initdb").exists():
        return out
    server = start_server()

    async def pg_size() -> dict[str, float]:
        ledger = await fill(server.database(), server.password_file)
        usage = await ledger.query(
            "SELECT COALESCE(SUM(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
            "WHERE inhparent = 'usage'::regclass")
        evidence = await ledger.query("SELECT pg_total_relation_size('evidence')")
        await ledger.close()
        return {"usage_bytes_per_row": round(float(usage[0][0]) / total, 1),
                "evidence_bytes_per_row": round(float(evidence[0][0]) / total, 1)}

    try:
        out["postgres"] = asyncio.run(pg_size())
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
    return out


# -- shards: rendezvous hashing, and what checking node marks in each commit costs on PostgreSQL -----------
def bench_shards(nodes: int, rows: int, ticks: int) -> dict[str, Any]:
    """Balance and movement of rendezvous hashing over ``nodes`` names, the time to place them, and usage
    rows per second committed to PostgreSQL with and without the per-node mark check sharded commits do."""
    from collections import Counter

    from exporter.aggregator.ledger.store import Ledger
    from exporter.model.books import AgentMark
    from exporter.model.shard_spec import owner

    names = [f"gpu-node-{i:05d}" for i in range(nodes)]
    t0 = time.perf_counter()
    placed = {n: owner(n, 3) for n in names}
    place_ms = (time.perf_counter() - t0) * 1000
    per = Counter(placed.values())
    out: dict[str, Any] = {
        "nodes": nodes, "place_3_shards_ms": round(place_ms, 1),
        "shard_sizes_3": [per[i] for i in range(3)],
        "moved_2_to_3": round(sum(owner(n, 2) != placed[n] for n in names) / nodes, 4),
        "moved_3_to_4": round(sum(placed[n] != owner(n, 4) for n in names) / nodes, 4)}
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg import PG_BIN, start_server

    if not (PG_BIN / "initdb").exists():
        return out
    node_count = rows // 8

    def measure(target: str, password_file: Path, guard: bool) -> float:
        async def run() -> float:
            ledger = Ledger(target, cluster="bench", password_file=password_file, guard_marks=guard)
            await ledger.open()
            writes = [_usage_tick(t, rows) for t in range(ticks)]
            for t, w in enumerate(writes):
                w.agents.update({f"node-{i}": AgentMark("e", float(t), t) for i in range(node_count)})
            await ledger.commit(writes[0], {f"node-{i}": None for i in range(node_count)})
            t0 = time.perf_counter()
            for t, w in enumerate(writes[1:], start=1):
                prev = {f"node-{i}": AgentMark("e", float(t - 1), t - 1) for i in range(node_count)}
                await ledger.commit(w, prev if guard else None)
            elapsed = time.perf_counter() - t0
            await ledger.close()
            return rows * (ticks - 1) / elapsed

        return asyncio.run(run())

    server = start_server()
    try:
        out["postgres_rows_per_s_unchecked"] = round(measure(server.database(), server.password_file, False))
        out["postgres_rows_per_s_marks_checked"] = round(measure(server.database(), server.password_file, True))
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
    out["commit"] = f"{rows} usage rows and {node_count} node marks a tick, {ticks} ticks, loopback, fsync off"
    return out


# -- FOCUS export memory ---------------------------------------------------------------------------
def _focus_ledger(path: Path, *, nodes: int, days: int, pods_per_node: int) -> int:
    """A month of a big cluster written straight into a Ledger file with SQL (booking would take hours)."""
    from exporter.aggregator.ledger.store import Ledger

    NANO = 10**9  # one unit of seconds or money in the ledger

    async def create() -> None:  # the schema, by the ledger itself
        ledger = Ledger(path)
        await ledger.open()
        await ledger.close()

    asyncio.run(create())
    conn = sqlite3.connect(path)
    start = 1793491200  # 2026-11-01T00:00:00Z
    rows = 0
    model = "NVIDIA H100 80GB HBM3"
    for h in range(days * 24):
        hour = start + h * 3600
        # amounts in the ledger's integer units: nano-units (seconds, money), millijoules (energy)
        usage = [("default", hour, f"ns{p % 7}", f"pod-{n}-{p}", f"wl-{p % 11}", f"node-{n}", f"pool-{n % 5}", model,
                  "", "", "USD", "", "", 3600 * NANO, 1800 * NANO, 0, 1800 * NANO, 4 * NANO, 2 * NANO, 10**9, 4 * NANO)
                 for n in range(nodes) for p in range(pods_per_node)]
        idle_gpus = 8 - pods_per_node
        free = [("default", hour, f"node-{n}", f"pool-{n % 5}", model, "USD", 3600 * NANO * idle_gpus,
                 4 * NANO * idle_gpus, 4 * NANO * idle_gpus) for n in range(nodes)]
        conn.executemany("INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, "
                         "mig_profile, priority_class, currency, claim, sharing, allocated_s, used_s, unmeasured_s, "
                         "idle_s, cost, idle_cost, energy_j, list_cost) VALUES (" + ",".join("?" * 21) + ")", usage)
        conn.executemany("INSERT INTO unallocated (cluster, hour, node, pool, gpu_model, currency, seconds, cost, "
                         "list_cost) VALUES (?,?,?,?,?,?,?,?,?)", free)
        rows += len(usage) + len(free)
    conn.commit()
    conn.close()
    return rows


def _cpu_seconds(fn: Any) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def bench_focus_export(nodes: int, pods_per_node: int = 3) -> dict[str, Any]:
    """tracemalloc peak of the FOCUS CSV export of 1 day and of 30 days of a ``nodes``-node ledger, next to the
    stdlib csv.writer streaming the raw ledger rows of the same window (the floor for any streaming export)."""
    import csv
    import tracemalloc

    from exporter.aggregator.focus.export import export, open_readonly, query_of
    from exporter.aggregator.focus.ledger_source import Window
    from exporter.aggregator.focus.rows import FocusSettings
    from exporter.aggregator.focus.writers import CsvSink

    def measure(fn: Any) -> tuple[float, float]:
        tracemalloc.start()
        t0 = time.perf_counter()
        fn()
        wall = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak / 2**20, wall

    out: dict[str, Any] = {"nodes": nodes, "pods_per_node": pods_per_node}
    with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp:
        path = Path(tmp) / "ledger.db"
        out["ledger_rows_30d"] = _focus_ledger(path, nodes=nodes, days=30, pods_per_node=pods_per_node)
        conn = open_readonly(path)
        start = 1793491200
        for days in (1, 30):
            window = Window(start, start + days * 86400)

            def focus(window: Window = window) -> None:
                with Path(os.devnull).open("w") as sink_file:
                    export(query_of(conn), CsvSink(sink_file, "1.3"), settings=FocusSettings(), window=window)

            def baseline(days: int = days) -> None:
                with Path(os.devnull).open("w") as sink_file:
                    writer = csv.writer(sink_file)
                    for table in ("usage", "unallocated"):
                        for row in conn.execute(f"SELECT * FROM {table} WHERE hour >= ? AND hour < ?",
                                                (start, start + days * 86400)):
                            writer.writerow(row)

            peak, wall = measure(focus)
            base_peak, base_wall = measure(baseline)
            out[f"{days}d"] = {"focus_peak_mb": round(peak, 2), "focus_wall_s": round(wall, 1),
                               "stdlib_csv_peak_mb": round(base_peak, 2), "stdlib_csv_wall_s": round(base_wall, 1)}
            if days == 1:  # throughput without tracemalloc's overhead: CPU seconds, best of 3 (the cores are shared)
                rows = out["ledger_rows_30d"] // 30
                cpu, base_cpu = (min(_cpu_seconds(fn) for _ in range(3)) for fn in (focus, baseline))
                out["1d"] |= {"focus_rows_per_cpu_s": round(rows / cpu),
                              "stdlib_csv_rows_per_cpu_s": round(rows / base_cpu)}
        conn.close()
    out["focus_peak_30d_over_1d"] = round(out["30d"]["focus_peak_mb"] / out["1d"]["focus_peak_mb"], 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, under 3 minutes on 2 cores")
    parser.add_argument("--only", choices=["agent", "ledger", "shards", "scale", "size"], default=None,
                        help="run one benchmark only (scale: 2,500 and 10,000 nodes per backend, 4 shards; ~10 min)")
    parser.add_argument("--focus-only", action="store_true", help="only the FOCUS export memory figure")
    parser.add_argument("--targets", action="store_true",
                        help="every target of issue 28 beside its baseline, with the per-node phase costs")
    args = parser.parse_args()
    from exporter.logs import configure_logging

    configure_logging("error", "json")
    quick = args.quick
    if args.targets:
        from bench.targets_run import FULL, QUICK, run_targets

        print(json.dumps(run_targets(REPO, sizes=QUICK if quick else FULL), indent=2))
        return 0
    if args.only == "agent":
        rss = bench_agent_rss(300 if quick else 1000)
        print(json.dumps({"agent_rss_mb": round(rss["rss_at_end"], 1),
                          "agent_rss_mb_at_tick_100": round(rss["rss_at_100"], 1),
                          "baseline_asyncio_aiohttp_rss_mb": round(bare_rss_mb(), 1)}, indent=2))
        return 0
    if args.only == "size":
        print(json.dumps(bench_ledger_size(2000, 6 if quick else 24), indent=2))
        return 0
    if args.only == "ledger":
        print(json.dumps(bench_ledger_write(2000, 6 if quick else 21), indent=2))
        return 0
    if args.only == "scale":
        sizes = (1000, 2500) if quick else (2500, 10_000)
        print(json.dumps(bench_aggregator_scale(sizes, 3 if quick else 4, 4), indent=2))
        return 0
    if args.only == "shards":
        print(json.dumps(bench_shards(10_000, 2000, 6 if quick else 21), indent=2))
        return 0
    started = time.time()
    if args.focus_only:
        print(json.dumps({"focus_export": bench_focus_export(100 if quick else 500)}, indent=2))
        return 0
    whole = bench_agent_tick(False, 200)
    mig = bench_agent_tick(True, 100)
    rss = bench_agent_rss(1000)
    aggregator = {str(n): bench_aggregator(n, 3 if quick else 5) for n in (250, 1000, 2500)}
    render = bench_metrics_render(5 if quick else 15)
    event = bench_event_to_books_closed(5 if quick else 8)
    sim = bench_simulate(16, 1.0 if quick else 24.0)
    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "agent_tick_ms": round(whole["tick_ms"], 3),
        "baseline_parse_ms": round(whole["baseline_parse_ms"], 3),
        "agent_tick_vs_baseline": round(whole["tick_ms"] / whole["baseline_parse_ms"], 3),
        "agent_payload": {"samples": whole["samples"], "bytes": whole["bytes"]},
        "agent_tick_mig_ms": round(mig["tick_ms"], 3),
        "baseline_parse_mig_ms": round(mig["baseline_parse_ms"], 3),
        "agent_rss_mb": round(rss["rss_at_end"], 1),
        "agent_rss_mb_at_tick_100": round(rss["rss_at_100"], 1),
        "baseline_asyncio_aiohttp_rss_mb": round(bare_rss_mb(), 1),
        "aggregator": aggregator,
        "aggregator_how": "agents simulated by one aiohttp server in a separate process (one URL per agent, 8 GPUs "
                          "each, counters advancing per pull); the aggregator in this process pulls them over "
                          "loopback with concurrency 128, books, commits SQLite and refreshes gauges",
        "metrics_render_ms": round(render["ms"], 2),
        "metrics_render_baseline_ms": round(render["baseline_ms"], 2),
        "metrics_render_vs_baseline": round(render["ms"] / render["baseline_ms"], 3),
        "metrics_render_after_tick_ms": round(render["changed_ms"], 2),  # pod gauges all new: no cached family
        "event_to_books_closed_ms": event["median_ms"],
        "event_to_books_closed_max_ms": event["max_ms"],
        "ledger_write": bench_ledger_write(2000, 6 if quick else 21),
        "simulate_speed": sim["speed"],
        "simulate_scenario": f"16 nodes x 8 GPUs, 96 pods, {sim['simulated_s'] / 3600:g} h at 15 s ticks",
        "focus_export": bench_focus_export(100 if quick else 500),
        "wall_seconds": round(time.time() - started, 1),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
