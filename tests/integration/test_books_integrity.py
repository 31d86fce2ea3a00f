"""Books that no misconfigured or hostile agent can corrupt: real agents and a real aggregator on loopback,
against the simulator's real peers, plus hostile HTTP servers that answer ``/v1/usage`` with lies."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from structlog.testing import capture_logs

from exporter.agent.service import Agent
from exporter.aggregator.service import Aggregator
from exporter.clock import VirtualClock
from exporter.config import AgentSettings, AggregatorSettings
from exporter.model.books import NamespaceKey
from exporter.sim.runner import SimPeers, free_port
from exporter.sim.scenario import parse_scenario
from tests.pg import PASSWORD, LedgerTarget, ledger_target_fixture, postgres_fixture

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name
pytestmark = pytest.mark.timeout(60)  # in-process rigs, each test well under 2 s

START = 1_800_000_000.0
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.0, "NVIDIA L4": 0.8}
nodes:
  - {name: a100, model: "NVIDIA A100-SXM4-80GB", gpus: 2}
  - {name: l4, model: "NVIDIA L4", gpus: 1}
pods:
  - {name: whole, namespace: t, node: a100, gpus: 1, utilization: 0.5}
  - {name: small, namespace: d, node: l4, gpus: 1, utilization: 0.2}
"""


class Rig:
    """Simulated peers on a virtual clock, real agents per node, one real aggregator."""

    def __init__(self, peers: SimPeers, clock: VirtualClock, tmp: Path) -> None:
        self.peers, self.clock, self.tmp = peers, clock, tmp
        self.agents: dict[str, Agent] = {}
        self.aggregator: Aggregator | None = None

    async def agent(self, key: str, *, node: str, peers_of: str | None = None, listen: str | None = None) -> str:
        """Start an agent calling itself ``node`` that reads the peers of ``peers_of`` (default: its own)."""
        env = self.peers.agent_env(peers_of or node)
        listen = listen or f"127.0.0.1:{free_port()}"
        settings = AgentSettings(
            node_name=node, dcgm_url=env["GPUCOST_DCGM_URL"], listen=listen,
            podresources_socket=Path(env["GPUCOST_PODRESOURCES_SOCKET"]), state_dir=self.tmp / f"state-{key}",
            tick=15.0, podresources_qps=1e6)
        agent = Agent(settings, clock=self.clock)
        await agent.start_http()
        self.agents[key] = agent
        return f"http://{listen}"

    async def start_aggregator(self, **kw: Any) -> Aggregator:
        kw.setdefault("ledger", self.tmp / "ledger.db")
        agg = Aggregator(AggregatorSettings(listen=f"127.0.0.1:{free_port()}", **kw), clock=self.clock)
        await agg.start(serve_http=False)
        self.aggregator = agg
        return agg

    async def agents_at(self, t: int) -> None:
        """The peers and every agent moved to ``t`` seconds after the start (the aggregator not yet ticked)."""
        self.clock.set(START + t)
        await self.peers.advance(t)
        for a in self.agents.values():
            await a.tick()

    async def run(self, seconds: range) -> None:
        assert self.aggregator is not None
        for t in seconds:
            await self.agents_at(t)
            await self.aggregator.tick()

    def agent_allocated(self, key: str, namespace: str) -> float:
        """What the agent itself counted for a namespace: the truth the ledger must equal."""
        return sum(h.usage.allocated for h in self.agents[key].meter.holders.values() if h.namespace == namespace)

    def booked(self, namespace: str) -> float:
        assert self.aggregator is not None and self.aggregator.books is not None
        totals = self.aggregator.books.totals.get(NamespaceKey(namespace, "USD"))
        return float(totals.allocated_s) if totals else 0.0


@pytest.fixture(name="rig")
async def _rig(tmp_path: Path) -> AsyncIterator[Rig]:
    clock = VirtualClock(START)
    peers = SimPeers(parse_scenario(SCENARIO, "integrity.yaml"), tmp_path, START)
    await peers.start()
    rig = Rig(peers, clock, tmp_path)
    yield rig
    if rig.aggregator is not None:
        await rig.aggregator.close()
    for a in rig.agents.values():
        await a.close()
    await peers.close()


async def test_impostor_claiming_another_nodes_name_is_refused(rig: Rig) -> None:
    """An agent on the l4 node that calls itself "a100" (another epoch) used to make a100's whole counter
    look like a reset every tick (1000 real GPU-s booked as 5500 in 10 ticks). The URL that first proved
    a100 is pinned; the impostor is refused every tick and a100 is booked exactly once."""
    real = await rig.agent("a100", node="a100")
    impostor = await rig.agent("impostor", node="a100", peers_of="l4")
    agg = await rig.start_aggregator(agents=[real, impostor])
    await rig.run(range(0, 165, 15))
    assert rig.agent_allocated("a100", "t") == pytest.approx(150.0)  # 1 GPU x 150 s
    assert rig.booked("t") == pytest.approx(150.0)
    assert agg.gate.rejected["node_mismatch"] == 11
    assert agg.gate.pins == {"a100": real}
    rows = await agg.ledger.query("SELECT node, url FROM agent_urls")
    assert rows == [("a100", real)]


async def test_discovery_only_in_the_agent_namespace_and_only_for_the_pods_node(rig: Rig) -> None:
    """Discovered agents: a pod with the agent labels in another namespace is never pulled (and never sent
    the token); an agent pod on node l4 whose agent claims to be a100 is refused."""
    port = free_port()  # discovery builds URLs from podIP and one port: one loopback address per agent
    await rig.agent("a100", node="a100", listen=f"127.0.0.11:{port}")
    await rig.agent("liar", node="a100", peers_of="l4", listen=f"127.0.0.12:{port}")
    await rig.agent("elsewhere", node="l4", listen=f"127.0.0.13:{port}")

    def agent_pod(name: str, namespace: str, node: str, ip: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "uid": f"u-{name}",
                             "labels": {"app.kubernetes.io/component": "agent"}},
                "spec": {"nodeName": node, "containers": [{"name": "agent"}]},
                "status": {"phase": "Running", "podIP": ip}}

    store = rig.peers.cluster.store
    store.upsert("pods", agent_pod("agent-a100", "gpu-cost-exporter", "a100", "127.0.0.11"))
    store.upsert("pods", agent_pod("agent-l4", "gpu-cost-exporter", "l4", "127.0.0.12"))
    store.upsert("pods", agent_pod("agent-x", "other", "l4", "127.0.0.13"))
    agg = await rig.start_aggregator(kubeconfig=rig.peers.kubeconfig, agent_port=port,
                                     agent_namespace="gpu-cost-exporter")
    assert await agg.wait_synced()
    await rig.run(range(0, 165, 15))
    assert set(agg.agent_urls()) == {f"http://127.0.0.11:{port}", f"http://127.0.0.12:{port}"}
    assert rig.booked("t") == pytest.approx(rig.agent_allocated("a100", "t")) == pytest.approx(150.0)
    assert rig.booked("d") == 0.0  # the only agent of l4 that was pulled lies about its node
    assert agg.gate.rejected["node_mismatch"] == 11
    assert not rig.agents["elsewhere"].acked_until  # never pulled (an ack would have reached it)


async def test_one_agent_behind_two_urls_is_booked_once(rig: Rig) -> None:
    """``http://127.0.0.1:P`` and ``http://localhost:P`` reach the same agent: every namespace was booked
    exactly 2.00x. Now the node is one snapshot per tick: 1.00x, the second URL refused."""
    url = await rig.agent("a100", node="a100")
    port = url.rsplit(":", 1)[1]
    agg = await rig.start_aggregator(agents=[url, f"http://localhost:{port}"])
    await rig.run(range(0, 165, 15))
    assert rig.booked("t") / rig.agent_allocated("a100", "t") == pytest.approx(1.0)
    assert agg.gate.rejected["duplicate"] + agg.gate.rejected["node_mismatch"] == 11


def _hostile_snapshot(node: str, **overrides: Any) -> Callable[[float], str]:
    def body(now: float) -> str:
        snap: dict[str, Any] = {"node": node, "epoch": "evil", "timestamp": now, "seq": int(now),
                                "started_at": now - 15,
                                "holders": [{"namespace": "x", "pod": "p", "container": "c", "device_id": "GPU-9",
                                             "fraction": 1.0, "allocated_s": 15.0, "used_s": 0.0,
                                             "unmeasured_s": 0.0}]}
        snap.update(overrides)
        text = json.dumps(snap)
        for token in ("NaN", "Infinity", "1e400"):  # JSON has no NaN/Infinity literals; write them raw
            text = text.replace(f'"{token}"', token)
        return text
    return body


@pytest.mark.parametrize(("overrides", "reason"), [
    ({"timestamp": "NaN"}, "invalid"),
    ({"timestamp": "Infinity"}, "invalid"),
    ({"holders": [{"namespace": "x", "pod": "p", "container": "c", "device_id": "GPU-9", "fraction": 1.0,
                   "allocated_s": "1e400", "used_s": 0.0, "unmeasured_s": 0.0}]}, "invalid"),
    ({"holders": [{"namespace": "x", "pod": "p", "container": "c", "device_id": "GPU-9", "fraction": 1.0,
                   "allocated_s": -5.0, "used_s": 0.0, "unmeasured_s": 0.0}]}, "invalid"),
    ({"capacity": [{"gpu_uuid": "GPU-9", "gpu_model": "NVIDIA L4"}],
      "holders": [{"namespace": "x", "pod": "p", "container": "c", "device_id": "GPU-9", "fraction": 1.0,
                   "allocated_s": 1e12, "used_s": 0.0, "unmeasured_s": 0.0}]}, "faster_than_wall_time"),
])
async def test_a_hostile_snapshot_is_refused_for_that_agent_only(rig: Rig, overrides: dict[str, Any],
                                                                 reason: str) -> None:
    """NaN/Infinity timestamps made the whole tick fail for every node, every tick; 1e400 made totals
    infinite for ever. Now such a snapshot is refused for its agent only; the other agents' books close."""
    body = _hostile_snapshot("l4", **overrides)

    async def usage(_request: web.Request) -> web.Response:
        return web.Response(text=body(rig.clock.now()), content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/usage", usage)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        real = await rig.agent("a100", node="a100")
        agg = await rig.start_aggregator(agents=[real, f"http://127.0.0.1:{port}"])
        await rig.run(range(0, 165, 15))
        assert rig.booked("t") == pytest.approx(150.0)
        assert rig.booked("x") == 0.0
        assert agg.gate.rejected[reason] >= 10
        assert agg.gauges.agents["a100"].up
        (count,) = await agg.ledger.query("SELECT COUNT(*) FROM usage WHERE namespace = 'x'")
        assert count == (0,)
    finally:
        await runner.cleanup()


async def test_deleted_node_is_pruned_after_the_grace_and_its_time_kept(rig: Rig) -> None:
    """A node deleted from the API: while it is gone its agent's snapshots wait (refused as unknown_node),
    then its books close: the time between its last booking and its deletion is unobserved, its marks and
    pin are pruned from the ledger, and it leaves gpucost_agent_up and the pools. The other node's books
    go on."""
    a100 = await rig.agent("a100", node="a100")
    l4 = await rig.agent("l4", node="l4")
    agg = await rig.start_aggregator(agents=[a100, l4], kubeconfig=rig.peers.kubeconfig, node_prune_grace=30.0)
    assert await agg.wait_synced()
    await rig.run(range(0, 75, 15))  # both booked up to t=60
    assert set(agg.gauges.agents) == {"a100", "l4"}
    when = datetime.fromtimestamp(START + 75, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rig.peers.cluster.store.delete("nodes", "", name="l4", at=when)
    await rig.run(range(75, 165, 15))
    assert "l4" not in agg.gauges.agents and "l4" not in agg.latest
    assert agg.gate.rejected["unknown_node"] >= 1
    assert await agg.ledger.query("SELECT COUNT(*) FROM agents WHERE node = 'l4'") == [(0,)]
    assert await agg.ledger.query("SELECT COUNT(*) FROM hwm WHERE node = 'l4'") == [(0,)]
    assert rig.booked("t") == pytest.approx(150.0)
    assert rig.booked("d") == pytest.approx(60.0)  # held [0, 60]; later time waited and was closed
    # deleted at t=75, last booked at t=60: 1 GPU x (75 - 60) s unobserved
    (unobserved,) = await agg.ledger.query("SELECT SUM(seconds) FROM unobserved WHERE node = 'l4'")
    assert unobserved[0] == pytest.approx(15.0)


@pytest.fixture(name="service_cert")
def _service_cert(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate naming a Service (agents.gpu.svc), not an address."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "agent.crt", tmp_path / "agent.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=agents.gpu.svc", "-addext",
                    "subjectAltName=DNS:agents.gpu.svc"], check=True, capture_output=True)
    return cert, key


async def test_agents_pulled_by_address_verify_against_the_service_name(rig: Rig, tmp_path: Path,
                                                                       service_cert: tuple[Path, Path]) -> None:
    """Discovered agents are reached by pod IP, but one certificate cannot name every pod IP: the
    aggregator verifies the name the certificate carries (GPUCOST_AGENT_TLS_SERVER_NAME). Without it the
    pull fails verification; with it the books close."""
    cert, key = service_cert
    env = rig.peers.agent_env("a100")
    listen = f"127.0.0.1:{free_port()}"
    agent = Agent(AgentSettings(node_name="a100", dcgm_url=env["GPUCOST_DCGM_URL"], listen=listen,
                                podresources_socket=Path(env["GPUCOST_PODRESOURCES_SOCKET"]),
                                state_dir=tmp_path / "state", tick=15.0, podresources_qps=1e6,
                                tls_cert_file=cert, tls_key_file=key), clock=rig.clock)
    await agent.start_http()
    rig.agents["a100"] = agent
    agg = await rig.start_aggregator(agents=[f"https://{listen}"], agent_ca_file=cert)
    await rig.run(range(0, 45, 15))
    assert not agg.gauges.agents["127.0.0.1:" + listen.rsplit(":", 1)[1]].up  # the IP is not in the certificate
    await agg.close()
    agg = await rig.start_aggregator(agents=[f"https://{listen}"], agent_ca_file=cert,
                                     agent_tls_server_name="agents.gpu.svc")
    await rig.run(range(45, 90, 15))
    assert agg.gauges.agents["a100"].up
    assert rig.booked("t") == pytest.approx(75.0)


async def test_an_agent_first_seen_down_is_reported_by_its_node_once_it_answers(rig: Rig) -> None:
    """An agent pulled before it serves is reported under its address (its node is not known yet); once it
    answers, it is reported under its node and the address-named series goes, so no stale
    ``gpucost_agent_up{node="127.0.0.1:P"} 0`` keeps an agent-down alert firing for ever."""
    listen = f"127.0.0.1:{free_port()}"
    agg = await rig.start_aggregator(agents=[f"http://{listen}"])
    await rig.run(range(0, 15, 15))
    assert {n: h.up for n, h in agg.gauges.agents.items()} == {listen: False}
    await rig.agent("a100", node="a100", listen=listen)
    await rig.run(range(15, 45, 15))
    assert {n: h.up for n, h in agg.gauges.agents.items()} == {"a100": True}


async def test_a_failure_of_the_held_gauges_never_stops_the_books(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-now gauges are worked out while the commit runs on the ledger's thread. A failure there (a bug)
    must not leave a committed tick unapplied, which would book its deltas again next tick: the books still
    equal the agent's own count (1 GPU x 150 s) and the gauges come from the fallback after the commit."""
    real = await rig.agent("a100", node="a100")
    agg = await rig.start_aggregator(agents=[real])
    held, calls = agg._held, []

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("gauges bug")
        return held(*args, **kwargs)

    monkeypatch.setattr(agg, "_held", fails_once)
    await rig.run(range(0, 165, 15))
    assert rig.agent_allocated("a100", "t") == pytest.approx(150.0)
    assert rig.booked("t") == pytest.approx(150.0)
    assert await agg.ledger.query("SELECT SUM(allocated_s) FROM usage WHERE namespace = 't'") == [
        (pytest.approx(150.0),)]
    assert agg.gauges.allocated_gpus == {"t": 1.0}
    assert len(calls) == 12  # 11 ticks, the first of them twice (the fallback after its commit)


async def test_gauges_worked_out_before_a_pod_deletion_are_not_shown_after_it(rig: Rig,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod deleted while a tick's commit runs (``_on_pod_deleted`` counts it) makes the gauges worked out beside
    the commit stale: that tick works them out again after its commit, so 11 ticks take 12 computations."""
    real = await rig.agent("a100", node="a100")
    agg = await rig.start_aggregator(agents=[real])
    held, commit, calls, commits = agg._held, agg.ledger.commit, [], []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return held(*args, **kwargs)

    async def deleting(*args: Any, **kwargs: Any) -> None:
        commits.append(1)
        if len(commits) == 3:
            agg.pods_deleted += 1  # what a deletion seen by the watch does meanwhile
        await commit(*args, **kwargs)

    monkeypatch.setattr(agg, "_held", counted)
    monkeypatch.setattr(agg.ledger, "commit", deleting)
    await rig.run(range(0, 165, 15))
    assert (len(commits), len(calls)) == (11, 12)
    assert rig.booked("t") == pytest.approx(150.0)


class _WriteLock:
    """Another session holding what the tick's commit must write (SQLite: the database's one write lock; PostgreSQL:
    the agents table, in SHARE mode), so the commit waits inside its transaction until ``release``."""

    def __init__(self, t: LedgerTarget) -> None:
        self.t = t
        if t.backend == "sqlite":
            self.sqlite = sqlite3.connect(t.target, isolation_level=None)
            self.sqlite.execute("BEGIN IMMEDIATE")
        else:
            import psycopg

            self.pg = psycopg.connect(t.target, password=PASSWORD)
            self.pg.execute("LOCK TABLE agents IN SHARE MODE")

    def release(self) -> None:
        """End the other session's transaction (again: a no-op)."""
        if self.t.backend == "sqlite":
            if self.sqlite.in_transaction:
                self.sqlite.execute("COMMIT")
            self.sqlite.close()
        elif not self.pg.closed:
            self.pg.commit()
            self.pg.close()


async def test_a_tick_cancelled_mid_commit_is_applied_before_it_stops(rig: Rig, ledger_target: LedgerTarget,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM cancels a running tick (the scheduler's shutdown), then the daemon ticks once more to flush. A
    commit already on the ledger's thread cannot be called back: it used to land while the cancelled tick never
    advanced the marks, so the flush booked the same 15 s again (165 GPU-s in the ledger for 150 held). Here the
    commit waits on another session's lock, the tick is cancelled there, the lock is released: the cancel ends
    the tick only after its commit was applied, and 11 ticks book 1 GPU x 150 s, in memory and in the ledger."""
    real = await rig.agent("a100", node="a100")
    pg = ledger_target.backend == "postgres"
    agg = await rig.start_aggregator(agents=[real], ledger=ledger_target.target, cluster="c1" if pg else "",
                                     ledger_password_file=ledger_target.password_file)
    await rig.run(range(0, 75, 15))  # booked up to t=60
    entered = threading.Event()
    commit_sync = agg.ledger.commit_sync

    def observed(*args: Any, **kwargs: Any) -> None:  # the real commit, on the ledger's thread, seen entering
        entered.set()
        commit_sync(*args, **kwargs)

    monkeypatch.setattr(agg.ledger, "commit_sync", observed)
    lock = _WriteLock(ledger_target)
    try:  # released whatever happens: a lock left held would stall the other tests on this server
        await rig.agents_at(75)
        tick = asyncio.ensure_future(agg.tick())
        assert await asyncio.to_thread(entered.wait, 10.0)
        await asyncio.sleep(0.2)  # inside the transaction, waiting for the lock (it waits up to 5 s / 30 s)
        tick.cancel()
        await asyncio.sleep(0.2)
        assert not tick.done()  # the cancel waits for the commit
    finally:
        lock.release()
    with pytest.raises(asyncio.CancelledError):
        await tick
    assert rig.booked("t") == pytest.approx(75.0)  # the cancelled tick's 15 s were applied in memory
    await rig.run(range(90, 165, 15))
    assert rig.agent_allocated("a100", "t") == pytest.approx(150.0)
    assert rig.booked("t") == pytest.approx(150.0)
    (booked,) = await agg.ledger.query("SELECT SUM(allocated_s) FROM usage WHERE namespace = 't'")
    assert float(booked[0]) == pytest.approx(150.0)


async def test_a_cancel_that_meets_a_failed_commit_still_stops_the_tick(rig: Rig,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The cancel reaches the tick as it hands its commit over, and that commit then fails: the tick used to end
    with the commit's error, which the daemon logs as a failed tick and goes on (the SIGTERM lost). Now it ends
    cancelled, the failure logged, nothing applied; the next ticks book the agent's 150 GPU-s exactly. (The failure
    is injected on the instance: a real database cannot be made to fail at that moment.)"""
    real = await rig.agent("a100", node="a100")
    agg = await rig.start_aggregator(agents=[real])
    await rig.run(range(0, 75, 15))
    commit = agg.ledger.commit

    async def cancelled_then_failed(*args: Any, **kwargs: Any) -> None:
        tick.cancel()
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(agg.ledger, "commit", cancelled_then_failed)
    await rig.agents_at(75)
    tick = asyncio.ensure_future(agg.tick())
    with capture_logs() as logs, pytest.raises(asyncio.CancelledError):
        await tick
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["work_failed_while_cancelled"]
    assert rig.booked("t") == pytest.approx(60.0)  # the failed commit applied nothing
    monkeypatch.setattr(agg.ledger, "commit", commit)
    await rig.run(range(90, 165, 15))
    assert rig.booked("t") == pytest.approx(rig.agent_allocated("a100", "t")) == pytest.approx(150.0)
