"""Scenario fields of a node's vendor and exporter: ``vendor``, ``partition``, ``per_pod_metrics``,
``exporter_hostname`` and ``exporter_host_network`` (SCENARIO.md)."""

from __future__ import annotations

from typing import Any

from exporter.sim.scenario_ctx import Ctx
from exporter.sim.spec import NodeSpec

VENDORS = ("nvidia", "amd", "gaudi")
#: Compute partitions per GPU by AMD partition mode.
PARTITIONS = {"spx": 1, "dpx": 2, "qpx": 4, "cpx": 8}
PER_POD_SOURCES = ("dcgm", "hami")
#: The resource a pod on a node of this vendor asks for unless it names one.
DEFAULT_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "gaudi": "habana.ai/gaudi"}
KEYS = {"vendor", "partition", "per_pod_metrics", "exporter_hostname", "exporter_host_network"}


def vendor_fields(ctx: Ctx, n: dict[str, Any], *, node: NodeSpec, where: str) -> None:
    """Read the fields into ``node``; raise naming the field when they contradict the node."""
    vendor = ctx.string(n.get("vendor", "nvidia"), f"{where}.vendor")
    if vendor not in VENDORS:
        raise ctx.fail(f"{where}.vendor", f"expected one of {', '.join(VENDORS)}, got {vendor!r}")
    if vendor != "nvidia" and (node.mig or node.sharing != "none" or node.dra):
        raise ctx.fail(f"{where}.vendor", f"{vendor} nodes have whole devices (or AMD partitions): drop mig, "
                       "sharing and dra")
    partition = n.get("partition")
    if partition is not None:
        partition = ctx.string(partition, f"{where}.partition")
        if vendor != "amd" or partition not in PARTITIONS:
            raise ctx.fail(f"{where}.partition", f"expected one of {', '.join(PARTITIONS)} on a vendor: amd node")
    per_pod = n.get("per_pod_metrics")
    if per_pod is not None:
        per_pod = ctx.string(per_pod, f"{where}.per_pod_metrics")
        if per_pod not in PER_POD_SOURCES:
            raise ctx.fail(f"{where}.per_pod_metrics", f"expected one of {', '.join(PER_POD_SOURCES)}, got {per_pod!r}")
        if per_pod == "dcgm" and node.sharing not in ("time-slicing", "mps"):
            raise ctx.fail(f"{where}.per_pod_metrics", "dcgm's per-pod series are for time-sliced or MPS replicas")
        if per_pod == "hami" and node.sharing != "hami":
            raise ctx.fail(f"{where}.per_pod_metrics", "HAMi's monitor needs hami: true")
    node.vendor, node.partition, node.per_pod_metrics = vendor, partition, per_pod
    host = n.get("exporter_hostname")  # another node's name: a scrape that reaches the wrong node
    node.exporter_hostname = None if host is None else ctx.string(host, f"{where}.exporter_hostname")
    hostnet = n.get("exporter_host_network", False)
    if not isinstance(hostnet, bool):
        raise ctx.fail(f"{where}.exporter_host_network", f"expected true or false, got {hostnet!r}")
    node.exporter_host_network = hostnet or vendor == "gaudi"  # gaudi-metric-exporter runs with hostNetwork


def default_resource(p: dict[str, Any], nodes: list[NodeSpec]) -> str:
    """The resource a pod asks for when it names none: its node's vendor's."""
    node = next((x for x in nodes if x.name == p.get("node")), None)
    return DEFAULT_RESOURCE[node.vendor if node is not None else "nvidia"]
