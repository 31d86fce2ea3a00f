"""What the Kubernetes API says about this node's GPU sharing, as plain data for the pure build step.

pod-resources cannot tell MPS replicas from time-slicing ones (both are ``GPU-<uuid>::<i>``), and
HAMi's listed IDs can name the wrong GPU; the node's labels and its pods' annotations can. The agent
fills a ``NodeContext`` from the API (``kubeinfo``); without API access it is empty and replicas
count as time-slicing (the accounting is the same: 1/replicas, busy time split among holders),
DRA devices resolve by their names only, and adminAccess cannot be seen (such claims are charged).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.agent.holders.dra import DeviceKey, SliceDevice
from exporter.agent.holders.hami import HamiDevice
from exporter.model.devices import SharingMode

STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"  # mps | time-slicing | none (GPU feature discovery)
MEMORY_LABEL = "nvidia.com/gpu.memory"  # physical framebuffer per GPU, MiB (GPU feature discovery)


@dataclass(frozen=True, slots=True)
class ContainerKey:
    """One container of one pod: what HAMi annotations and pod-resources both name."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True, slots=True)
class NodeContext:
    """This node's labels and the HAMi shares of its pods' containers, as last read from the API."""

    labels: dict[str, str] = field(default_factory=dict)
    hami: dict[ContainerKey, list[HamiDevice]] = field(default_factory=dict)
    hami_pods: frozenset[tuple[str, str]] = frozenset()  # pods whose annotation was read (even if empty)
    dra_slices: dict[DeviceKey, SliceDevice] = field(default_factory=dict)  # this node's ResourceSlices
    dra_admin: dict[str, set[DeviceKey]] = field(default_factory=dict)  # claim -> adminAccess devices
    dra_consumed: dict[str, dict[DeviceKey, float]] = field(default_factory=dict)  # claim -> share memory bytes

    def replica_mode(self) -> SharingMode:
        """How the node shares replicated GPUs: MPS when GPU feature discovery labels it so, else time-slicing."""
        return SharingMode.MPS if self.labels.get(STRATEGY_LABEL) == "mps" else SharingMode.TIME_SLICING

    def gpu_memory_mib(self) -> float | None:
        """Physical framebuffer per GPU in MiB from the node's label; None when unlabelled or unreadable."""
        raw = self.labels.get(MEMORY_LABEL, "")
        try:
            value = float(raw)
        except ValueError:
            return None
        return value if value > 0 else None
