"""Runs a scenario: the simulated peers, and (for ``simulate`` and ``demo``) the real agents and aggregator.

``simulate`` steps a virtual clock tick by tick as fast as the machine allows while every byte still
crosses real HTTP and gRPC connections on loopback; ``demo`` and ``sim-cluster`` run in real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from aiohttp import web

from exporter.sim.cluster import Happening, SimCluster
from exporter.sim.kube import exporter_pods
from exporter.sim.kube.reviews import calling_as_users, write_tokens
from exporter.sim.kube.server import KubeApiServer
from exporter.sim.peers import DcgmEndpoint, PodResourcesServer
from exporter.sim.scenario import Scenario
from exporter.sim.vendors.endpoint import HamiMonitorEndpoint

HOST = "127.0.0.1"


_HANDED_OUT: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = HOST) -> int:
    """A free loopback port below the kernel's ephemeral range.

    A port the kernel hands out for ``bind(0)`` lies in the range it also draws outgoing connections'
    local ports from: a daemon that restarts on its port (a SIGKILLed agent) could find it taken by
    one of the many short connections on loopback meanwhile. Below that range only listeners live."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10000, low) if low > 10100 else 0
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            chosen = int(s.getsockname()[1])
        _HANDED_OUT.add(chosen)
        return chosen
    raise OSError("no free loopback port below the ephemeral range")


@dataclass(slots=True)
class NodePorts:
    """One simulated node's peers and where its agent listens and keeps its state."""

    dcgm: DcgmEndpoint
    kubelet: PodResourcesServer
    agent_listen: str
    state_dir: Path
    hami: HamiMonitorEndpoint | None = None  # HAMi's vGPU monitor, on nodes with per_pod_metrics: hami


@dataclass
class SimPeers:
    """Every simulated peer of one scenario, on loopback, plus the files that point daemons at them."""

    scenario: Scenario
    workdir: Path
    wall_start: float
    cluster: SimCluster = field(init=False)
    api: KubeApiServer = field(init=False)
    nodes: dict[str, NodePorts] = field(default_factory=dict)
    api_port: int = 0
    aggregator_listen: str = ""
    _api_runner: web.AppRunner | None = None
    _sockdir: Path | None = None
    _own_sockdir: bool = False

    def __post_init__(self) -> None:
        self.cluster = SimCluster(self.scenario, self.wall_start)
        self.api = KubeApiServer(self.cluster.store, crds=frozenset(q.kind for q in self.scenario.queues),
                                 users=self.scenario.users)

    @property
    def kubeconfig(self) -> Path:
        """The kubeconfig (token auth) that points daemons at the simulated API server."""
        return self.workdir / "kubeconfig"

    @property
    def pricing_file(self) -> Path:
        """The pricing file the aggregator loads, written from the scenario's prices."""
        return self.workdir / "pricing.yaml"

    @property
    def budgets_file(self) -> Path | None:
        """The budgets file the aggregator loads (the scenario's ``budgets:``, as changed by ``budget_change``)."""
        return self.workdir / "budgets.yaml" if self.scenario.budgets else None

    def _write_budgets(self) -> None:
        if self.budgets_file is not None:
            tmp = self.budgets_file.with_suffix(".tmp")
            tmp.write_text(yaml.safe_dump({"budgets": self.scenario.budgets}, sort_keys=False))
            tmp.replace(self.budgets_file)

    @property
    def ledger(self) -> Path:
        """The default SQLite ledger, in the work directory."""
        return self.workdir / "ledger.db"

    @property
    def token_file(self) -> Path:
        """The bearer token the simulated agents require on /v1/usage: secure by default, as the chart."""
        return self.workdir / "agent-token"

    def agent_urls(self) -> list[str]:
        """Base URLs of every node's agent, for the aggregator's ``GPUCOST_AGENTS``."""
        return [f"http://{n.agent_listen}" for n in self.nodes.values()]

    async def start(self, aggregator_listen: str | None = None) -> None:
        """Bring up the API server and each node's DCGM endpoint and kubelet socket, then write the daemons' files."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster.advance(0.0)
        self.api_port = free_port()
        self._api_runner = web.AppRunner(self.api.app, access_log=None)
        await self._api_runner.setup()
        await web.TCPSite(self._api_runner, HOST, self.api_port).start()
        for index, (name, layout) in enumerate(self.cluster.layouts.items()):
            host = exporter_pods.exporter_address(layout, index)  # the exporter pod's own address
            dcgm = DcgmEndpoint(self.cluster, name, host=host, port=free_port(host))
            await dcgm.start()
            sock = self._socket_dir() / name / "kubelet.sock"
            kubelet = PodResourcesServer(self.cluster, name, socket_path=sock)
            await kubelet.start()
            state = self.workdir / "state" / name
            # The agent's state hostPath (DirectoryOrCreate), made as the kubelet makes it: 0755, the kubelet's
            # own user (root when sim-cluster runs as root); fsGroup does not apply to a hostPath.
            state.mkdir(mode=0o755, parents=True, exist_ok=True)
            self.nodes[name] = NodePorts(dcgm, kubelet, f"{HOST}:{free_port()}", state)
            if self.cluster.layouts[name].spec.per_pod_metrics == "hami":
                hami = self.nodes[name].hami = HamiMonitorEndpoint(self.cluster, name, host=HOST, port=free_port())
                await hami.start()
        self.aggregator_listen = aggregator_listen or f"{HOST}:{free_port()}"
        self._write_files()

    def _write_files(self) -> None:
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": {"server": f"http://{HOST}:{self.api_port}"}}],
            "users": [{"name": "sim", "user": {"token": "sim-token"}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
        }))
        self.pricing_file.write_text(yaml.safe_dump(self.scenario.pricing_document(), sort_keys=False))
        self._write_budgets()
        if not self.token_file.exists():
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32))
        write_tokens(self.workdir / "users", self.scenario.users)  # users/<name>.token: call as that user
        agents_dir = self.workdir / "agents"
        agents_dir.mkdir(exist_ok=True)
        for name, _n in self.nodes.items():
            (agents_dir / f"{name}.env").write_text("".join(f"{k}={v}\n" for k, v in self.agent_env(name).items()))
        (self.workdir / "aggregator.env").write_text(
            "".join(f"{k}={v}\n" for k, v in self.aggregator_env().items()))

    def agent_env(self, name: str) -> dict[str, str]:
        """The environment an agent for node ``name`` runs with, pointed at that node's peers."""
        n = self.nodes[name]
        # As the chart configures it: the exporter pod on its node, found through the API by its install's labels
        # (at the port this node's simulated exporter got; a real one has its install's fixed port).
        selector = exporter_pods.install_of(self.cluster.layouts[name]).selector
        return {"GPUCOST_NODE_NAME": name, "GPUCOST_EXPORTER_MODE": "discover",
                "GPUCOST_EXPORTER_SELECTORS": f"{selector}@{n.dcgm.port}",
                "GPUCOST_DCGM_URL": n.dcgm.url,  # unused in discover mode; where the exporter pod answers
                "GPUCOST_PODRESOURCES_SOCKET": str(n.kubelet.socket_path), "GPUCOST_LISTEN": n.agent_listen,
                "GPUCOST_STATE_DIR": str(n.state_dir), "GPUCOST_TICK": f"{self.scenario.tick:g}s",
                "GPUCOST_KUBECONFIG": str(self.kubeconfig), "GPUCOST_WATCH_PODS": "true",
                "GPUCOST_USAGE_TOKEN_FILE": str(self.token_file),
                **({"GPUCOST_HAMI_MONITOR_URL": n.hami.url} if n.hami is not None else {})}

    def aggregator_env(self) -> dict[str, str]:
        """The environment the aggregator runs with: every agent, the ledger, prices and the API server."""
        return {"GPUCOST_LISTEN": self.aggregator_listen, "GPUCOST_LEDGER": str(self.ledger),
                "GPUCOST_PRICING_FILE": str(self.pricing_file), "GPUCOST_AGENTS": ",".join(self.agent_urls()),
                "GPUCOST_KUBECONFIG": str(self.kubeconfig), "GPUCOST_TICK": f"{self.scenario.tick:g}s",
                "GPUCOST_AGENT_TOKEN_FILE": str(self.token_file),
                "GPUCOST_POOL_LABEL": self.scenario.pool_label,
                **({"GPUCOST_WINDOW_BUDGETS_FILE": str(self.budgets_file)} if self.budgets_file else {}),
                **({"GPUCOST_AUTH": "kubernetes"} if self.scenario.users else {})}  # users: every route asks

    def _socket_dir(self) -> Path:
        """Unix socket paths are limited to 107 bytes: fall back to a short private dir under /tmp."""
        if self._sockdir is None:
            preferred = self.workdir / "kubelet"
            longest = max((len(n) for n in self.cluster.layouts), default=0)
            if len(str(preferred)) + longest + len("/kubelet.sock") + 1 <= 100:
                self._sockdir = preferred
            else:
                self._sockdir = Path(tempfile.mkdtemp(prefix="gpucost-kubelet-"))
                self._own_sockdir = True
        return self._sockdir

    async def advance(self, t: float) -> list[Happening]:
        """Move the cluster to scenario time ``t`` and carry out peer outages; return daemon restarts."""
        fired = self.cluster.advance(t)
        driver: list[Happening] = []
        for h in fired:
            node = self.nodes.get(h.node or "")
            if h.type == "dcgm_down:start" and node:
                await node.dcgm.stop_listening()
            elif h.type == "dcgm_down:end" and node:
                await node.dcgm.start()
            elif h.type == "podresources_down:start" and node:
                await node.kubelet.stop()
            elif h.type == "podresources_down:end" and node:
                await node.kubelet.start()
            elif h.type == "budget_change":
                self._write_budgets()
            else:
                driver.append(h)
        return driver

    async def close(self) -> None:
        """Shut every peer down and remove the socket directory if it was made here."""
        for n in self.nodes.values():
            await n.dcgm.close()
            await n.kubelet.stop()
            if n.hami is not None:
                await n.hami.close()
        if self._api_runner is not None:
            await self._api_runner.cleanup()
        if self._own_sockdir and self._sockdir is not None:
            shutil.rmtree(self._sockdir, ignore_errors=True)


async def realtime_loop(peers: SimPeers, stop: asyncio.Event,
                        *, on_happening: Callable[[Happening], Any] | None = None, period: float = 0.1) -> None:
    """Advance the cluster with the wall clock until ``stop`` is set."""
    while not stop.is_set():
        for h in await peers.advance(time.time() - peers.wall_start):
            if on_happening is not None:
                on_happening(h)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(period):
                await stop.wait()


async def serve_sim_cluster(scenario: Scenario, workdir: Path, *, out: TextIO = sys.stdout,
                            stop: asyncio.Event | None = None) -> None:
    """``gpu-cost-exporter sim-cluster``: serve only the peers, in real time, until SIGTERM."""
    from exporter.runtime import install_stop_signals

    stop = stop or asyncio.Event()
    install_stop_signals(stop)
    # Scenario time 0 on a whole second: the API's timestamps (startTime, finishedAt) have one-second
    # precision, so pod boundaries at whole scenario seconds are exact to the agents' pod watch.
    now = time.time()
    await asyncio.sleep(math.ceil(now) - now)
    peers = SimPeers(scenario, workdir, float(math.ceil(now)))
    await peers.start()
    ready = workdir / "ready"
    ready.touch()
    os.utime(ready, (peers.wall_start, peers.wall_start))  # its mtime is scenario time 0
    print(f"simulated cluster '{scenario.source}' is serving ({len(peers.nodes)} nodes)", file=out)
    print(f"  Kubernetes API : http://{HOST}:{peers.api_port}   kubeconfig: {peers.kubeconfig}", file=out)
    for name, n in peers.nodes.items():
        print(f"  {name:<16} DCGM {n.dcgm.url}  kubelet {n.kubelet.socket_path}", file=out)
    print("start an agent per node and the aggregator with:", file=out)
    for name in peers.nodes:
        print(f"  env $(cat {workdir}/agents/{name}.env | xargs) gpu-cost-exporter agent", file=out)
    print(f"  env $(cat {workdir}/aggregator.env | xargs) gpu-cost-exporter aggregator", file=out)
    print("the settings in those files:", file=out)
    for name in peers.nodes:
        print(f"  # agent on {name}", file=out)
        print("".join(f"  {k}={v}\n" for k, v in peers.agent_env(name).items()), end="", file=out)
    print("  # aggregator", file=out)
    print("".join(f"  {k}={v}\n" for k, v in peers.aggregator_env().items()), end="", file=out)
    print(calling_as_users(peers.scenario.users, workdir=workdir, listen=peers.aggregator_listen), end="", file=out)
    out.flush()
    try:
        await realtime_loop(peers, stop)
    finally:
        with contextlib.suppress(FileNotFoundError):
            ready.unlink()
        await peers.close()


def reset_dir(path: Path) -> None:
    """Empty ``path`` (creating it if need be): a fresh work directory for a run."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
