"""Durable before visible, and acks only from the authenticated aggregator: the real agent against the
simulator's real DCGM endpoint and kubelet socket, with a real failing state write."""

from __future__ import annotations

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
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import parse_scenario

START = 1_800_000_000.0
ONE_POD = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: h100, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: p, namespace: t, node: h100, gpus: 1, utilization: 0.5}]
"""


class Node:
    """One simulated node and the agent(s) run against it, on a virtual clock."""

    def __init__(self, peers: SimPeers, clock: VirtualClock) -> None:
        self.peers, self.clock = peers, clock

    def settings(self, **kw: Any) -> AgentSettings:
        env = self.peers.agent_env("h100")
        base: dict[str, Any] = {
            "node_name": "h100", "dcgm_url": env["GPUCOST_DCGM_URL"], "listen": env["GPUCOST_LISTEN"],
            "podresources_socket": Path(env["GPUCOST_PODRESOURCES_SOCKET"]),
            "state_dir": Path(env["GPUCOST_STATE_DIR"]), "tick": 15.0, "podresources_qps": 1e6}
        return AgentSettings(**{**base, **kw})

    async def step(self, agent: Agent, t: float) -> None:
        self.clock.set(START + t)
        await self.peers.advance(t)
        await agent.tick()


@pytest.fixture(name="node")
async def _node(tmp_path: Path) -> AsyncIterator[Node]:
    clock = VirtualClock(START)
    peers = SimPeers(parse_scenario(ONE_POD, "durable.yaml"), tmp_path, START)
    await peers.start()
    yield Node(peers, clock)
    await peers.close()


def _published(agent: Agent) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(agent.published_json or b"{}")
    return data


def _allocated(agent: Agent) -> float:
    return float(sum(h["allocated_s"] for h in _published(agent)["holders"]))


async def _get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
        return r.status, await r.text()


async def test_failed_state_write_keeps_last_durable_snapshot_and_recovers_exactly(node: Node) -> None:
    """The state write fails at 45 s and 60 s (a directory sits where the temporary file goes: even
    root cannot open it for writing). /v1/usage keeps the 30 s snapshot (30 GPU-s), /readyz says 503
    with the reason, the failures are counted. A crash during the streak resumes exactly the published
    30 GPU-s (same epoch), and the first good write at 75 s publishes 30 + 45 = 75 GPU-s: 1 GPU x 75 s,
    nothing lost and nothing counted twice."""
    agent = Agent(node.settings(), clock=node.clock)
    await agent.start_http()
    base = f"http://{agent.settings.listen}"
    try:
        for t in (0, 15, 30):
            await node.step(agent, t)
        assert _allocated(agent) == pytest.approx(30.0)
        blocker = state_path(agent.settings.state_dir).with_suffix(".tmp")
        blocker.mkdir()
        for t in (45, 60):
            await node.step(agent, t)
        snap = _published(agent)
        assert snap["timestamp"] == START + 30 and _allocated(agent) == pytest.approx(30.0)
        status, body = await _get(f"{base}/readyz")
        assert status == 503 and any("state write failing" in r for r in json.loads(body)["reasons"])
        status, text = await _get(f"{base}/metrics")
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert fams["gpucost_agent_state_write_failures"].samples[0].value == 2
        status, body = await _get(f"{base}/v1/usage")
        assert status == 200 and json.loads(body)["timestamp"] == START + 30
    finally:
        await agent.close()
    # crash while failing: the resumed agent starts from what was published, in the same epoch
    resumed = Agent(node.settings(), clock=node.clock)
    try:
        assert resumed.meter.epoch == snap["epoch"] and resumed.meter.last_tick == START + 30
        blocker.rmdir()
        await node.step(resumed, 75)
        assert _published(resumed)["epoch"] == snap["epoch"]
        assert _allocated(resumed) == pytest.approx(75.0)
        assert resumed.health_report()["status"] == "ok"
    finally:
        await resumed.close()


async def test_recovery_in_the_same_process_publishes_the_in_memory_counters(node: Node) -> None:
    """Without a crash the meter kept counting while writes failed: 15 GPU-s at 15 s are published,
    writes fail at 30 s and 45 s (still 15 published), and at 60 s all 60 GPU-s appear at once."""
    agent = Agent(node.settings(), clock=node.clock)
    try:
        for t in (0, 15):
            await node.step(agent, t)
        blocker = state_path(agent.settings.state_dir).with_suffix(".tmp")
        blocker.mkdir()
        for t in (30, 45):
            await node.step(agent, t)
            assert _allocated(agent) == pytest.approx(15.0)
        blocker.rmdir()
        await node.step(agent, 60)
        assert _allocated(agent) == pytest.approx(60.0)
        assert agent.health.state_write_failures == 2 and agent.health.state_write_error == ""
    finally:
        await agent.close()


async def test_ack_is_ignored_without_a_configured_token(node: Node) -> None:
    """No token configured: anyone could send ?ack=, so it is ignored (retention = safety period)."""
    agent = Agent(node.settings(), clock=node.clock)
    await agent.start_http()
    try:
        await node.step(agent, 0)
        status, _ = await _get(f"http://{agent.settings.listen}/v1/usage?ack={START + 1e6}")
        assert status == 200 and agent.acked_until is None
    finally:
        await agent.close()


async def test_ack_is_honoured_only_with_the_valid_token(node: Node, tmp_path: Path) -> None:
    """With a token: a wrong token gets 401 and no ack; the right one acks (clamped to the published
    snapshot's timestamp, never beyond what the caller could have booked)."""
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    agent = Agent(node.settings(usage_token_file=token), clock=node.clock)
    await agent.start_http()
    url = f"http://{agent.settings.listen}/v1/usage?ack={START + 1e6}"
    try:
        await node.step(agent, 0)
        await node.step(agent, 15)
        status, _ = await _get(url, "wrong")
        assert status == 401 and agent.acked_until is None
        status, _ = await _get(url)
        assert status == 401 and agent.acked_until is None
        status, _ = await _get(url, "s3cret")
        assert status == 200 and agent.acked_until == START + 15
    finally:
        await agent.close()
