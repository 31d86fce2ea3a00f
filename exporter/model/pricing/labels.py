"""What a node's labels say about how it is billed: its instance type and its capacity type.

Clouds and autoscalers spell "spot" differently; the table below is the one place that knows the
spellings, so a new provider is one row, and the docs list exactly what is recognised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

#: Well-known label naming the cloud instance type (set by the kubelet's cloud provider integration).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


class CapacityType(StrEnum):
    """How the capacity under a node is bought."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"  # interruptible: spot, preemptible, low-priority
    RESERVED = "reserved"  # capacity reservations and capacity blocks: not spot, so commitments apply


@dataclass(frozen=True, slots=True)
class CapacityLabel:
    """One label that announces a capacity type, the values it takes, and who sets it."""

    label: str
    values: Mapping[str, CapacityType]
    source: str


#: Checked in order; the first label present with a recognised value decides. No match: on-demand.
CAPACITY_LABELS: tuple[CapacityLabel, ...] = (
    CapacityLabel("karpenter.sh/capacity-type",
                  {"spot": CapacityType.SPOT, "on-demand": CapacityType.ON_DEMAND,
                   "reserved": CapacityType.RESERVED},
                  "Karpenter (AWS, Azure)"),
    CapacityLabel("eks.amazonaws.com/capacityType",
                  {"SPOT": CapacityType.SPOT, "ON_DEMAND": CapacityType.ON_DEMAND,
                   "CAPACITY_BLOCK": CapacityType.RESERVED},
                  "Amazon EKS managed node groups"),
    CapacityLabel("cloud.google.com/gke-spot", {"true": CapacityType.SPOT}, "GKE Spot VMs"),
    CapacityLabel("cloud.google.com/gke-preemptible", {"true": CapacityType.SPOT}, "GKE preemptible VMs"),
    CapacityLabel("kubernetes.azure.com/scalesetpriority", {"spot": CapacityType.SPOT}, "AKS spot node pools"),
)


def capacity_type_of(labels: Mapping[str, str]) -> CapacityType:
    """The capacity type the node's labels announce; on-demand when none does.

    A label with a value we do not recognise (``gke-spot: "false"``) is passed over rather than
    guessed at, so the next label in the table can still decide.
    """
    for entry in CAPACITY_LABELS:
        value = labels.get(entry.label)
        if value is not None and value in entry.values:
            return entry.values[value]
    return CapacityType.ON_DEMAND


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """Everything about a node that its price depends on; hashable, so resolved rates can be cached."""

    name: str
    gpu_model: str | None
    instance_type: str | None = None
    capacity_type: CapacityType = CapacityType.ON_DEMAND
    pool: str | None = None

    @classmethod
    def from_labels(cls, name: str, gpu_model: str | None, *, labels: Mapping[str, str],
                    pool: str | None = None) -> NodeFacts:
        """Read instance type and capacity type from a Kubernetes node's labels."""
        return cls(name=name, gpu_model=gpu_model, instance_type=labels.get(INSTANCE_TYPE_LABEL) or None,
                   capacity_type=capacity_type_of(labels), pool=pool or None)
