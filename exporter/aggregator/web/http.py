"""The aggregator's HTTP endpoints: /metrics, /api/v1/report, /api/v1/keda/utilization, /healthz, /readyz, and
/api/v1/openapi.json, their contract (``api_spec``)."""

from __future__ import annotations

import math

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from exporter.aggregator.ledger.report import ReportError, parse_time, to_json
from exporter.aggregator.web.access.gate import SCOPE
from exporter.aggregator.web.access.wiring import guard_for
from exporter.aggregator.web.api_spec import openapi
from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.aggregator.web.status_page import render_status
from exporter.aggregator.web.view import AggregatorView

MAX_PARAM = 253


def build_app(agg: AggregatorView) -> web.Application:
    """The aggregator's HTTP API: status page, metrics, report, KEDA, recommendations, FOCUS export, health."""
    app = web.Application(client_max_size=agg.settings.max_request_bytes)
    guard = guard_for(agg, app)  # who may read which namespaces' costs (access/)
    app.middlewares.append(guard.middleware)

    def bad(msg: str, status: int = 400) -> web.Response:
        return web.json_response({"error": msg}, status=status)

    renderer = ExpositionRenderer()

    async def metrics(_req: web.Request) -> web.Response:
        body = renderer.render([*agg.collector.collect(), *guard.families()])
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def report(req: web.Request) -> web.Response:
        q, scope = req.query, req[SCOPE]
        if any(len(v) > MAX_PARAM for v in q.values()):
            return bad("query parameter too long")
        if q.get("view", "usage") not in ("usage", "budgets", "window-budgets"):
            return bad("view must be usage (default), budgets or window-budgets")
        if q.get("view") == "window-budgets":  # budgets over windows as of the last commit (docs: queues.md)
            from exporter.aggregator.advice.window_budgets import state_dict

            return web.json_response(scope.rows(state_dict(s) for s in agg.budget_control.states), dumps=to_json)
        if q.get("view") == "budgets":  # month-end forecasts per namespace (README "Budgets and forecast")
            from exporter.aggregator.advice.forecasts import as_dict

            found = await agg.forecasts.compute(agg.ledger, budgets=agg.budgets(),
                                                currency=agg.pricing.current.currency)
            return web.json_response(scope.rows(as_dict(f) for f in found),
                                     dumps=to_json)
        try:
            now = agg.clock.now()
            by = q.get("by", "namespace")  # one key or several: by=cluster,namespace
            if not scope.may_group(by):
                return bad(f"by={by} sums namespaces together: it needs cluster-wide access", status=403)
            cluster = q.get("cluster") or (None if "cluster" in by.split(",") else "")  # "" = this cluster
            if not scope.cluster and (cluster is None or cluster not in ("", agg.ledger.cluster)):
                # one cluster's RBAC speaks for that cluster: other clusters' rows of a shared ledger need more
                return bad("another cluster's rows need cluster-wide access", status=403)
            rows = await agg.ledger.run_report(by, since=parse_time(q.get("since"), now),
                                               until=parse_time(q.get("until"), now), cluster=cluster)
        except ReportError as exc:
            return bad(str(exc))
        return web.json_response(scope.rows(rows), dumps=to_json)

    async def recommendations(req: web.Request) -> web.Response:
        from exporter.aggregator.advice.recommendations import as_wire, explicit_window
        from exporter.model.durations import parse_duration
        from exporter.model.rightsizing.types import RuleSettings

        q = req.query
        try:
            advice = agg.advice  # the daemon's settings unless the query says otherwise
            window = parse_duration(q["window"]) if "window" in q else advice.window_s
            evidence = (parse_duration(q["min_evidence"]) if "min_evidence" in q
                        else advice.settings.min_evidence_hours * 3600.0)
            since, until = explicit_window(q.get("since"), q.get("until"), now=agg.clock.now(),
                                           names=("since", "until"))  # as in /api/v1/report
        except ValueError as exc:  # a ReportError too
            return bad(str(exc))
        if window <= 0 or any(len(v) > MAX_PARAM for v in q.values()):
            return bad("window must be longer than 0; parameters at most 253 characters")
        rules = RuleSettings(idle_threshold=advice.settings.idle_threshold, min_evidence_hours=evidence / 3600.0)
        rows = await agg.advice.compute(agg.ledger, window_s=window, settings=rules, remember=False,
                                               since=since, until=until)
        return web.json_response(req[SCOPE].rows(as_wire(r) for r in rows),
                                 dumps=to_json)

    async def keda(req: web.Request) -> web.Response:
        ns, wl = req.query.get("namespace", ""), req.query.get("workload", "")
        if not ns or len(ns) > MAX_PARAM or len(wl) > MAX_PARAM:
            return bad("namespace is required (and workload optional), each at most 253 characters")
        if not req[SCOPE].sees(ns):
            return bad(f"no access to namespace {ns}", status=403)
        value = agg.gauges.workload_utilization.get((ns, wl)) if wl else agg.gauges.ns_utilization.get(ns)
        if value is None or not math.isfinite(value):
            return bad(f"no utilisation known for {ns}/{wl}".rstrip("/"), status=404)
        return web.json_response({"value": value})

    async def focus(req: web.Request) -> web.StreamResponse:
        from exporter.aggregator.web.focus_http import stream_focus

        return await stream_focus(req, ledger=str(agg.settings.ledger), now=agg.clock.now(),
                                  cluster=agg.settings.cluster_name(), password_file=agg.settings.ledger_password_file,
                                  sees=None if req[SCOPE].cluster else req[SCOPE].sees)

    async def healthz(_req: web.Request) -> web.Response:
        return web.json_response(agg.health_report())

    async def readyz(_req: web.Request) -> web.Response:
        report = agg.health_report()
        return web.json_response(report, status=200 if report["ready"] else 503)

    spec = openapi(auth=agg.settings.auth == "kubernetes")

    async def openapi_json(_req: web.Request) -> web.Response:
        return web.json_response(spec)

    async def status(req: web.Request) -> web.Response:
        return web.Response(text=await render_status(agg, scope=req[SCOPE]), content_type="text/html", charset="utf-8")

    app.router.add_get("/", status)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/v1/report", report)
    app.router.add_get("/api/v1/keda/utilization", keda)
    app.router.add_get("/api/v1/recommendations", recommendations)
    app.router.add_get("/api/v1/focus", focus)
    app.router.add_get("/api/v1/openapi.json", openapi_json)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
