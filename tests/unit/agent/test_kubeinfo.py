"""The agent's API reads for shared GPUs back off: an API server that refuses (or an agent without RBAC)
is asked once per few ticks, not every tick, and the tick still gets a context."""

from __future__ import annotations

import socket
from pathlib import Path

import yaml

from exporter.agent.kubeinfo import RETRY_READ_TICKS, KubeInfo
from exporter.model.pod_resources import ContainerDevices


def _dead_kubeconfig(tmp_path: Path) -> Path:
    with socket.socket() as s:  # a port that was free a moment ago: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    return path


async def test_failed_reads_are_retried_every_few_ticks(tmp_path: Path) -> None:
    """8 ticks with replicas held: the node is read at ticks 1 and 1 + RETRY_READ_TICKS = 5 only."""
    info = KubeInfo(node="n", kubeconfig=_dead_kubeconfig(tmp_path), timeout=2.0)
    held = [ContainerDevices("d", "p", "main", "nvidia.com/gpu", ("GPU-x::0",))]
    try:
        for _ in range(8):
            ctx = await info.context(held, None)
            assert ctx.labels == {}
    finally:
        await info.close()
    assert RETRY_READ_TICKS == 4
    assert info.errors == 2
