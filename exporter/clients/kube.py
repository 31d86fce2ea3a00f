"""List-then-watch of Kubernetes objects through the real kubernetes_asyncio client.

The loop per kind is: list (remember resourceVersion) -> watch from it with bookmarks and a server
timeout -> on timeout, watch again from the last version -> on ``410 Gone``, list again. Errors back
off with jitter. Objects are handed over as plain dicts (JSON), so no model deserialisation cost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from exporter.clients.errors import PeerBadResponse, PeerError, PeerUnavailable
from exporter.logs import get_logger
from exporter.runtime import backoff_delays

log = get_logger("kube")
MAX_LINE = 16 << 20

class Expired(PeerError):
    """The watch's resourceVersion is too old (HTTP 410 Gone / ERROR event code 410)."""


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """One kind to watch: the CoreV1Api list method and optional selectors."""

    kind: str
    method: str
    label_selector: str | None = None
    field_selector: str | None = None
    group: str | None = None  # custom resources: group, version and plural through CustomObjectsApi
    version: str | None = None
    plural: str = ""  # the resource's plural when ``kind`` (the handler's name for it) differs

    @property
    def resource(self) -> str:
        """The plural resource name the API serves this kind under."""
        return self.plural or self.kind


#: Scheduler queues (``schedulers.md`` §1, §3, §4): Kueue at its storage version ``v1beta2`` (since v0.16), else at
#: ``v1beta1`` on older Kueue (the first version served of a kind is the one watched).
QUEUE_KINDS = (
    WatchSpec("queues", "list_cluster_custom_object", group="scheduling.volcano.sh", version="v1beta1"),
    WatchSpec("podgroups", "list_cluster_custom_object", group="scheduling.volcano.sh", version="v1beta1"),
    WatchSpec("clusterqueues", "list_cluster_custom_object", group="kueue.x-k8s.io", version="v1beta2"),
    WatchSpec("localqueues", "list_cluster_custom_object", group="kueue.x-k8s.io", version="v1beta2"),
    WatchSpec("workloads", "list_cluster_custom_object", group="kueue.x-k8s.io", version="v1beta2"),
    WatchSpec("kaipodgroups", "list_cluster_custom_object", group="scheduling.run.ai", version="v2alpha2",
              plural="podgroups"),
    *(WatchSpec(kind, "list_cluster_custom_object", group="kueue.x-k8s.io", version="v1beta1")
      for kind in ("clusterqueues", "localqueues", "workloads")),
)

#: DRA (resource.k8s.io/v1, GA in 1.34): claims and slices, watched where the API serves them.
DRA_KINDS = (
    WatchSpec("resourceclaims", "list_cluster_custom_object", group="resource.k8s.io", version="v1"),
    WatchSpec("resourceslices", "list_cluster_custom_object", group="resource.k8s.io", version="v1"),
)

CORE_KINDS = (
    WatchSpec("pods", "list_pod_for_all_namespaces"),
    WatchSpec("nodes", "list_node"),
    WatchSpec("namespaces", "list_namespace"),
    WatchSpec("resourcequotas", "list_resource_quota_for_all_namespaces"),
    WatchSpec("events", "list_event_for_all_namespaces"),
)

#: (kind, event type, object) -> None; event type is ADDED, MODIFIED, DELETED, or SYNCED (list done).
Handler = Callable[[str, str, dict[str, Any]], Awaitable[None] | None]


async def served_custom_kinds(api_client: Any, specs: tuple[WatchSpec, ...] = QUEUE_KINDS) -> tuple[WatchSpec, ...]:
    """The custom kinds whose API the server serves (CRD installed); the others are not watched at all."""
    from kubernetes_asyncio import client

    custom = client.CustomObjectsApi(api_client)
    served: list[WatchSpec] = []
    for spec in specs:
        if any(s.kind == spec.kind for s in served):
            continue  # a newer version of it is served
        try:
            resp = await custom.get_api_resources(spec.group, spec.version, _preload_content=False,
                                                  _request_timeout=10)
        except (TimeoutError, aiohttp.ClientError, OSError):
            continue
        try:
            if resp.status == 200:
                body = json.loads(await resp.read())
                if any(r.get("name") == spec.resource for r in body.get("resources", [])):
                    served.append(spec)
        finally:
            resp.release()
    return tuple(served)


async def make_api_client(kubeconfig: Path | None) -> Any:
    """An ApiClient from a kubeconfig file, or in-cluster configuration when ``kubeconfig`` is None."""
    from kubernetes_asyncio import client, config

    if kubeconfig is not None:
        return await config.new_client_from_config(config_file=str(kubeconfig))
    config.load_incluster_config()
    return client.ApiClient()


async def read_core(api_client: Any, method: str, *args: str, timeout: float, custom: bool = False,
                    **kwargs: str) -> dict[str, Any]:
    """One read as a dict; PeerError on any fault. CoreV1Api (``read_node``, ``read_namespaced_pod``), or
    with ``custom`` CustomObjectsApi (``list_cluster_custom_object``, ``get_namespaced_custom_object``)."""
    from kubernetes_asyncio import client

    api = client.CustomObjectsApi(api_client) if custom else client.CoreV1Api(api_client)
    try:
        resp = await getattr(api, method)(*args, **kwargs, _preload_content=False, _request_timeout=timeout)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise PeerUnavailable(f"API server unreachable: {exc!r}") from exc
    try:
        if resp.status != 200:
            raise PeerBadResponse(f"{method}{list(args)}: HTTP {resp.status}")
        doc = json.loads(await resp.read())
    except ValueError as exc:
        raise PeerBadResponse(f"{method}{list(args)}: not JSON") from exc
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise PeerUnavailable(f"API server dropped the answer: {exc!r}") from exc
    finally:
        resp.release()
    if not isinstance(doc, dict):
        raise PeerBadResponse(f"{method}{list(args)}: not an object")
    return doc


class Watcher:
    """Keeps every watched kind flowing into ``handler``; survives API-server faults."""

    def __init__(self, api_client: Any, handler: Handler, *, specs: tuple[WatchSpec, ...] = CORE_KINDS,
                 watch_timeout: float = 300.0, request_timeout: float = 30.0) -> None:
        from kubernetes_asyncio import client

        self.api = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.api_client = api_client
        self.handler = handler
        self.specs = specs
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.synced: dict[str, bool] = {s.kind: False for s in specs}
        self.resource_version: dict[str, str] = {}
        self.relists: dict[str, int] = {s.kind: 0 for s in specs}
        self.errors = 0
        self.up = False

    @property
    def all_synced(self) -> bool:
        """Every watched kind has been listed once: the handler has seen the whole state."""
        return all(self.synced.values())

    async def run(self) -> None:
        """Watch every kind until cancelled: relist when a resource version expired, back off and retry on faults."""
        async with asyncio.TaskGroup() as tg:
            for spec in self.specs:
                tg.create_task(self._loop(spec), name=f"watch-{spec.kind}")

    async def _emit(self, kind: str, etype: str, *, obj: dict[str, Any]) -> None:
        result = self.handler(kind, etype, obj)
        if result is not None:
            await result

    def _kwargs(self, spec: WatchSpec) -> dict[str, Any]:
        kw: dict[str, Any] = {"_preload_content": False}
        if spec.label_selector:
            kw["label_selector"] = spec.label_selector
        if spec.field_selector:
            kw["field_selector"] = spec.field_selector
        return kw

    async def _loop(self, spec: WatchSpec) -> None:
        delays = backoff_delays(0.5, 30.0)
        while True:
            try:
                await self._list(spec)
                delays = backoff_delays(0.5, 30.0)
                while True:
                    await self._watch(spec)
            except Expired:
                self.relists[spec.kind] += 1
                log.info("watch_expired_relist", kind=spec.kind)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any fault of the peer: back off and retry
                self.errors += 1
                self.up = False
                delay = next(delays)
                log.warning("watch_error", kind=spec.kind, error=repr(exc)[:300], retry_in=round(delay, 2))
                await asyncio.sleep(delay)

    async def _call(self, spec: WatchSpec, **extra: Any) -> aiohttp.ClientResponse:
        if spec.group:
            method = getattr(self.custom, spec.method)
            extra = {"group": spec.group, "version": spec.version, "plural": spec.resource, **extra}
        else:
            method = getattr(self.api, spec.method)
        try:
            resp: aiohttp.ClientResponse = await method(**self._kwargs(spec), **extra)
        except (TimeoutError, aiohttp.ClientConnectionError, OSError) as exc:
            raise PeerUnavailable(f"API server unreachable: {exc!r}") from exc
        if resp.status == 410:
            resp.release()
            raise Expired(f"{spec.kind}: 410 Gone")
        if resp.status != 200:
            body = (await resp.text())[:300]
            resp.release()
            raise PeerBadResponse(f"{spec.kind}: HTTP {resp.status}: {body}")
        return resp

    async def _list(self, spec: WatchSpec) -> None:
        resp = await self._call(spec, _request_timeout=self.request_timeout)
        try:
            data = json.loads(await resp.read())
        finally:
            resp.release()
        items = data.get("items") or []
        self.resource_version[spec.kind] = str(data.get("metadata", {}).get("resourceVersion", ""))
        await self._emit(spec.kind, "LISTED", obj={"items": items})
        self.synced[spec.kind] = True
        self.up = True

    async def _watch(self, spec: WatchSpec) -> None:
        resp = await self._call(
            spec, watch=True, resource_version=self.resource_version.get(spec.kind) or None,
            allow_watch_bookmarks=True, timeout_seconds=int(self.watch_timeout),
            _request_timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=self.watch_timeout + 30))
        try:
            while True:
                line = await resp.content.readline()
                if not line:
                    return  # server-side timeout: watch again from the last version
                if len(line) > MAX_LINE:
                    raise PeerBadResponse(f"{spec.kind}: watch line over {MAX_LINE} bytes")
                event = json.loads(line)
                etype = event.get("type")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise Expired(f"{spec.kind}: {obj.get('message')}")
                    raise PeerBadResponse(f"{spec.kind}: watch error {obj.get('code')}: {obj.get('message')}")
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self.resource_version[spec.kind] = str(rv)
                if etype == "BOOKMARK":
                    continue
                if etype in ("ADDED", "MODIFIED", "DELETED"):
                    await self._emit(spec.kind, etype, obj=obj)
        finally:
            resp.release()
