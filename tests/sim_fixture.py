"""One way to bring up `gpu-cost-exporter sim-cluster` for a test: write the scenario, spawn the simulator,
wait for its `ready` file, hand back where everything is, and kill whatever the test spawned afterwards.

`sim_cluster` (in tests/conftest.py) is the per-test fixture; `running_sim_cluster` is the same thing as a
context manager for fixtures with a wider scope (a module's kubectl session).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.procs import Cluster, env_file, wait

#: How long the simulator may take to write its peers' env files and `ready` on a loaded machine.
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class SimHandle:
    """A running simulated cluster: its workdir (kubeconfig, env files, ledger path, logs/) and the
    `Cluster` that spawned it, which spawns agents and aggregators against it too."""

    workdir: Path
    cluster: Cluster

    @property
    def scenario(self) -> Path:
        return self.workdir / "scenario.yaml"

    @property
    def ready(self) -> Path:
        """Written by sim-cluster once every peer listens; its mtime is scenario time 0."""
        return self.workdir / "ready"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def nodes(self) -> list[str]:
        return sorted(p.stem for p in (self.workdir / "agents").glob("*.env"))

    def agent_env(self, node: str, **extra: str) -> dict[str, str]:
        """The env an agent for `node` runs with (the sim's env file, a 0.5 s tick, then `extra`)."""
        return self.cluster.agent_env(node, **extra)

    def aggregator_env(self, **extra: str) -> dict[str, str]:
        """The env an aggregator runs with (the sim's env file, a 0.5 s tick, then `extra`)."""
        return {**self.cluster.aggregator_env(), **extra}

    def agent_envs(self, **extra: str) -> dict[str, dict[str, str]]:
        """Every node's agent env, by node name."""
        return {node: self.agent_env(node, **extra) for node in self.nodes}

    def raw_env(self, name: str) -> dict[str, str]:
        """An env file exactly as sim-cluster wrote it (`aggregator` or `agents/<node>`)."""
        return env_file(self.workdir / f"{name}.env")


@contextmanager
def running_sim_cluster(workdir: Path, scenario: str) -> Iterator[SimHandle]:
    """Start sim-cluster on `scenario` (YAML text, dedented) in `workdir`; stop every spawned process after."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "scenario.yaml"
    path.write_text(textwrap.dedent(scenario))
    cluster = Cluster(workdir)
    try:
        sim = cluster.spawn("sim", ["sim-cluster", "--scenario", str(path), "--workdir", str(workdir)])
        wait(lambda: (workdir / "ready").exists() or sim.poll() is not None, timeout=READY_TIMEOUT)
        assert sim.poll() is None, (cluster.logs / "sim.log").read_text()
        yield SimHandle(workdir=workdir, cluster=cluster)
    finally:
        cluster.close()


SimClusterFactory = Callable[[str], SimHandle]
