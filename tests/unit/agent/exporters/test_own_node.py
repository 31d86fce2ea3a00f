"""A scrape is this node's only when its hostname label names this node (or the discovered exporter pod), or,
without a telling label, when its GPUs are among the kubelet's allocatable devices here (real-nodes.md §3)."""

from __future__ import annotations

from exporter.agent.exporters.own_node import ScrapeOrigin, check_own_node, scrape_origin
from exporter.clients.exposition import parse_exposition

A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def origin(*hostname_labels: str, uuid: str = A) -> ScrapeOrigin:
    lines = [f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{uuid}"{label}}} 5' for label in hostname_labels or ("",)]
    return scrape_origin(parse_exposition("\n".join(lines) + "\n").samples)


def test_hostname_is_the_node_or_the_exporter_pod() -> None:
    assert check_own_node(origin(',Hostname="gpu-1"'), node="gpu-1").ok
    assert check_own_node(origin(',hostname="gpu-1"'), node="gpu-1").ok  # 4.6.0-4.8.3 on
    # no NODE_NAME: the container's hostname, i.e. the exporter pod's name
    assert check_own_node(origin(',Hostname="nvidia-dcgm-exporter-x7k2p"'), node="gpu-1",
                          exporter_pod="nvidia-dcgm-exporter-x7k2p").ok


def test_another_nodes_hostname_is_refused() -> None:
    verdict = check_own_node(origin(',Hostname="gpu-2"'), node="gpu-1", allocatable={"nvidia.com/gpu": (A,)})
    assert (verdict.ok, verdict.reason) == (False, "hostname_mismatch")
    assert "gpu-2" in verdict.detail and "gpu-1" in verdict.detail
    # one foreign sample among this node's is enough to refuse the scrape
    assert not check_own_node(origin(',Hostname="gpu-1"', ',Hostname="gpu-2"'), node="gpu-1").ok


def test_generic_or_absent_hostname_falls_back_to_the_allocatable_uuids() -> None:
    """nvidia-dcgm / localhost (a remote host engine) and no label say nothing: UUIDs decide; a time-slicing
    replica's ID (``::n``) names its GPU; no overlap is another node; nothing known to compare accepts."""
    for labels in ((',Hostname="nvidia-dcgm"',), (',Hostname="localhost"',), ()):
        assert check_own_node(origin(*labels), node="gpu-1", allocatable={"nvidia.com/gpu": (f"{A}::3",)}).ok
        refused = check_own_node(origin(*labels), node="gpu-1", allocatable={"nvidia.com/gpu": (B,)})
        assert (refused.ok, refused.reason) == (False, "no_device_overlap")
        assert check_own_node(origin(*labels), node="gpu-1", allocatable=None).ok
        assert check_own_node(origin(*labels), node="gpu-1", allocatable={"nvidia.com/mig-1g.10gb": ("MIG-x",)}).ok
