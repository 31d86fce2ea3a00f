"""Reading Kubernetes objects: quantities, timestamps, top owners and the scheduler's pending reasons.

Pure functions of the JSON the API serves, so the watch cache (``kubestate``) stays about state.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

GPU_RESOURCE_RE = re.compile(r"^(nvidia\.com/(gpu|gpu\.shared|mig-.+)|amd\.com/gpu|gpu\.intel\.com/.+)$")
QUOTA_KEYS = ("requests.nvidia.com/gpu", "limits.nvidia.com/gpu", "requests.nvidia.com/gpu.shared",
              "nvidia.com/gpu")
#: Bounded: the scheduler's message classified (classify_pending), and dra_unallocated (kubestate: a GPU
#: ResourceClaim of the pod has no allocation).
PENDING_REASONS = ("insufficient_gpu", "node_affinity", "taint", "quota", "dra_unallocated", "other")

def parse_quantity(text: Any) -> float:
    """Kubernetes quantity -> number (only the forms GPU counts take: integers, m, k/Ki)."""
    s = str(text).strip()
    try:
        if s.endswith("m"):
            return float(s[:-1]) / 1000.0
        for suffix, mult in (("Ki", 1024.0), ("k", 1000.0), ("Mi", 1048576.0), ("M", 1e6)):
            if s.endswith(suffix):
                return float(s[: -len(suffix)]) * mult
        return float(s)
    except ValueError:
        return 0.0


def parse_timestamp(text: str) -> float | None:
    """An RFC3339 timestamp from the API (``2026-11-30T12:00:00Z``) as epoch seconds; None if unreadable."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def workload_of(meta: dict[str, Any]) -> tuple[str, str]:
    """The top owner: a Deployment through its ReplicaSet (by pod-template-hash), a Job, a StatefulSet..."""
    refs = meta.get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if ref is None:
        return ("Pod", meta.get("name", ""))
    kind, name = ref.get("kind", ""), ref.get("name", "")
    labels = meta.get("labels") or {}
    template_hash = labels.get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
        return ("Deployment", name[: -len(template_hash) - 1])
    if kind == "Job" and re.search(r"-\d{8,}$", name):  # a CronJob's Job: <cronjob>-<scheduled minute>
        return ("CronJob", name.rsplit("-", 1)[0])
    return (kind, name)


def gpu_quota_of(obj: dict[str, Any]) -> tuple[float, float] | None:
    """A ResourceQuota's tightest GPU key: (hard, used) of the one with the least headroom; None if it has none."""
    status = obj.get("status") or {}
    hard = status.get("hard") or (obj.get("spec") or {}).get("hard") or {}
    used = status.get("used") or {}
    best: tuple[float, float] | None = None
    for qkey, qhard in hard.items():
        if qkey in QUOTA_KEYS or qkey.startswith(("requests.nvidia.com/mig-", "limits.nvidia.com/mig-")):
            h, u = parse_quantity(qhard), parse_quantity(used.get(qkey, 0))
            if best is None or h - u < best[0] - best[1]:
                best = (h, u)
    return best


def cluster_queue_gpus(obj: dict[str, Any]) -> tuple[float, float] | None:
    """A Kueue ClusterQueue's GPU nominal quota and usage, summed over its flavors; None if it quotas no GPU."""
    nominal = used = 0.0
    found = False
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if GPU_RESOURCE_RE.match(res.get("name", "")):
                    nominal += parse_quantity(res.get("nominalQuota", 0))
                    found = True
    for flavor in (obj.get("status") or {}).get("flavorsUsage") or []:
        for res in flavor.get("resources") or []:
            if GPU_RESOURCE_RE.match(res.get("name", "")):
                used += parse_quantity(res.get("total", 0))
    return (nominal, used) if found else None


def classify_pending(message: str) -> list[str]:
    """Reasons a pod is pending, from the scheduler's message; several reasons count under each."""
    m = message.lower()
    reasons = []
    if re.search(r"insufficient (nvidia\.com|amd\.com|gpu\.intel\.com)/", m):
        reasons.append("insufficient_gpu")
    if "node affinity" in m or "node selector" in m or "didn't match pod's node" in m:
        reasons.append("node_affinity")
    if "taint" in m:
        reasons.append("taint")
    if "exceeded quota" in m or "quota" in m:
        reasons.append("quota")
    return reasons or ["other"]
