"""An in-memory object store with Kubernetes resourceVersion semantics: ordered change history,
watchers woken on change, and a history window whose expiry answers old watches with 410 Gone."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from dataclasses import dataclass
from typing import Any

KINDS = ("pods", "nodes", "namespaces", "resourcequotas", "events", "leases", "queues", "clusterqueues",
         "localqueues", "resourceslices", "resourceclaims", "configmaps", "workloads", "podgroups", "kaiqueues",
         "kaipodgroups", "commands")
HISTORY_LIMIT = 20_000


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the change history, replayed to watches that start from an older resourceVersion."""

    rv: int
    kind: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]


class KubeStore:
    """Objects by kind and (namespace, name); one global resourceVersion, as etcd gives."""

    def __init__(self) -> None:
        self.rv = 1
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in KINDS}
        self.history: list[Change] = []
        self.floor = 0  # watches from a resourceVersion below this get 410 Gone
        self._changed = asyncio.Event()
        self.expirations = 0

    @staticmethod
    def key(obj: dict[str, Any]) -> tuple[str, str]:
        """An object's (namespace, name); namespace is "" for cluster-scoped kinds."""
        meta = obj["metadata"]
        return (meta.get("namespace", ""), meta["name"])

    def _record(self, kind: str, etype: str, *, obj: dict[str, Any]) -> None:
        self.history.append(Change(self.rv, kind, etype, obj))
        if len(self.history) > HISTORY_LIMIT:
            drop = len(self.history) - HISTORY_LIMIT
            self.floor = self.history[drop - 1].rv + 1
            del self.history[:drop]
        self._changed.set()
        self._changed = asyncio.Event()

    def upsert(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object under a new resourceVersion; returns the stored copy."""
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = self.key(obj)
        etype = "MODIFIED" if key in self.objects[kind] else "ADDED"
        self.objects[kind][key] = obj
        self._record(kind, etype, obj=obj)
        return obj

    def delete(self, kind: str, namespace: str, *, name: str, at: str | None = None) -> dict[str, Any] | None:
        """Remove an object; ``at`` (RFC 3339) is its deletionTimestamp, else its creation time."""
        obj = self.objects[kind].pop((namespace, name), None)
        if obj is None:
            return None
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"]["deletionTimestamp"] = at or obj["metadata"].get("creationTimestamp")
        self._record(kind, "DELETED", obj=obj)
        return obj

    def expire_history(self) -> None:
        """Compact everything: every watch, open or resuming, from an older resourceVersion gets 410 Gone.

        The compaction itself takes a revision (as etcd's does), so even a watch that had seen the newest
        change must relist: a test that forces a relist of pods really gets one."""
        self.rv += 1
        self.floor = self.rv + 1
        self.history.clear()
        self.expirations += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def changes_since(self, rv: int, kind: str) -> list[Change] | None:
        """Changes of ``kind`` after ``rv``; None when ``rv`` is older than the history window."""
        if rv + 1 < self.floor:
            return None
        return [c for c in self.history if c.rv > rv and c.kind == kind]

    async def wait_change(self, timeout: float) -> None:
        """Wait until the store changes or ``timeout`` seconds pass, whichever is first."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()

    def latest_rv(self, kind: str) -> int:
        """Newest resourceVersion of a change of ``kind`` (what a watcher of it must reach)."""
        for c in reversed(self.history):
            if c.kind == kind:
                return c.rv
        return 0
