"""Budgets that act: hold a spent budget's queue, release it when the budget has room again (``schedulers.md`` §3-4).

* Kueue LocalQueue or ClusterQueue: ``spec.stopPolicy: Hold`` (no new admissions; admitted workloads run on), or
  ``HoldAndDrain`` only for a budget that says ``action: drain``; released with ``None``.
* Volcano Queue: a ``bus.volcano.sh/v1alpha1`` Command ``CloseQueue`` (``OpenQueue`` to release) in the
  aggregator's namespace, targeting the Queue by an owner reference; Volcano's controller deletes the Command.

Only a queue this aggregator held is released: every hold writes ``HELD_BY`` (the budget's name) on the object, and a
release first reads it back. A queue found already held without that annotation was held by a person and is left
alone (logged once). KAI and YuniKorn queues have no stop mechanism: their budgets alert and never act.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from exporter.clients.errors import PeerError
from exporter.logs import get_logger
from exporter.model.budget_windows import WindowBudget

HELD_BY = "gpu.platform/held-by-budget"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
BUS = ("bus.volcano.sh", "v1alpha1")
MERGE = "application/merge-patch+json"
log = get_logger("aggregator.budget_actions")


@dataclass(frozen=True, slots=True)
class QueueAction:
    """One thing done (or, dry run, that would be done) to a budget's queue."""

    budget: str
    target_kind: str
    target: str
    action: str  # hold | drain | release | skip-person-held
    reason: str
    dry_run: bool


@dataclass(slots=True)
class QueueActor:
    """Holds and releases queues through the API; ``namespace`` is where Volcano Commands and cluster-scoped
    objects' Events are created."""

    api_client: Any
    namespace: str
    dry_run: bool = False
    errors: int = 0
    _person_held: set[str] = field(default_factory=set)

    async def hold(self, b: WindowBudget, *, reason: str) -> QueueAction | None:
        """Hold ``b``'s queue unless a person holds it already; None when there was nothing to do."""
        stop = "HoldAndDrain" if b.action == "drain" else "Hold"
        try:
            obj = await self._get(b)
            held_by = (obj.get("metadata", {}).get("annotations") or {}).get(HELD_BY)
            if held_by == b.name:
                return None  # ours already
            if _is_held(b, obj):
                if b.name not in self._person_held:
                    self._person_held.add(b.name)
                    log.info("budget_queue_held_by_someone_else", budget=b.name, target=b.target, held_by=held_by)
                return QueueAction(b.name, b.target_kind, b.target, "skip-person-held", reason, self.dry_run)
            act = QueueAction(b.name, b.target_kind, b.target, "drain" if stop != "Hold" else "hold", reason,
                              self.dry_run)
            if not self.dry_run:
                await self._set(b, obj, stop=stop, annotation=b.name)
                await self._event(b, obj, reason="BudgetSpent", message=f"{reason}: {stop} by budget {b.name}")
            return act
        except PeerError as exc:
            self.errors += 1
            log.warning("budget_action_failed", budget=b.name, target=b.target, action=stop, error=str(exc)[:300])
            return None

    async def release(self, b: WindowBudget, *, reason: str) -> QueueAction | None:
        """Release ``b``'s queue if (and only if) this budget's hold is what is on it (action ``not-ours`` when it is
        not, or the queue is gone); None when the API did not answer (try again)."""
        try:
            try:
                obj = await self._get(b)
            except PeerError as exc:
                if "HTTP 404" not in str(exc):
                    raise
                obj = {}
            if (obj.get("metadata", {}).get("annotations") or {}).get(HELD_BY) != b.name:
                self._person_held.discard(b.name)
                return QueueAction(b.name, b.target_kind, b.target, "not-ours", reason, self.dry_run)
            act = QueueAction(b.name, b.target_kind, b.target, "release", reason, self.dry_run)
            if not self.dry_run:
                await self._set(b, obj, stop="None", annotation=None)
                await self._event(b, obj, reason="BudgetReleased", message=f"{reason}: released by budget {b.name}")
            return act
        except PeerError as exc:
            self.errors += 1
            log.warning("budget_action_failed", budget=b.name, target=b.target, action="release",
                        error=str(exc)[:300])
            return None

    # -- the API ---------------------------------------------------------------------------------------
    def _where(self, b: WindowBudget) -> tuple[tuple[str, str], str, str, str]:
        """(group/version, plural, namespace, name) of the budget's queue object."""
        if b.target_kind == "kueue_local_queue":
            ns, name = b.target.split("/", 1)
            return KUEUE, "localqueues", ns, name
        if b.target_kind == "kueue_cluster_queue":
            return KUEUE, "clusterqueues", "", b.target
        return VOLCANO, "queues", "", b.target

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        api = client.CustomObjectsApi(self.api_client)
        try:
            out: dict[str, Any] = await getattr(api, method)(*args, **kwargs, _request_timeout=10)
        except ApiException as exc:
            raise PeerError(f"{method}: HTTP {exc.status}: {str(exc.reason)[:200]}") from None
        except (TimeoutError, OSError) as exc:
            raise PeerError(f"{method}: API server unreachable: {exc!r}") from None
        return out

    async def _get(self, b: WindowBudget) -> dict[str, Any]:
        (group, version), plural, ns, name = self._where(b)
        if ns:
            return await self._call("get_namespaced_custom_object", group, version, ns, plural, name)
        return await self._call("get_cluster_custom_object", group, version, plural, name)

    async def _set(self, b: WindowBudget, obj: dict[str, Any], *, stop: str, annotation: str | None) -> None:
        (group, version), plural, ns, name = self._where(b)
        body: dict[str, Any] = {"metadata": {"annotations": {HELD_BY: annotation}}}
        if b.target_kind != "volcano_queue":
            body["spec"] = {"stopPolicy": stop}
        if ns:
            await self._call("patch_namespaced_custom_object", group, version, ns, plural, name, body,
                             _content_type=MERGE)
        else:
            await self._call("patch_cluster_custom_object", group, version, plural, name, body, _content_type=MERGE)
        if b.target_kind == "volcano_queue":
            meta = obj.get("metadata") or {}
            command = {"apiVersion": "/".join(BUS), "kind": "Command",
                       "metadata": {"generateName": f"{name}-{'open' if stop == 'None' else 'close'}-",
                                    "namespace": self.namespace},
                       "action": "OpenQueue" if stop == "None" else "CloseQueue",
                       "target": {"apiVersion": "/".join(VOLCANO), "kind": "Queue", "name": name,
                                  "uid": meta.get("uid", "")},
                       "reason": "GPUBudget", "message": f"budget {b.name}"}
            await self._call("create_namespaced_custom_object", *BUS, self.namespace, "commands", command)

    async def _event(self, b: WindowBudget, obj: dict[str, Any], *, reason: str, message: str) -> None:
        """A Kubernetes Event on the queue (its namespace; a cluster-scoped queue's in ``namespace``)."""
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or self.namespace
        now = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"generateName": f"{meta.get('name', 'queue')}.", "namespace": ns},
                 "involvedObject": {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                                    "name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
                                    "uid": meta.get("uid", "")},
                 "reason": reason, "message": message[:1000], "type": "Warning", "count": 1,
                 "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "gpu-cost-exporter"}}
        try:
            await client.CoreV1Api(self.api_client).create_namespaced_event(ns, event, _request_timeout=10)
        except (ApiException, TimeoutError, OSError) as exc:  # the action stands; its Event is best effort
            self.errors += 1
            log.warning("budget_event_failed", budget=b.name, error=repr(exc)[:300])


def _is_held(b: WindowBudget, obj: dict[str, Any]) -> bool:
    """Whether the queue admits nothing new now: Kueue stopPolicy not None, Volcano state not Open."""
    if b.target_kind == "volcano_queue":
        return str((obj.get("status") or {}).get("state", "Open")) != "Open"
    return str((obj.get("spec") or {}).get("stopPolicy", "None")) not in ("", "None")
