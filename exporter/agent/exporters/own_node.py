"""Whether a scrape is this node's exporter's, before anything in it is booked.

An address can answer for another node: a Service with ``internalTrafficPolicy: Cluster`` sends each scrape to
a random node's exporter, and a wrong URL reads a neighbour. dcgm-exporter labels every sample ``Hostname``
(``hostname`` since 4.6.0-4.8.3): ``NODE_NAME`` when set (the chart, the static YAML and the GPU Operator set
it), else the container's hostname, which is the exporter pod's name. AMD's exporter labels ``hostname`` with
the node name. A sample is this node's when that label is the node name or the discovered exporter pod's
name; any other value is another node. An absent label, or one a remote host engine reports (``nvidia-dcgm``,
``localhost``), is inconclusive: then the GPU UUIDs in the scrape are held against the device IDs the kubelet
lists as allocatable here (the NVIDIA device plugin's IDs are GPU UUIDs, ``::n`` for a time-slicing
replica); another node's exporter shares none of them. Pure: the caller logs, counts and refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from exporter.model.samples import Sample

HOSTNAME_LABELS = ("Hostname", "hostname")
#: What a remote host engine (dcgm-exporter 4.0.0 ... 4.2.3-4.1.1) reports instead of a node: says nothing.
GENERIC_HOSTNAMES = frozenset({"nvidia-dcgm", "localhost", "localhost.localdomain"})
_UUID_LABELS = ("UUID", "uuid", "gpu_uuid")


@dataclass(frozen=True, slots=True)
class ScrapeOrigin:
    """What a scrape says about where it came from: its hostname labels and its GPU UUIDs."""

    hostnames: frozenset[str]
    gpu_uuids: frozenset[str]


@dataclass(frozen=True, slots=True)
class OwnNodeVerdict:
    """Whether the scrape is this node's; when not, a bounded ``reason`` (a metric label) and a sentence."""

    ok: bool
    reason: str = ""
    detail: str = ""


def scrape_origin(samples: Iterable[Sample]) -> ScrapeOrigin:
    """The hostname labels (generic ones dropped) and GPU UUIDs a scrape's samples carry."""
    hosts: set[str] = set()
    uuids: set[str] = set()
    for s in samples:
        labels = s.labels
        for name in HOSTNAME_LABELS:
            value = labels.get(name)
            if value and value not in GENERIC_HOSTNAMES:
                hosts.add(value)
        uuid = next((labels[k] for k in _UUID_LABELS if labels.get(k)), "")
        if uuid.startswith("GPU-"):
            uuids.add(uuid)
    return ScrapeOrigin(frozenset(hosts), frozenset(uuids))


def _allocatable_uuids(allocatable: Mapping[str, tuple[str, ...]] | None) -> set[str]:
    ids = (i for devices in (allocatable or {}).values() for i in devices)
    return {i.split("::", 1)[0] for i in ids if i.startswith("GPU-")}


def check_own_node(origin: ScrapeOrigin, *, node: str, exporter_pod: str = "",
                   allocatable: Mapping[str, tuple[str, ...]] | None = None) -> OwnNodeVerdict:
    """This node's scrape, or another's (see the module's docstring); inconclusive evidence accepts."""
    if origin.hostnames:
        foreign = sorted(origin.hostnames - {node, exporter_pod} - {""})
        if foreign:
            return OwnNodeVerdict(False, "hostname_mismatch",
                                  f"the exporter reports hostname {', '.join(foreign)[:200]}; this node is {node}")
        return OwnNodeVerdict(True)
    here = _allocatable_uuids(allocatable)
    if origin.gpu_uuids and here and not origin.gpu_uuids & here:
        return OwnNodeVerdict(False, "no_device_overlap",
                              f"none of the exporter's {len(origin.gpu_uuids)} GPU UUIDs is among the "
                              f"{len(here)} the kubelet lists as allocatable on {node}")
    return OwnNodeVerdict(True)
