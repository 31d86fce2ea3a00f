"""DRA (resource.k8s.io/v1) as the aggregator sees it: which GPU claims exist, which are allocated.

A pod that asks for GPUs through DRA requests no ``nvidia.com/gpu`` resource, so the scheduler's
message alone cannot tell that it waits for a GPU. The claims it names can: a pending pod whose GPU
claim has no ``status.allocation`` is pending for ``dra_unallocated``. A claim is a GPU claim when a
request names a device class of the NVIDIA DRA driver or an allocation result names its driver
(custom device classes with other names are not recognised as GPUs).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

GPU_DRIVER = "gpu.nvidia.com"
GPU_DEVICE_CLASSES = frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"})
DEVICE_TYPES = frozenset({"gpu", "mig", "vfio"})  # the driver's ``type`` attribute; anything else is "other"
DRA_KIND_NAMES = frozenset({"resourceclaims", "resourceslices"})


@dataclass(frozen=True, slots=True)
class ClaimState:
    """One ResourceClaim reduced to what pending reasons and the claim gauge need."""

    namespace: str
    name: str
    gpu: bool
    allocated: bool


@dataclass(frozen=True, slots=True)
class ClaimCount:
    """GPU claims of a namespace in one state (allocated or pending)."""

    namespace: str
    state: str
    claims: int


@dataclass(frozen=True, slots=True)
class SliceDevices:
    """GPU devices a node publishes through the NVIDIA DRA driver, by device type (gpu, mig, vfio)."""

    node: str
    type: str
    devices: int


def _request_classes(spec: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for req in ((spec.get("devices") or {}).get("requests")) or []:
        if not isinstance(req, dict):
            continue
        exact = req.get("exactly") or {}
        out.add(str(exact.get("deviceClassName", "")))
        out.update(str(s.get("deviceClassName", "")) for s in req.get("firstAvailable") or [] if isinstance(s, dict))
    return out


def claim_state(obj: dict[str, Any]) -> ClaimState:
    """A claim object as a ClaimState; allocated means ``status.allocation`` is set (the scheduler wrote it)."""
    meta = obj.get("metadata") or {}
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    gpu = bool(_request_classes(obj.get("spec") or {}) & GPU_DEVICE_CLASSES) or any(
        isinstance(r, dict) and r.get("driver") == GPU_DRIVER for r in results)
    return ClaimState(str(meta.get("namespace", "")), str(meta.get("name", "")), gpu, bool(allocation))


def pod_claim_names(spec: dict[str, Any], status: dict[str, Any]) -> tuple[str, ...]:
    """Names of the ResourceClaims a pod uses: ``resourceClaimName`` as written, or for a template the
    generated name from ``status.resourceClaimStatuses`` (absent until the claim controller made it)."""
    generated = {str(s.get("name", "")): s.get("resourceClaimName")
                 for s in status.get("resourceClaimStatuses") or [] if isinstance(s, dict)}
    out: list[str] = []
    for ref in spec.get("resourceClaims") or []:
        if not isinstance(ref, dict):
            continue
        name = ref.get("resourceClaimName") or generated.get(str(ref.get("name", "")))
        if name:
            out.append(str(name))
    return tuple(out)


@dataclass(slots=True)
class DraState:
    """Claims and published GPU devices, fed by the watch of the two DRA kinds."""

    claims: dict[tuple[str, str], ClaimState] = field(default_factory=dict)
    slices: dict[str, Counter[str]] = field(default_factory=dict)  # slice name -> device type -> count
    slice_nodes: dict[str, str] = field(default_factory=dict)  # slice name -> node

    def handle(self, kind: str, etype: str, *, obj: dict[str, Any]) -> None:
        """A watch event or (``LISTED``) a full list of ResourceClaims or ResourceSlices; slices of other drivers are
        dropped."""
        if etype == "LISTED":
            if kind == "resourceclaims":
                self.claims.clear()
            else:
                self.slices.clear()
                self.slice_nodes.clear()
            for item in obj["items"]:
                self.handle(kind, "ADDED", obj=item)
            return
        if kind == "resourceclaims":
            state = claim_state(obj)
            if etype == "DELETED":
                self.claims.pop((state.namespace, state.name), None)
            else:
                self.claims[(state.namespace, state.name)] = state
            return
        self._on_slice(etype, obj)

    def _on_slice(self, etype: str, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        spec = obj.get("spec") or {}
        if etype == "DELETED" or spec.get("driver") != GPU_DRIVER:
            self.slices.pop(name, None)
            self.slice_nodes.pop(name, None)
            return
        types: Counter[str] = Counter()
        for dev in spec.get("devices") or []:
            attr = ((dev.get("attributes") or {}) if isinstance(dev, dict) else {}).get("type") or {}
            dtype = str(attr.get("string", "")) if isinstance(attr, dict) else ""
            types[dtype if dtype in DEVICE_TYPES else "other"] += 1
        self.slices[name] = types
        self.slice_nodes[name] = str(spec.get("nodeName") or "")

    def gpu_claims(self, namespace: str, names: tuple[str, ...]) -> list[ClaimState]:
        """The pod's claims that are known GPU claims (a claim not seen yet is not known to be one)."""
        return [c for n in names if (c := self.claims.get((namespace, n))) is not None and c.gpu]

    def unallocated(self, namespace: str, names: tuple[str, ...]) -> bool:
        """Whether a known GPU claim of the pod has no allocation yet (what keeps it pending)."""
        return any(not c.allocated for c in self.gpu_claims(namespace, names))

    def with_claim_reason(self, namespace: str, names: tuple[str, ...], *, reasons: list[str]) -> list[str]:
        """``dra_unallocated`` first when a GPU claim of the pod has no allocation; the scheduler's own
        message for it ("cannot allocate all claims") classifies as ``other``, which it replaces."""
        if not self.unallocated(namespace, names):
            return reasons
        return ["dra_unallocated", *(r for r in reasons if r != "other")]

    def claim_counts(self) -> list[ClaimCount]:
        """GPU claims per namespace and state, every (namespace, state) seen, sorted."""
        counts: Counter[tuple[str, str]] = Counter()
        for c in self.claims.values():
            if c.gpu:
                counts[(c.namespace, "allocated" if c.allocated else "pending")] += 1
        return [ClaimCount(ns, state, n) for (ns, state), n in sorted(counts.items())]

    def published_devices(self) -> list[SliceDevices]:
        """GPU devices published per node and type, over the node's slices."""
        per: Counter[tuple[str, str]] = Counter()
        for name, types in self.slices.items():
            for dtype, n in types.items():
                per[(self.slice_nodes.get(name, ""), dtype)] += n
        return [SliceDevices(node, dtype, n) for (node, dtype), n in sorted(per.items())]
