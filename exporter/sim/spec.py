"""The scenario's vocabulary: what a scenario file describes, as plain typed records.

Kept apart from the parser so the layout (which places pods on devices) and the parser (which calls
the layout to validate placement) can both import these without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from exporter.sim.hardware import PowerRange
from exporter.sim.users import UserSpec

EVENT_TYPES = {
    "dcgm_down": ("node", "from", "to"),
    "podresources_down": ("node", "from", "to"),
    "per_pod_metrics_down": ("node", "from", "to"),
    "agent_restart": ("node", "at"),
    "agent_state_loss": ("node", "at"),
    "aggregator_restart": ("at",),
    "quota_rejection": ("namespace", "at"),
    "watch_expire": ("at",),
    "budget_change": ("budget", "at"),  # the budget's new gpu_hours and/or money
    "queue_hold": ("queue", "at"),  # a person holds a queue by hand (Kueue ``<ns>/<lq>``, or a Volcano queue)
}


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is one line naming file and field."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The controller that owns a pod (its ownerReference): kind and name."""

    kind: str
    name: str


SHARING_MODES = ("none", "time-slicing", "mps", "hami")


@dataclass(frozen=True, slots=True)
class HamiSpec:
    """A HAMi vGPU request per GPU: framebuffer MiB (``nvidia.com/gpumem``) and SM percent (``gpucores``)."""

    memory_mib: int
    cores: int = 0


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """A DRA ResourceClaim a pod uses: pods naming the same claim (in one namespace) share it."""

    name: str
    devices: tuple[str, ...]  # published device names: gpu-<i>, or gpu-<i>-mig-<profile>-<gi>-<start>
    admin_access: bool = False
    #: A consumable-capacity share (alpha DRAConsumableCapacity): MiB of each device's memory it consumes.
    memory_mib: int | None = None
    device_class: str = "gpu.nvidia.com"  # the request's deviceClassName: gpu.nvidia.com or mig.nvidia.com
    #: The pod's own claim, generated from a template: its name in the pod's ``spec.resourceClaims``
    #: (the claim object itself is ``name``, ``<pod>-<pod_claim>-<suffix>``); None for a claim named outright.
    pod_claim: str | None = None
    #: The claim the scheduler made for an extended-resource request (``nvidia.com/gpu`` served by DRA):
    #: ``<pod>-extended-resources-<suffix>``, named in the pod's ``status.extendedResourceClaimStatus``.
    extended: bool = False

    @property
    def request_name(self) -> str:
        """The request's name: the scheduler's ``container-<i>-request-<j>`` for an extended-resource claim."""
        return "container-0-request-0" if self.extended else "gpu"


@dataclass(frozen=True, slots=True)
class KaiSpec:
    """A KAI Scheduler fraction (``gpu-fraction``, or ``gpu-memory`` MiB) of ``devices`` GPUs from ``gpu``;
    ``placed`` the GPU indexes it got, ``reservation`` for the reservation pod KAI's binder starts."""

    fraction: float | None = None
    memory_mib: int | None = None
    gpu: int | None = None
    devices: int = 1
    placed: tuple[int, ...] = ()
    reservation: bool = False


@dataclass(slots=True)
class NodeSpec:
    """One node of the scenario: its GPUs and how they are shared and published."""

    name: str
    model: str
    gpus: int
    labels: dict[str, str] = field(default_factory=dict)
    mig: dict[int, list[str]] = field(default_factory=dict)
    time_slicing: int | None = None  # replicas per GPU, time-sliced or MPS (``sharing``)
    time_slicing_rename: bool = False
    dcgm_pod_labels: bool = True
    kubelet_lists_terminated: bool = False  # as kubelets before 1.34 did (KubeletPodResourcesListUseActivePods)
    sharing: str = "none"  # none | time-slicing | mps (device-plugin replicas) | hami (HAMi vGPU)
    hami_split: int = 10  # HAMi deviceSplitCount: plugin IDs GPU-<uuid>-<k> per GPU
    dra: bool = False  # GPUs published as ResourceSlices by the NVIDIA DRA driver, no device plugin
    dcgm_energy: bool = True  # DCGM serves the total-energy counter (older GPUs do not measure it)
    vendor: str = "nvidia"  # nvidia | amd | gaudi: whose device plugin IDs and exporter format the node serves
    partition: str | None = None  # AMD compute partition mode: cpx | qpx | dpx | spx (8/4/2/1 per GPU)
    per_pod_metrics: str | None = None  # dcgm | hami: per-pod utilisation series served beside the device's
    power: PowerRange | None = None  # the node's GPUs' board power, overriding the model's (``hardware.power_range``)
    exporter_hostname: str | None = None  # its exporter's Hostname label (None: the node's name, as NODE_NAME)
    exporter_host_network: bool = False  # its exporter answers on the node's address (hostNetwork), not its pod's
    scheduler: str = ""  # kai: fractional pods are placed as KAI Scheduler does (reservation pods)
    dra_extended: bool = False  # nvidia.com/gpu requests served by the NVIDIA DRA driver (extended resource)


@dataclass(slots=True)
class NamespaceSpec:
    """A namespace with its labels, optional GPU quota and optional monthly budget."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    gpu_quota: int | None = None
    monthly_budget: float | None = None  # served as the gpu.platform/monthly-budget annotation


@dataclass(slots=True)
class PodSpec:
    """One pod: where and when it runs, how many GPUs it holds and how busy it keeps them."""

    name: str
    namespace: str
    node: str | None
    gpus: int
    start: float
    end: float | None
    utilization: list[tuple[float, float]]
    resource: str = "nvidia.com/gpu"
    pending_reason: str | None = None
    owner: Owner | None = None
    priority_class: str | None = None
    container: str = "main"
    labels: dict[str, str] = field(default_factory=dict)
    hami: HamiSpec | None = None
    claims: list[ClaimSpec] = field(default_factory=list)
    #: ``utilization: {per_device: [...]}``: one constant value per device held, in allocation order.
    per_device: tuple[float, ...] | None = None
    #: ``framebuffer``: (at, bytes in use on each of its devices) steps; empty when the scenario gives none.
    framebuffer: list[tuple[float, int]] = field(default_factory=list)
    queue: PodQueue | None = None  # the scheduler queue it was submitted to (``queue:``), resolved at parse
    annotations: dict[str, str] = field(default_factory=dict)
    kai: KaiSpec | None = None  # a KAI fraction, or KAI's reservation pod

    def util_at(self, t: float, device: int = 0) -> float:
        """Utilisation of the pod's ``device``-th device (allocation order) at scenario time ``t``."""
        if self.per_device is not None:
            return self.per_device[device]
        return _step_at(self.utilization, t, before=0.0)

    def framebuffer_at(self, t: float) -> int | None:
        """Bytes in use on each of the pod's devices at ``t`` (0 before the first step); None: not given."""
        if not self.framebuffer:
            return None
        return int(_step_at(self.framebuffer, t, before=0))

    def running_at(self, t: float) -> bool:
        """Whether the pod is scheduled and between its start and end at scenario time ``t``."""
        return self.node is not None and self.start <= t and (self.end is None or t < self.end)


def _step_at(steps: Sequence[tuple[float, float]], t: float, *, before: float) -> float:
    """The value of a step function at ``t``: the last step at or before it, ``before`` ahead of the first."""
    value = before
    for at, v in steps:
        if at <= t:
            value = v
        else:
            break
    return value


class Hold(NamedTuple):
    """A pod holding a device, and which of its devices that is (allocation order, for ``per_device``)."""

    pod: PodSpec
    device: int


@dataclass(slots=True)
class QueueSpec:
    """A Volcano Queue, a KAI Queue, or a Kueue ClusterQueue (with its LocalQueues) with a GPU capability."""

    kind: str  # volcano | kueue | kai
    name: str
    gpus: int
    namespaces: list[str] = field(default_factory=list)
    #: Kueue: (namespace, name) of each LocalQueue pointing at this ClusterQueue; when the scenario names none,
    #: one ``<name>-lq`` per served namespace.
    local_queues: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PodQueue:
    """Where a pod was queued: its scheduler's kind, the queue it names (Kueue: the LocalQueue in its namespace)
    and, for Kueue, the ClusterQueue behind it."""

    kind: str  # kueue | volcano | kai
    name: str
    cluster_queue: str = ""


@dataclass(slots=True)
class EventSpec:
    """A fault or happening (``EVENT_TYPES``): at an instant (``at``) or over a window (``start``, ``end``)."""

    type: str
    node: str | None = None
    namespace: str | None = None
    at: float | None = None
    start: float | None = None
    end: float | None = None
    requested: int = 1
    budget: str | None = None
    queue: str | None = None
    amounts: dict[str, float] = field(default_factory=dict)  # budget_change: gpu_hours and/or money


@dataclass(slots=True)
class Scenario:
    """A parsed scenario file: the cluster, its workload and events, and the prices to book them at."""

    source: str
    tick: float
    duration: float
    currency: str
    prices: dict[str, float]
    default_price: float | None
    pools: dict[str, float]
    pool_label: str
    nodes: list[NodeSpec]
    namespaces: list[NamespaceSpec]
    pods: list[PodSpec]
    events: list[EventSpec]
    queues: list[QueueSpec] = field(default_factory=list)
    pricing: dict[str, Any] | None = None  # a whole pricing document (``pricing:``), else built from ``prices``
    users: list[UserSpec] = field(default_factory=list)  # callers of the aggregator (kube.reviews)
    budgets: list[dict[str, Any]] = field(default_factory=list)  # ``budgets:`` as written (validated)

    def node(self, name: str) -> NodeSpec:
        """The node named ``name``; StopIteration when the scenario has none."""
        return next(n for n in self.nodes if n.name == name)

    def pricing_document(self) -> dict[str, Any]:
        """The pricing document the aggregator loads: ``pricing:`` as given, else built from ``prices`` and
        ``pools``."""
        if self.pricing is not None:
            return dict(self.pricing)
        doc: dict[str, Any] = {"currency": self.currency, "models": dict(self.prices), "pools": dict(self.pools)}
        doc["default_price"] = self.default_price if self.default_price is not None else max(
            self.prices.values(), default=1.0)
        return doc
