"""Server-side printing: ``meta.k8s.io/v1`` ``Table`` answers with the columns kubectl shows for each kind.

kubectl asks for a Table (``Accept: ...;as=Table;g=meta.k8s.io``) on ``get``; a server that answers
with it decides the columns, as the real API server does, so ``kubectl get pods`` shows READY and
STATUS rather than only NAME and AGE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a ``kubectl get`` table: its header, how to fill a cell from (object, now)."""

    name: str
    cell: Callable[[dict[str, Any], float], Any]
    priority: int = 0  # 1: shown only with -o wide
    type: str = "string"


def wants_table(accept: str) -> bool:
    """Whether the client asked for a server-side Table (``kubectl get``) rather than the objects."""
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def human_age(seconds: float) -> str:
    """Kubernetes' short duration form: 45s, 12m, 3h5m, 2d4h."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 48:
        return f"{h}h{m % 60}m" if h < 8 and m % 60 else f"{h}h"
    return f"{h // 24}d{h % 24}h" if h < 192 and h % 24 else f"{h // 24}d"


def _age(obj: dict[str, Any], now: float) -> str:
    created = _ts(obj["metadata"].get("creationTimestamp"))
    return "<unknown>" if created is None else human_age(now - created)


def _name(obj: dict[str, Any], _now: float) -> str:
    return str(obj["metadata"]["name"])


def _pod_ready(obj: dict[str, Any], _now: float) -> str:
    statuses = obj.get("status", {}).get("containerStatuses") or []
    total = len(obj.get("spec", {}).get("containers") or [])
    return f"{sum(1 for c in statuses if c.get('ready'))}/{total}"


def _pod_status(obj: dict[str, Any], _now: float) -> str:
    status = obj.get("status", {})
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if status.get("phase") == "Succeeded":
        return "Completed"
    return str(status.get("phase", "Unknown"))


def _restarts(obj: dict[str, Any], _now: float) -> int:
    return sum(int(c.get("restartCount", 0)) for c in obj.get("status", {}).get("containerStatuses") or [])


def _node_ready(obj: dict[str, Any], _now: float) -> str:
    conds = obj.get("status", {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    return "Ready" if ready is not None and ready.get("status") == "True" else "NotReady"


def _quota(which: str) -> Callable[[dict[str, Any], float], str]:
    """REQUEST/LIMIT columns: ``used/hard`` for each ``requests.*`` or ``limits.*`` key."""
    def cell(obj: dict[str, Any], _now: float) -> str:
        hard = obj.get("status", {}).get("hard") or {}
        used = obj.get("status", {}).get("used") or {}
        return ", ".join(f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items()) if k.startswith(which))
    return cell


def _path(*keys: str) -> Callable[[dict[str, Any], float], str]:
    def cell(obj: dict[str, Any], _now: float) -> str:
        cur: Any = obj
        for k in keys:
            cur = cur.get(k) if isinstance(cur, dict) else None
        return "" if cur is None else str(cur)
    return cell


def _event_last_seen(obj: dict[str, Any], now: float) -> str:
    seen = _ts(obj.get("lastTimestamp") or obj["metadata"].get("creationTimestamp"))
    return "<unknown>" if seen is None else human_age(now - seen)


def _event_object(obj: dict[str, Any], _now: float) -> str:
    inv = obj.get("involvedObject") or {}
    return f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"


_NAME, _AGE = Column("Name", _name), Column("Age", _age)
COLUMNS: dict[str, list[Column]] = {
    "pods": [_NAME, Column("Ready", _pod_ready), Column("Status", _pod_status),
             Column("Restarts", _restarts, type="integer"), _AGE,
             Column("IP", _path("status", "podIP"), 1), Column("Node", _path("spec", "nodeName"), 1)],
    "nodes": [_NAME, Column("Status", _node_ready), Column("Roles", lambda _o, _n: "<none>"), _AGE,
              Column("Version", lambda _o, _n: "v1.33.0-sim")],
    "namespaces": [_NAME, Column("Status", _path("status", "phase")), _AGE],
    "resourcequotas": [_NAME, _AGE, Column("Request", _quota("requests.")), Column("Limit", _quota("limits."))],
    "events": [Column("Last Seen", _event_last_seen), Column("Type", _path("type")),
               Column("Reason", _path("reason")), Column("Object", _event_object), Column("Message", _path("message"))],
    "leases": [_NAME, Column("Holder", _path("spec", "holderIdentity")), _AGE],
    "queues": [_NAME, Column("State", _path("status", "state")), _AGE],
    "clusterqueues": [_NAME, _AGE],
    "localqueues": [_NAME, Column("ClusterQueue", _path("spec", "clusterQueue")), _AGE],
    "configmaps": [_NAME, Column("Data", lambda o, _n: str(len(o.get("data") or {})), type="integer"), _AGE],
}


def table(plural: str, objs: list[dict[str, Any]], *, now: float, resource_version: str) -> dict[str, Any]:
    """A ``Table`` of ``objs``; each row carries its object, from which kubectl reads the namespace."""
    cols = COLUMNS.get(plural, [_NAME, _AGE])
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": [{"name": c.name, "type": c.type, "format": "name" if c is _NAME else "",
                                   "description": c.name, "priority": c.priority} for c in cols],
            "rows": [{"cells": [c.cell(o, now) for c in cols], "object": o} for o in objs]}
