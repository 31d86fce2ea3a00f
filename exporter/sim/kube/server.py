"""A subset of the Kubernetes API server that the real kubernetes_asyncio client and kubectl talk to.

Served: discovery (``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>/<version>``), get by name, list and
watch (``?watch=1``: JSON lines, ``resourceVersion``, ``allowWatchBookmarks``, ``timeoutSeconds``,
``410 Gone`` as an ERROR event for expired versions) of every kind in ``kube_discovery.RESOURCES``,
cluster-wide and per namespace, with label and field selectors, as ``Table`` when kubectl asks for one;
Leases for leader election; TokenReview and SubjectAccessReview from the scenario's users (``kube.reviews``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from exporter.sim.kube import discovery as kube_discovery
from exporter.sim.kube import tables as kube_tables
from exporter.sim.kube.admission import merge_patch
from exporter.sim.kube.discovery import Resource
from exporter.sim.kube.reviews import KubeReviews
from exporter.sim.kube.store import KubeStore
from exporter.sim.users import UserSpec


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


def _matches(obj: dict[str, Any], labels: list[tuple[str, str, str]], *, fields: list[tuple[str, str, str]]) -> bool:
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


@dataclass(frozen=True, slots=True)
class _Filter:
    """What a list or watch selects, and whether kubectl wants it printed as a Table."""

    labels: list[tuple[str, str, str]]
    fields: list[tuple[str, str, str]]
    as_table: bool


class KubeApiServer:
    """aiohttp application over a ``KubeStore``."""

    def __init__(self, store: KubeStore, bookmark_interval: float = 1.0, *, crds: frozenset[str] = frozenset(),
                 users: list[UserSpec] | None = None) -> None:
        self.store = store
        self.bookmark_interval = bookmark_interval
        self.active_watches = 0
        self.requests = 0
        self._created = 0  # objects created by POST: generated names and uids
        #: (plural, fieldSelector) of recent lists and watches: what clients asked for, as an audit log would.
        self.selections: deque[tuple[str, str]] = deque(maxlen=512)
        self.app = web.Application()
        r = self.app.router
        r.add_get("/version", self.version)
        self.resources = kube_discovery.served(crds)
        r.add_get("/api", self._json(kube_discovery.api_versions()))
        r.add_get("/apis", self._json(kube_discovery.group_list(self.resources)))
        for gv in dict.fromkeys(x.group_version for x in kube_discovery.RESOURCES):
            base = next(x.base_path for x in kube_discovery.RESOURCES if x.group_version == gv)
            doc = kube_discovery.resource_list(gv, self.resources)
            r.add_get(base, self._json(doc) if doc["resources"] else self._not_found)
        for res in kube_discovery.RESOURCES:
            installed = res in self.resources
            base = res.base_path
            r.add_get(f"{base}/{res.plural}", self.handler(res, namespaced=False) if installed else self._not_found)
            if res.namespaced:
                r.add_get(f"{base}/namespaces/{{namespace}}/{res.plural}",
                          self.handler(res, namespaced=True) if installed else self._not_found)
                r.add_get(f"{base}/namespaces/{{namespace}}/{res.plural}/{{name}}",
                          self.getter(res) if installed else self._not_found)
            else:
                r.add_get(f"{base}/{res.plural}/{{name}}", self.getter(res) if installed else self._not_found)
            if installed:
                self._add_writes(r, res)
        leases = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        r.add_post(leases, self.create_lease)
        r.add_put(leases + "/{name}", self.replace_lease)
        self.reviews = KubeReviews(users or [])  # TokenReview and SubjectAccessReview
        self.reviews.add_routes(r)

    async def _not_found(self, _req: web.Request) -> web.Response:
        return self._status(404, "NotFound", message="the server could not find the requested resource")

    @staticmethod
    def _json(doc: dict[str, Any]) -> Any:
        async def handle(_req: web.Request) -> web.Response:
            return web.json_response(doc)
        return handle

    async def version(self, _req: web.Request) -> web.Response:
        """``/version``: the simulator claims Kubernetes v1.33 (``v1.33.0-sim``)."""
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0-sim", "platform": "linux/amd64"})

    def getter(self, res: Resource) -> Any:
        """GET one object by name (``kubectl get <kind> <name>``, ``-o yaml``, ``describe``)."""
        async def handle(req: web.Request) -> web.Response:
            self.requests += 1
            obj = self.store.objects[res.store_kind].get((req.match_info.get("namespace", ""), req.match_info["name"]))
            if obj is None:
                group = f".{res.group}" if res.group else ""
                return self._status(404, "NotFound",
                                    message=f'{res.plural}{group} "{req.match_info["name"]}" not found')
            if kube_tables.wants_table(req.headers.get("Accept", "")):
                return web.json_response(kube_tables.table(res.store_kind, [obj], now=time.time(),
                                                           resource_version=obj["metadata"]["resourceVersion"]))
            return web.json_response(obj)
        return handle

    def _add_writes(self, r: web.UrlDispatcher, res: Resource) -> None:
        """``patch`` (JSON merge patch) and ``create`` (with ``generateName``) where the resource allows them."""
        one = f"{res.base_path}/namespaces/{{namespace}}/{res.plural}" if res.namespaced else \
            f"{res.base_path}/{res.plural}"
        if "patch" in res.verbs:
            r.add_patch(one + "/{name}", self.patcher(res))
        if "create" in res.verbs and res.plural != "leases":
            r.add_post(one, self.creator(res))

    def patcher(self, res: Resource) -> Any:
        """PATCH one object with a JSON merge patch (``kubectl patch --type merge``, a client's merge patch)."""
        async def handle(req: web.Request) -> web.Response:
            self.requests += 1
            if req.content_type != "application/merge-patch+json":
                return self._status(415, "UnsupportedMediaType", message=f"{req.content_type}: only merge patches")
            key = (req.match_info.get("namespace", ""), req.match_info["name"])
            obj = self.store.objects[res.store_kind].get(key)
            if obj is None:
                return self._status(404, "NotFound", message=f'{res.plural}.{res.group} "{key[1]}" not found')
            patched = merge_patch(obj, await req.json())
            patched["metadata"].update(name=key[1], **({"namespace": key[0]} if key[0] else {}))
            return web.json_response(self.store.upsert(res.store_kind, patched))
        return handle

    def creator(self, res: Resource) -> Any:
        """POST a new object; ``generateName`` gets a 5-character suffix; 409 when the name is taken."""
        async def handle(req: web.Request) -> web.Response:
            self.requests += 1
            body = await req.json()
            meta = body.setdefault("metadata", {})
            if res.namespaced:
                meta["namespace"] = req.match_info["namespace"]
            if not meta.get("name") and meta.get("generateName"):
                self._created += 1
                meta["name"] = f"{meta['generateName']}{self._created:05x}"
            if (meta.get("namespace", ""), meta.get("name", "")) in self.store.objects[res.store_kind]:
                return self._status(409, "AlreadyExists", message=f'{res.plural} "{meta.get("name")}" already exists')
            meta.setdefault("uid", f"created-{self._created}-{meta.get('name')}")
            body.update(apiVersion=res.group_version, kind=res.kind)
            return web.json_response(self.store.upsert(res.store_kind, body), status=201)
        return handle

    # -- coordination.k8s.io/v1 Lease: get, create, and update with optimistic concurrency ------------
    @staticmethod
    def _status(code: int, reason: str, *, message: str) -> web.Response:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "reason": reason, "message": message, "code": code}, status=code)

    async def create_lease(self, req: web.Request) -> web.Response:
        """POST a Lease: 409 AlreadyExists when one of that name exists, as leader election expects."""
        body = await req.json()
        meta = body.setdefault("metadata", {})
        meta["namespace"] = req.match_info["namespace"]
        if (meta["namespace"], meta.get("name", "")) in self.store.objects["leases"]:
            return self._status(409, "AlreadyExists",
                                message=f'leases.coordination.k8s.io "{meta.get("name")}" already exists')
        body.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        return web.json_response(self.store.upsert("leases", body), status=201)

    async def replace_lease(self, req: web.Request) -> web.Response:
        """PUT a Lease: 409 Conflict on a stale resourceVersion, so only one candidate wins the renewal."""
        body = await req.json()
        key = (req.match_info["namespace"], req.match_info["name"])
        current = self.store.objects["leases"].get(key)
        if current is None:
            return self._status(404, "NotFound", message=f'leases.coordination.k8s.io "{key[1]}" not found')
        if str(body.get("metadata", {}).get("resourceVersion")) != current["metadata"]["resourceVersion"]:
            return self._status(409, "Conflict",
                                message="the object has been modified; please apply your changes to the "
                                        "latest version and try again")
        body["metadata"].update(namespace=key[0], name=key[1])
        body.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        return web.json_response(self.store.upsert("leases", body))

    def handler(self, res: Resource, namespaced: bool) -> Any:
        """The GET handler (get, list, or watch with ``?watch=1``) for ``res``, namespaced or cluster-wide."""
        kind = res.store_kind

        async def handle(req: web.Request) -> web.StreamResponse:
            self.requests += 1
            namespace = req.match_info.get("namespace") if namespaced else None
            labels = _parse_selector(req.query.get("labelSelector", ""))
            fields = _parse_selector(req.query.get("fieldSelector", ""))
            self.selections.append((kind, req.query.get("fieldSelector", "")))
            if namespace:
                fields.append(("metadata.namespace", "=", namespace))
            as_table = kube_tables.wants_table(req.headers.get("Accept", ""))
            if req.query.get("watch") in ("1", "true", "True"):
                return await self._watch(req, res, flt=_Filter(labels, fields, as_table))
            items = [o for o in self.store.objects[kind].values() if _matches(o, labels, fields=fields)]
            if as_table:
                return web.json_response(kube_tables.table(kind, items, now=time.time(),
                                                           resource_version=str(self.store.rv)))
            return web.json_response({"kind": f"{res.kind}List", "apiVersion": res.group_version,
                                      "metadata": {"resourceVersion": str(self.store.rv)}, "items": items})
        return handle

    async def _watch(self, req: web.Request, res: Resource, *, flt: _Filter) -> web.StreamResponse:
        kind = res.store_kind
        rv_text = req.query.get("resourceVersion", "")
        bookmarks = req.query.get("allowWatchBookmarks") in ("1", "true", "True")
        timeout = float(req.query.get("timeoutSeconds", "1800"))
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        await resp.prepare(req)
        self.active_watches += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        async def send(etype: str, obj: dict[str, Any]) -> None:
            # kubectl get -w asks for Tables: each event then carries a one-row Table, as the real server does.
            if flt.as_table:
                obj = kube_tables.table(kind, [obj], now=time.time(),
                                        resource_version=obj["metadata"]["resourceVersion"])
            await self._send(resp, etype, obj=obj)

        try:
            if rv_text in ("", "0"):
                rv = self.store.rv
                for obj in list(self.store.objects[kind].values()):
                    if _matches(obj, flt.labels, fields=flt.fields):
                        await send("ADDED", obj)
            else:
                try:
                    rv = int(rv_text)
                except ValueError:
                    rv = -1
            next_bookmark = loop.time() + self.bookmark_interval
            while True:
                changes = self.store.changes_since(rv, kind) if rv >= 0 else None
                if changes is None:
                    await self._send(resp, "ERROR", obj={
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": f"too old resource version: {rv_text} ({self.store.floor})",
                        "reason": "Expired", "code": 410})
                    break
                for c in changes:
                    rv = c.rv
                    if _matches(c.obj, flt.labels, fields=flt.fields):
                        await send(c.type, c.obj)
                now = loop.time()
                if now >= deadline or req.transport is None or req.transport.is_closing():
                    break  # a client that went away (kubectl ^C) must not hold the server's shutdown
                if bookmarks and now >= next_bookmark:
                    rv = max(rv, self.store.rv) if not self.store.changes_since(rv, kind) else rv
                    await self._send(resp, "BOOKMARK", obj={"kind": res.kind, "apiVersion": res.group_version,
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
    async def _send(resp: web.StreamResponse, etype: str, *, obj: dict[str, Any]) -> None:
        await resp.write(json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n")
