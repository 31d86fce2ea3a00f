"""DRA: from the claims pod-resources lists to holds on GPUs, pure.

Rules (reference: resource.k8s.io/v1 and the NVIDIA DRA driver):

* only driver ``gpu.nvidia.com``; a device is ``(driver, pool, device)``, never its CDI names;
* a container gets every device of every claim it names, so a claim counts once per pod (the first
  container naming it, by name), not once per container;
* a claim used by k pods of this node is split evenly: 1/k each (a policy, not an upstream rule);
* ``adminAccess`` results (monitoring) are charged 0;
* a consumable-capacity share (alpha ``DRAConsumableCapacity``: a result with ``shareID`` and
  ``consumedCapacity``) is charged ``consumedCapacity.memory / the device's capacity.memory`` of the device;
* devices resolve through the node's ResourceSlices (newest pool generation): ``type=gpu`` -> its
  ``uuid``; ``type=mig`` -> its ``uuid``, ``parentUUID`` and ``profile``. Without slices a full GPU
  falls back to its name ``gpu-<minor>`` (the NVML minor, DCGM's ``gpu`` label).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from exporter.model.pod_resources import ContainerClaim

DRIVER = "gpu.nvidia.com"
_GPU_NAME = re.compile(r"^gpu-(\d+)$")
_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(\d+)g(\d+)gb")  # v25.12 names: gpu-<minor>-mig-<3g40gb>-<gi>-<start>


@dataclass(frozen=True, slots=True)
class DeviceKey:
    """A DRA device's identity."""

    driver: str
    pool: str
    device: str


@dataclass(frozen=True, slots=True)
class SliceDevice:
    """What a ResourceSlice says about one device."""

    type: str  # gpu | mig | vfio
    uuid: str  # GPU-... or MIG-... ("" when not published, e.g. DynamicMIG)
    parent_uuid: str = ""
    profile: str = ""
    memory: float | None = None  # capacity.memory in bytes (None: not published)


@dataclass(frozen=True, slots=True)
class DraHold:
    """One pod's (container's) hold on one DRA device of one claim, with its share of the device."""

    namespace: str
    pod: str
    container: str
    claim: str  # <claim namespace>/<claim name>
    key: DeviceKey
    share: float  # 1/k for a claim of k pods; 0 for adminAccess
    device: SliceDevice | None  # None: not (yet) in any slice
    minor: int | None  # from the device name, for the no-API fallback
    name_profile: str | None  # MIG profile read from the device name, for the no-API fallback
    consumed: float | None = None  # memory bytes the claim's shares consume on it (None: not a share)


def _attr(attrs: dict[str, Any], name: str) -> str:
    """An attribute's string value; unqualified names are the driver's (``uuid`` = ``gpu.nvidia.com/uuid``)."""
    value = attrs.get(name, attrs.get(f"{DRIVER}/{name}"))
    return str(value.get("string", "")) if isinstance(value, dict) else ""


_SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity (``80Gi``, ``40000M``, ``85899345920``) as a number; None when unreadable."""
    m = _QUANTITY.match(str(value).strip()) if isinstance(value, str | int | float) else None
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""] if m else None


def _memory(capacity: Any) -> float | None:
    entry = capacity.get("memory") if isinstance(capacity, dict) else None
    value = quantity(entry.get("value")) if isinstance(entry, dict) else None
    return value if value is not None and value > 0 else None


def slice_index(slices: list[dict[str, Any]]) -> dict[DeviceKey, SliceDevice]:
    """(driver, pool, device) -> device, across every slice of a pool, ignoring older pool generations."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        gen = pool.get("generation", 0)
        key = (str(spec.get("driver", "")), str(pool.get("name", "")))
        if isinstance(gen, int):
            newest[key] = max(newest.get(key, gen), gen)
    out: dict[DeviceKey, SliceDevice] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        driver, pool_name = str(spec.get("driver", "")), str(pool.get("name", ""))
        if driver != DRIVER or pool.get("generation", 0) != newest.get((driver, pool_name)):
            continue
        for d in spec.get("devices") or []:
            if not isinstance(d, dict):
                continue
            attrs = d.get("attributes") or {}
            out[DeviceKey(driver, pool_name, str(d.get("name", "")))] = SliceDevice(
                _attr(attrs, "type"), _attr(attrs, "uuid"), _attr(attrs, "parentUUID"), _attr(attrs, "profile"),
                _memory(d.get("capacity")))
    return out


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return [r for r in results if isinstance(r, dict)]


def _key(result: dict[str, Any]) -> DeviceKey:
    return DeviceKey(str(result.get("driver", "")), str(result.get("pool", "")), str(result.get("device", "")))


def admin_devices(claim: dict[str, Any]) -> set[DeviceKey]:
    """The devices a ResourceClaim holds with ``adminAccess: true`` (status.allocation.devices.results)."""
    return {_key(r) for r in _results(claim) if r.get("adminAccess") is True}


def consumed_memory(claim: dict[str, Any]) -> dict[DeviceKey, float]:
    """Memory bytes a claim's consumable-capacity shares (results with ``shareID``) consume per device,
    summed over its shares of one device. A share without a readable ``consumedCapacity.memory`` is
    left out (its device is then charged whole, as an ordinary allocation)."""
    out: dict[DeviceKey, float] = {}
    for r in _results(claim):
        if not r.get("shareID") or r.get("adminAccess") is True:
            continue
        consumed = r.get("consumedCapacity")  # a map of quantities: {memory: 20Gi, ...}
        used = quantity(consumed.get("memory")) if isinstance(consumed, dict) else None
        if used is not None and used > 0:
            out[_key(r)] = out.get(_key(r), 0.0) + used
    return out


def _name_fallback(device: str) -> tuple[int | None, str | None]:
    if m := _GPU_NAME.match(device):
        return int(m.group(1)), None
    if m := _MIG_NAME.match(device):
        return int(m.group(1)), f"{m.group(2)}g.{m.group(3)}gb"
    return None, None


def dra_holds(claims: list[ContainerClaim], *, slices: dict[DeviceKey, SliceDevice],
              admin: dict[str, set[DeviceKey]],
              consumed: dict[str, dict[DeviceKey, float]] | None = None) -> list[DraHold]:
    """Holds of NVIDIA GPU devices: one per (pod, claim, device), split among the claim's pods."""
    first_container: dict[tuple[str, str, str], str] = {}  # (claim, ns, pod) -> container
    devices: dict[str, set[DeviceKey]] = {}
    for c in claims:
        claim = f"{c.claim_namespace}/{c.claim_name}"
        k = (claim, c.namespace, c.pod)
        first_container[k] = min(first_container.get(k, c.container), c.container)
        devices.setdefault(claim, set()).update(DeviceKey(d.driver, d.pool, d.device) for d in c.devices
                                                if d.driver == DRIVER)
    pods_of: dict[str, int] = {}
    for claim, _ns, _pod in first_container:
        pods_of[claim] = pods_of.get(claim, 0) + 1
    out: list[DraHold] = []
    for (claim, ns, pod), container in sorted(first_container.items()):
        for key in sorted(devices.get(claim, set()), key=lambda k: (k.pool, k.device)):
            share = 0.0 if key in admin.get(claim, set()) else 1.0 / pods_of[claim]
            minor, profile = _name_fallback(key.device)
            out.append(DraHold(ns, pod, container, claim, key, share, slices.get(key), minor, profile,
                               (consumed or {}).get(claim, {}).get(key)))
    return out
