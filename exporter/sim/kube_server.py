"""A subset of the Kubernetes API server that the real kubernetes_asyncio client talks to.

Served: list and watch (``?watch=1``: JSON lines, ``resourceVersion``, ``allowWatchBookmarks``,
``timeoutSeconds``, ``410 Gone`` as an ERROR event for expired versions) of pods, nodes, namespaces,
resourcequotas and events, cluster-wide and per namespace, with label and field selectors.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from exporter.sim.kube_store import KubeStore

LIST_KINDS = {"pods": "PodList", "nodes": "NodeList", "namespaces": "NamespaceList",
              "resourcequotas": "ResourceQuotaList", "events": "EventList", "queues": "QueueList",
              "clusterqueues": "ClusterQueueList", "localqueues": "LocalQueueList"}
OBJ_KINDS = {"pods": "Pod", "nodes": "Node", "namespaces": "Namespace", "resourcequotas": "ResourceQuota",
             "events": "Event", "queues": "Queue", "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue"}
#: custom resources served only when the scenario "installs" their CRDs: group/version -> (plural, kind, namespaced)
CRDS = {
    "volcano": ("scheduling.volcano.sh/v1beta1", [("queues", "Queue", False)]),
    "kueue": ("kueue.x-k8s.io/v1beta1",
              [("clusterqueues", "ClusterQueue", False), ("localqueues", "LocalQueue", True)]),
}


def _parse_selector(text: str) -> list[tuple[str, str, str]]:
    out = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            out.append((k.strip(), "!=", v.strip()))
        elif "==" in term:
            k, v = term.split("==", 1)
            out.append((k.strip(), "=", v.strip()))
        elif "=" in term:
            k, v = term.split("=", 1)
            out.append((k.strip(), "=", v.strip()))
        else:
            out.append((term, "exists", ""))
    return out


def _field(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def _matches(obj: dict[str, Any], labels: list[tuple[str, str, str]], fields: list[tuple[str, str, str]]) -> bool:
    obj_labels = obj["metadata"].get("labels") or {}
    for k, op, v in labels:
        have = obj_labels.get(k)
        if (op == "=" and have != v) or (op == "!=" and have == v) or (op == "exists" and have is None):
            return False
    for k, op, v in fields:
        have = _field(obj, k)
        if (op == "=" and have != v) or (op == "!=" and have == v):
            return False
    return True


class KubeApiServer:
    """aiohttp application over a ``KubeStore``."""

    def __init__(self, store: KubeStore, bookmark_interval: float = 1.0, crds: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.bookmark_interval = bookmark_interval
        self.active_watches = 0
        self.requests = 0
        self.app = web.Application()
        r = self.app.router
        r.add_get("/version", self.version)
        r.add_get("/api", self.api_versions)
        for kind in LIST_KINDS:
            r.add_get(f"/api/v1/{kind}", self.handler(kind, namespaced=False))
            if kind not in ("nodes", "namespaces"):
                r.add_get(f"/api/v1/namespaces/{{namespace}}/{kind}", self.handler(kind, namespaced=True))
        r.add_get("/api/v1/namespaces/{namespace}/pods/{name}", self.get_pod)
        for crd, (group_version, resources) in CRDS.items():
            installed = crd in crds
            r.add_get(f"/apis/{group_version}", self._discovery(group_version, resources, installed))
            for plural, _kind, namespaced in resources:
                handle = self.handler(plural, namespaced=False) if installed else self._not_found
                r.add_get(f"/apis/{group_version}/{plural}", handle)
                if namespaced:
                    r.add_get(f"/apis/{group_version}/namespaces/{{namespace}}/{plural}",
                              self.handler(plural, namespaced=True) if installed else self._not_found)
        leases = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        r.add_get(leases + "/{name}", self.get_lease)
        r.add_post(leases, self.create_lease)
        r.add_put(leases + "/{name}", self.replace_lease)

    async def _not_found(self, _req: web.Request) -> web.Response:
        return self._status(404, "NotFound", "the server could not find the requested resource")

    def _discovery(self, group_version: str, resources: list[tuple[str, str, bool]], installed: bool) -> Any:
        async def handle(_req: web.Request) -> web.Response:
            if not installed:
                return self._status(404, "NotFound", "the server could not find the requested resource")
            return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                                      "resources": [{"name": p, "singularName": k.lower(), "namespaced": ns,
                                                     "kind": k, "verbs": ["get", "list", "watch"]}
                                                    for p, k, ns in resources]})
        return handle

    async def version(self, _req: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0-sim", "platform": "linux/amd64"})

    async def api_versions(self, _req: web.Request) -> web.Response:
        return web.json_response({"kind": "APIVersions", "versions": ["v1"]})

    async def get_pod(self, req: web.Request) -> web.Response:
        obj = self.store.objects["pods"].get((req.match_info["namespace"], req.match_info["name"]))
        if obj is None:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                      "message": "pods not found", "code": 404}, status=404)
        return web.json_response(obj)

    # -- coordination.k8s.io/v1 Lease: get, create, and update with optimistic concurrency ------------
    @staticmethod
    def _status(code: int, reason: str, message: str) -> web.Response:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "reason": reason, "message": message, "code": code}, status=code)

    async def get_lease(self, req: web.Request) -> web.Response:
        obj = self.store.objects["leases"].get((req.match_info["namespace"], req.match_info["name"]))
        if obj is None:
            return self._status(404, "NotFound", f'leases.coordination.k8s.io "{req.match_info["name"]}" not found')
        return web.json_response(obj)

    async def create_lease(self, req: web.Request) -> web.Response:
        body = await req.json()
        meta = body.setdefault("metadata", {})
        meta["namespace"] = req.match_info["namespace"]
        if (meta["namespace"], meta.get("name", "")) in self.store.objects["leases"]:
            return self._status(409, "AlreadyExists", f'leases.coordination.k8s.io "{meta.get("name")}" already exists')
        body.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        return web.json_response(self.store.upsert("leases", body), status=201)

    async def replace_lease(self, req: web.Request) -> web.Response:
        body = await req.json()
        key = (req.match_info["namespace"], req.match_info["name"])
        current = self.store.objects["leases"].get(key)
        if current is None:
            return self._status(404, "NotFound", f'leases.coordination.k8s.io "{key[1]}" not found')
        if str(body.get("metadata", {}).get("resourceVersion")) != current["metadata"]["resourceVersion"]:
            return self._status(409, "Conflict", "the object has been modified; please apply your changes to the "
                                                 "latest version and try again")
        body["metadata"].update(namespace=key[0], name=key[1])
        body.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        return web.json_response(self.store.upsert("leases", body))

    def handler(self, kind: str, namespaced: bool) -> Any:
        async def handle(req: web.Request) -> web.StreamResponse:
            self.requests += 1
            namespace = req.match_info.get("namespace") if namespaced else None
            labels = _parse_selector(req.query.get("labelSelector", ""))
            fields = _parse_selector(req.query.get("fieldSelector", ""))
            if namespace:
                fields.append(("metadata.namespace", "=", namespace))
            if req.query.get("watch") in ("1", "true", "True"):
                return await self._watch(req, kind, labels, fields)
            items = [o for o in self.store.objects[kind].values() if _matches(o, labels, fields)]
            return web.json_response({"kind": LIST_KINDS[kind], "apiVersion": "v1",
                                      "metadata": {"resourceVersion": str(self.store.rv)}, "items": items})
        return handle

    async def _watch(self, req: web.Request, kind: str, labels: list[tuple[str, str, str]],
                     fields: list[tuple[str, str, str]]) -> web.StreamResponse:
        rv_text = req.query.get("resourceVersion", "")
        bookmarks = req.query.get("allowWatchBookmarks") in ("1", "true", "True")
        timeout = float(req.query.get("timeoutSeconds", "1800"))
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        await resp.prepare(req)
        self.active_watches += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            if rv_text in ("", "0"):
                rv = self.store.rv
                for obj in list(self.store.objects[kind].values()):
                    if _matches(obj, labels, fields):
                        await self._send(resp, "ADDED", obj)
            else:
                try:
                    rv = int(rv_text)
                except ValueError:
                    rv = -1
            next_bookmark = loop.time() + self.bookmark_interval
            while True:
                changes = self.store.changes_since(rv, kind) if rv >= 0 else None
                if changes is None:
                    await self._send(resp, "ERROR", {
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": f"too old resource version: {rv_text} ({self.store.floor})",
                        "reason": "Expired", "code": 410})
                    break
                for c in changes:
                    rv = c.rv
                    if _matches(c.obj, labels, fields):
                        await self._send(resp, c.type, c.obj)
                now = loop.time()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    rv = max(rv, self.store.rv) if not self.store.changes_since(rv, kind) else rv
                    await self._send(resp, "BOOKMARK", {"kind": OBJ_KINDS[kind], "apiVersion": "v1",
                                                        "metadata": {"resourceVersion": str(rv)}})
                    next_bookmark = now + self.bookmark_interval
                await self.store.wait_change(min(deadline - now, self.bookmark_interval))
        except ConnectionResetError:
            pass
        finally:
            self.active_watches -= 1
        try:
            await resp.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass
        return resp

    @staticmethod
    async def _send(resp: web.StreamResponse, etype: str, obj: dict[str, Any]) -> None:
        await resp.write(json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n")
