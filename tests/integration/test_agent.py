"""The agent against real peers on loopback: the simulator's DCGM endpoint and kubelet gRPC socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.agent.service import Agent
from exporter.agent.state import state_path
from exporter.clock import VirtualClock
from exporter.config import AgentSettings
from exporter.sim.runner import SimPeers, free_port
from exporter.sim.scenario import parse_scenario
from tests.metrics_peer import serve_metrics

START = 1_800_000_000.0
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.0, "NVIDIA L4": 0.8}
nodes:
  - {name: a100, model: "NVIDIA A100-SXM4-80GB", gpus: 2, mig: {0: [3g.40gb, 1g.10gb]}}
  - {name: l4, model: "NVIDIA L4", gpus: 1, time_slicing: 4}
pods:
  - {name: whole, namespace: t, node: a100, gpus: 1, utilization: 0.5}
  - {name: mig3, namespace: t, node: a100, gpus: 1, resource: nvidia.com/mig-3g.40gb, utilization: 0.7}
  - {name: share1, namespace: d, node: l4, gpus: 1, utilization: 0.2}
  - {name: share2, namespace: d, node: l4, gpus: 2, utilization: 0.4}
events:
  - {type: dcgm_down, node: a100, from: 60s, to: 90s}
"""


class Rig:
    def __init__(self, peers: SimPeers, clock: VirtualClock) -> None:
        self.peers, self.clock = peers, clock
        self.agents: dict[str, Agent] = {}

    def settings(self, node: str, **kw: object) -> AgentSettings:
        env = self.peers.agent_env(node)
        base: dict[str, object] = {
            "node_name": node, "dcgm_url": env["GPUCOST_DCGM_URL"], "listen": env["GPUCOST_LISTEN"],
            "podresources_socket": Path(env["GPUCOST_PODRESOURCES_SOCKET"]),
            "state_dir": Path(env["GPUCOST_STATE_DIR"]), "tick": 15.0, "podresources_qps": 1e6}
        if "podresources_socket" in kw or "dcgm_url" in kw:
            base["listen"] = f"127.0.0.1:{free_port()}"
        return AgentSettings(**{**base, **kw})  # type: ignore[arg-type]

    async def start(self, node: str) -> Agent:
        agent = Agent(self.settings(node), clock=self.clock)
        await agent.start_http()
        self.agents[node] = agent
        return agent

    async def step(self, t: float) -> None:
        self.clock.set(START + t)
        await self.peers.advance(t)
        for a in self.agents.values():
            await a.tick()


@pytest.fixture(name="rig")
async def _rig(tmp_path: Path) -> AsyncIterator[Rig]:
    clock = VirtualClock(START)
    peers = SimPeers(parse_scenario(SCENARIO, "agent.yaml"), tmp_path, START)
    await peers.start()
    rig = Rig(peers, clock)
    yield rig
    for a in rig.agents.values():
        await a.close()
    await peers.close()


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.text()


def _holders(agent: Agent) -> dict[str, dict[str, Any]]:
    snap = json.loads(agent.published_json or b"{}")
    return {h["pod"] + "/" + h["device_id"][:3] + ("" if "::" not in h["device_id"] else h["device_id"][-3:]): h
            for h in snap["holders"]}


async def test_metrics_show_every_device_and_counters_grow_by_fraction_times_tick(rig: Rig) -> None:
    """/metrics has each DCGM device's utilisation; /v1/usage grows by fraction x 15 s per tick."""
    a100 = await rig.start("a100")
    l4 = await rig.start("l4")
    await rig.step(0)
    await rig.step(15)
    await rig.step(30)
    status, text = await _get(f"http://{a100.settings.listen}/metrics")
    assert status == 200
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    util = {(s.labels["mig_profile"], s.labels["gpu_i_id"]): s.value
            for s in fams["gpucost_device_utilization_ratio"].samples}
    # GPU 0: 3g.40gb (held, 0.7) and 1g.10gb (free, 0); GPU 1: whole (held, 0.5)
    assert sorted(util.values()) == [0.0, pytest.approx(0.5), pytest.approx(0.7)]
    assert len(util) == 3
    h = _holders(a100)
    assert h["whole/GPU"]["allocated_s"] == pytest.approx(30.0)
    assert h["whole/GPU"]["used_s"] == pytest.approx(15.0)
    assert h["mig3/MIG"]["allocated_s"] == pytest.approx(30 * 3 / 7)
    assert h["mig3/MIG"]["used_s"] == pytest.approx(30 * 3 / 7 * 0.7)
    assert h["mig3/MIG"]["gpu_model"] == "NVIDIA A100-SXM4-80GB"
    # L4: 4 replicas; share1 holds 1 (0.25), share2 holds 2 (0.5); device util = 0.2 + 0.4 = 0.6 (a pod
    # counts once); busy 0.6 x 15 = 9 GPU-s per tick split 1:2 -> 3 and 6 (under the 3.75 and 7.5 caps).
    s = _holders(l4)
    share2 = [v for k, v in s.items() if k.startswith("share2")]
    assert s["share1/GPU::0"]["allocated_s"] == pytest.approx(7.5)
    assert s["share1/GPU::0"]["used_s"] == pytest.approx(6.0)
    assert sum(v["allocated_s"] for v in share2) == pytest.approx(15.0)
    assert sum(v["used_s"] for v in share2) == pytest.approx(12.0)
    snap = json.loads(a100.published_json or b"{}")
    # unallocated on the A100 node: 2 GPUs - 1 - 3/7 = 4/7 GPU for 30 s
    assert snap["unallocated"][0]["seconds"] == pytest.approx(30 * 4 / 7)


async def test_dcgm_down_counts_unmeasured_not_used(rig: Rig) -> None:
    """60-90 s DCGM is down: the 75 and 90 s ticks add 30 s allocated and unmeasured, no used."""
    a100 = await rig.start("a100")
    for t in (0, 15, 30, 45, 60):
        await rig.step(t)
    before = _holders(a100)["whole/GPU"]
    await rig.step(75)
    await rig.step(89)
    after = _holders(a100)["whole/GPU"]
    assert after["allocated_s"] - before["allocated_s"] == pytest.approx(29.0)
    assert after["unmeasured_s"] - before["unmeasured_s"] == pytest.approx(29.0)
    assert after["used_s"] == pytest.approx(before["used_s"])
    health = json.loads((await _get(f"http://{a100.settings.listen}/healthz"))[1])
    assert health["status"] == "degraded" and health["dcgm_up"] is False
    status, _ = await _get(f"http://{a100.settings.listen}/readyz")
    assert status == 503


async def test_restart_resumes_and_corrupt_state_starts_new_epoch(rig: Rig) -> None:
    """A restarted agent resumes its counters and epoch; a corrupt state file gives a new epoch."""
    a100 = await rig.start("a100")
    for t in (0, 15, 30):
        await rig.step(t)
    epoch = a100.meter.epoch
    await a100.close()
    del rig.agents["a100"]
    a100 = await rig.start("a100")
    assert a100.meter.epoch == epoch
    await rig.step(45)
    assert _holders(a100)["whole/GPU"]["allocated_s"] == pytest.approx(45.0)
    await a100.close()
    del rig.agents["a100"]
    state_path(rig.settings("a100").state_dir).write_text("{not json")
    a100 = await rig.start("a100")
    assert a100.meter.epoch != epoch and a100.health.state_resets == 1
    await rig.step(60)
    await rig.step(75)
    assert _holders(a100)["whole/GPU"]["allocated_s"] == pytest.approx(15.0)


async def test_missing_socket_keeps_agent_up_and_degraded(rig: Rig, tmp_path: Path) -> None:
    """No kubelet socket: the agent keeps serving, /healthz says degraded, nothing is charged blindly."""
    agent = Agent(rig.settings("a100", podresources_socket=tmp_path / "nope.sock"), clock=rig.clock)
    await agent.start_http()
    rig.agents["x"] = agent
    await rig.step(0)
    await rig.step(15)
    status, body = await _get(f"http://{agent.settings.listen}/healthz")
    assert status == 200 and json.loads(body)["podresources_up"] is False
    assert json.loads(agent.published_json or b"{}")["holders"] == []
    status, text = await _get(f"http://{agent.settings.listen}/metrics")
    assert "gpucost_agent_podresources_up 0.0" in text


async def test_socket_vanishes_and_returns(rig: Rig) -> None:
    """The kubelet restarts (socket removed, recreated): the agent reconnects without a restart."""
    l4 = await rig.start("l4")
    await rig.step(0)
    await rig.step(15)
    assert _holders(l4)["share1/GPU::0"]["allocated_s"] == pytest.approx(3.75)
    await rig.peers.nodes["l4"].kubelet.stop()
    rig.clock.set(START + 200)
    await l4.tick()  # beyond the charge cap without holders: nothing charged
    assert l4.health.podresources_up is False
    await rig.peers.nodes["l4"].kubelet.start()
    await rig.step(215)
    assert l4.health.podresources_up is True
    assert _holders(l4)["share1/GPU::0"]["allocated_s"] == pytest.approx(3.75 + 3.75)


@pytest.fixture(name="hostile")
async def _hostile() -> AsyncIterator[tuple[str, dict[str, str]]]:
    body = {"text": ""}

    runner, url = await serve_metrics(lambda: body["text"])
    yield url, body
    await runner.cleanup()


@pytest.mark.parametrize("payload", [
    'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-x",modelName="M"} NaN\n',
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x",modelName="M"} 150\n',
    'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-x",modelName="M"} -0.5\n',
    'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-x\\q"} 1\n{{{\n',
    "x" * (11 << 20),
], ids=["nan", "150-percent", "negative", "bad-escape", "11MB-body"])
async def test_hostile_exposition_never_crashes_the_tick(rig: Rig, hostile: tuple[str, dict[str, str]],
                                                        payload: str) -> None:
    """NaN, 150 %, negative, bad escapes and an 11 MB body: the tick completes and the agent serves."""
    url, body = hostile
    body["text"] = payload
    agent = Agent(rig.settings("a100", dcgm_url=url, dcgm_max_bytes=10 << 20), clock=rig.clock)
    await agent.start_http()
    rig.agents["h"] = agent
    await rig.step(0)
    await rig.step(15)
    assert agent.health.ticks == 2
    status, _ = await _get(f"http://{agent.settings.listen}/metrics")
    assert status == 200
    if len(payload) > 1 << 20:
        assert agent.health.dcgm_up is False  # refused as too large, not parsed
    for h in json.loads(agent.published_json or b"{}")["holders"]:
        assert 0 <= h["used_s"] <= h["allocated_s"]


OLD_KUBELET = """
tick: 15s
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: old, model: "NVIDIA H100 80GB HBM3", gpus: 2, kubelet_lists_terminated: true}]
pods:
  - {name: done, namespace: t, node: old, gpus: 1, end: 30s, utilization: 0.9}
  - {name: live, namespace: t, node: old, gpus: 1, utilization: 0.4}
"""


@pytest.mark.parametrize("watch", [False, True], ids=["no-watch", "own-node-watch"])
async def test_finished_pods_listed_by_old_kubelets(tmp_path: Path, watch: bool) -> None:
    """Kubelets before 1.34 keep listing finished pods. Without the own-node pod watch the agent keeps
    charging them (what the watch is for); with it, 'done' stops at its finishedAt (30 s) while 'live' goes on.
    Without the watch both of its boundaries fall back to tick resolution and are counted."""
    clock = VirtualClock(START)
    peers = SimPeers(parse_scenario(OLD_KUBELET, "old.yaml"), tmp_path, START)
    await peers.start()
    rig = Rig(peers, clock)
    agent = Agent(rig.settings("old", watch_pods=watch, kubeconfig=peers.kubeconfig), clock=clock)
    rig.agents["old"] = agent
    try:
        if watch:
            await agent.start_pod_watch()
        for t in range(0, 91, 15):
            clock.set(START + t)
            await peers.advance(t)
            if watch:
                for _ in range(200):  # let the watch see the pod finish
                    if t < 30 or ("t", "done") in agent.finished_pods:
                        break
                    await asyncio.sleep(0.01)
            await agent.tick()
        h = _holders(agent)
        assert h["live/GPU"]["allocated_s"] == pytest.approx(90.0)
        if watch:
            # held [0, 30]: the 30 s tick sees it finished at 30 s (finishedAt), so [15, 30] is charged too:
            # 15 + 15 = 30 s, exact
            assert h["done/GPU"]["allocated_s"] == pytest.approx(30.0)
            assert h["done/GPU"]["active"] is False and agent.ignored_finished == 1
        else:
            assert h["done/GPU"]["allocated_s"] == pytest.approx(90.0)
            assert agent.meter.tick_resolution_total == 0  # both pods were there at the first tick
    finally:
        await agent.close()
        rig.agents.clear()
        await peers.close()


async def test_pod_watch_reached_says_how_far_the_own_node_watch_has_read(tmp_path: Path) -> None:
    """What a harness waits on before a tick: nothing without a watch; with one, not before it has listed,
    then every change to the node's pods so far, and not a change it has not seen."""
    clock = VirtualClock(START)
    peers = SimPeers(parse_scenario(OLD_KUBELET, "old.yaml"), tmp_path, START)
    await peers.start()
    rig = Rig(peers, clock)
    agent = Agent(rig.settings("old", watch_pods=True, kubeconfig=peers.kubeconfig), clock=clock)
    rig.agents["old"] = agent
    try:
        assert agent.pod_watch_reached(10**9)  # no watch started: nothing to wait for
        await agent.start_pod_watch()
        assert not agent.pod_watch_reached(0)  # started, not listed yet
        newest = peers.cluster.store.latest_rv("pods")
        for _ in range(500):
            if agent.pod_watch_reached(newest):
                break
            await asyncio.sleep(0.01)
        assert agent.pod_watch_reached(newest)
        assert not agent.pod_watch_reached(10**9)  # a change it has not seen
    finally:
        await agent.close()
        rig.agents.clear()
        await peers.close()


async def test_aggregator_discovers_agents_through_the_api(tmp_path: Path) -> None:
    """With GPUCOST_AGENTS unset, the aggregator pulls the agent pods it finds by label in the API
    (here an agent on 127.0.0.2, announced by a pod object with that podIP)."""
    from exporter.aggregator.books.gauges import AgentHealth
    from exporter.aggregator.service import Aggregator
    from exporter.config import AggregatorSettings
    from exporter.model.books import NamespaceKey

    clock = VirtualClock(START)
    peers = SimPeers(parse_scenario(SCENARIO, "disc.yaml"), tmp_path, START)
    await peers.start()
    port = free_port()
    rig = Rig(peers, clock)
    agent = Agent(rig.settings("a100", listen=f"127.0.0.2:{port}"), clock=clock)
    await agent.start_http()
    rig.agents["a100"] = agent
    peers.cluster.store.upsert("pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "gce-agent-x1", "namespace": "gpu-cost-exporter", "uid": "u-agent",
                     "labels": {"app.kubernetes.io/component": "agent"}},
        "spec": {"nodeName": "a100", "containers": [{"name": "agent"}]},
        "status": {"phase": "Running", "podIP": "127.0.0.2"}})
    agg = Aggregator(AggregatorSettings(listen=f"127.0.0.1:{free_port()}", ledger=tmp_path / "l.db",
                                        kubeconfig=peers.kubeconfig, agent_port=port,
                                        agent_namespace="gpu-cost-exporter"), clock=clock)
    await agg.start(serve_http=False)
    try:
        assert await agg.wait_synced()
        for t in (0, 15, 30):
            await rig.step(t)
            await agg.tick()
        assert agg.agent_urls() == [f"http://127.0.0.2:{port}"]
        assert agg.gauges.agents == {"a100": AgentHealth(up=True, dcgm_up=True)}
        assert agg.books is not None
        assert float(agg.books.totals[NamespaceKey("t", "USD")].allocated_s) == pytest.approx(30 * (1 + 3 / 7))
    finally:
        await agg.close()
        await agent.close()
        rig.agents.clear()
        await peers.close()


async def test_exporter_upgrade_with_renamed_fields_keeps_billing(rig: Rig, hostile: tuple[str, dict[str, str]]
                                                                   ) -> None:
    """A DCGM Exporter that renamed its fields (unknown to the built-in table) still yields utilisation:
    the agent infers the renamed field from its name and HELP, so used time keeps being counted."""
    url, body = hostile
    env_uuid = rig.peers.cluster.layouts["a100"].gpus[1].uuid  # the whole GPU held by "whole"
    body["text"] = (
        "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE_RATIO Ratio of time the graphics engine is active.\n"
        "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE_RATIO gauge\n"
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE_RATIO{{gpu="1",UUID="{env_uuid}",modelName="NVIDIA A100-SXM4-80GB"}} 0.25\n')
    agent = Agent(rig.settings("a100", dcgm_url=url), clock=rig.clock)
    await agent.start_http()
    rig.agents["renamed"] = agent
    await rig.step(0)
    await rig.step(15)
    whole = _holders(agent)["whole/GPU"]
    assert whole["allocated_s"] == pytest.approx(15.0) and whole["unmeasured_s"] == 0.0
    assert whole["used_s"] == pytest.approx(15.0 * 0.25)
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE_RATIO" in agent.name_table
