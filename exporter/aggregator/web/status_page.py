"""The aggregator's status page at ``/``: one server-rendered HTML page, no JavaScript, no external
assets (it must work offline inside a cluster). Every value that came from the cluster is escaped:
pod and namespace names are user input."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from html import escape
from typing import Any

from exporter.aggregator.ledger.report import CAPACITY_ROWS, UNALLOCATED, UNOBSERVED, UNUSED_COMMITMENT
from exporter.aggregator.web.access.scope import EVERYTHING, Scope
from exporter.aggregator.web.status_budgets import budgets_section, window_budgets_section
from exporter.aggregator.web.status_charts import render_trends
from exporter.aggregator.web.status_models import HEAD as MODEL_HEAD
from exporter.aggregator.web.status_models import model_rows
from exporter.aggregator.web.status_pools import HEAD as POOL_HEAD
from exporter.aggregator.web.status_pools import bar, pool_rows
from exporter.aggregator.web.status_savings import render_savings
from exporter.aggregator.web.status_trends import read_trends
from exporter.aggregator.web.view import AggregatorView

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d2330;background:#fafbfc}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .4em;border-bottom:1px solid #dde}
table{border-collapse:collapse;background:#fff;min-width:60%}th,td{padding:.3em .7em;border-bottom:1px solid #eef;
text-align:right}th{background:#f0f2f7}td:first-child,th:first-child{text-align:left}.muted{color:#778}
.bar{vertical-align:middle}.warn{color:#b3261e;font-weight:600}.tag{background:#eef;border-radius:3px;padding:0 .3em}
"""
ONLY_CLUSTER = "Shown to readers of the whole cluster only."


def _money(v: float, currency: str) -> str:
    """Cents for real bills; four decimals while amounts are still small (a fresh install, a demo)."""
    return f"{v:,.2f} {escape(currency)}" if abs(v) >= 10 else f"{v:.4f} {escape(currency)}"


async def render_status(agg: AggregatorView, *, scope: Scope = EVERYTHING) -> str:
    """The status page: cost per namespace today and this month, pools, capacity, holders by pool and priority
    class, idle pods, trends, quota rejections. A caller who sees some namespaces (``scope``) gets their rows and
    their share of each pool only: no pool totals, capacity, trends or energy gap, which mix in everyone's."""
    now, sees, whole = agg.clock.now(), scope.sees, scope.cluster
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    month = day.replace(day=1)
    today_rows = scope.rows(await agg.ledger.run_report("namespace", since=day.timestamp(), until=None))
    today = {r["namespace"]: r for r in today_rows if r["namespace"] != UNUSED_COMMITMENT}
    today_unused = {r["commitment"]: r for r in today_rows if r["namespace"] == UNUSED_COMMITMENT}
    month_rows = scope.rows(await agg.ledger.run_report("namespace", since=month.timestamp(), until=None))
    this_month = {r["namespace"]: r for r in month_rows if r["namespace"] != UNUSED_COMMITMENT}
    currency = agg.pricing.current.currency
    g, kube = agg.gauges, agg.kube
    quotas = {ns: q for ns, q in kube.quota_by_namespace().items() if sees(ns)}
    pending: dict[str, list[str]] = {}
    for pod in (p for p in kube.pending_gpu_pods() if sees(p.namespace)):
        reasons = ", ".join(kube.pending_reasons(pod))
        pending.setdefault(pod.namespace, []).append(f"{escape(pod.name)} <span class=tag>{escape(reasons)}</span>")
    namespaces = sorted((set(filter(sees, g.allocated_gpus)) | set(quotas) | set(today) | set(pending)
                         | set(this_month)) - CAPACITY_ROWS)
    capacity_rows = [
        f"<tr><td>{'held by nobody' if name == UNALLOCATED else 'observed by no one'}</td>"
        f"<td>{today.get(name, {}).get('idle_gpu_hours', 0.0):.2f}</td>"
        f"<td>{_money(today.get(name, {}).get('cost', 0.0), currency)}</td>"
        f"<td>{this_month[name]['idle_gpu_hours']:.2f}</td><td>{_money(this_month[name]['cost'], currency)}</td></tr>"
        for name in (UNALLOCATED, UNOBSERVED) if name in this_month]
    capacity_rows += [
        f"<tr><td>commitment {escape(r['commitment'])} unused</td>"
        f"<td>{today_unused.get(r['commitment'], {}).get('idle_gpu_hours', 0.0):.2f}</td>"
        f"<td>{_money(today_unused.get(r['commitment'], {}).get('cost', 0.0), currency)}</td>"
        f"<td>{r['idle_gpu_hours']:.2f}</td><td>{_money(r['cost'], currency)}</td></tr>"
        for r in month_rows if r["namespace"] == UNUSED_COMMITMENT]
    rows = []
    for ns in namespaces:
        held = g.allocated_gpus.get(ns, 0.0)
        hard, used = quotas.get(ns, (0.0, 0.0))
        util = g.ns_utilization.get(ns)
        t, m = today.get(ns, {}), this_month.get(ns, {})
        quota_cell = f"{used:g} / {hard:g} {bar(used, hard)}" if hard else '<span class="muted">none</span>'
        rows.append(
            f"<tr><td>{escape(ns)}</td><td>{held:.2f}</td><td>{quota_cell}</td>"
            f"<td>{'' if util is None else f'{util:.0%}'}</td>"
            f"<td>{_money(t.get('cost', 0.0), currency)}</td><td>{_money(t.get('idle_cost', 0.0), currency)}</td>"
            f"<td>{_money(m.get('cost', 0.0), currency)}</td><td>{_money(m.get('idle_cost', 0.0), currency)}</td>"
            f"<td>{_money(m.get('list_cost', 0.0) - m.get('cost', 0.0), currency)}</td>"
            f"<td>{'<br>'.join(pending.get(ns, [])) or '<span class=muted>none</span>'}</td></tr>")

    model_table = model_rows(agg.latest, await agg.ledger.run_report(
        "vendor,gpu_model", since=month.timestamp(), until=None), currency=currency) if whole else []
    pool_table = pool_rows(agg.latest, kube=kube, prices=agg.books.node_prices if agg.books else {},
                           currency=currency) if whole else []

    # Who holds the GPUs: by pool x namespace, and by priority class.
    by_pool_ns: dict[tuple[str, str], float] = {}
    by_priority: dict[str, float] = {}
    for node, snap in agg.latest.items():
        pool = kube.pool_of(node) or "(no pool)"
        for h in snap.holders:
            if not h.active or not sees(h.namespace):
                continue
            by_pool_ns[(pool, h.namespace)] = by_pool_ns.get((pool, h.namespace), 0.0) + h.fraction
            info = kube.pod(h.namespace, h.pod)
            prio = (info.priority_class if info else "") or "(none)"
            by_priority[prio] = by_priority.get(prio, 0.0) + h.fraction
    serve_rows = [f"<tr><td>{escape(p)}</td><td>{escape(ns)}</td><td>{g:.2f}</td></tr>"
                  for (p, ns), g in sorted(by_pool_ns.items())]
    prio_rows = [f"<tr><td>{escape(p)}</td><td>{by_priority[p]:.2f}</td></tr>"
                 for p in sorted(by_priority, key=lambda p: -by_priority[p])]

    idle_keys = sorted((k for k, p in g.pods.items() if p.idle_seconds > 0 and sees(k[0])),
                       key=lambda k: -g.pods[k].hourly_cost)
    idle = [(k, g.pods[k]) for k in idle_keys[:20]]
    idle_rows = [f"<tr><td>{escape(ns)}/{escape(pod)}</td><td>{escape(p.workload)}</td><td>{p.gpus:.2f} &times; "
                 f"{escape(p.gpu_model)}</td><td>{p.idle_seconds / 60:.0f} min</td>"
                 f"<td class=warn>{_money(p.hourly_cost, currency)}/h</td></tr>" for (ns, pod), p in idle]
    rejections = [f"<tr><td>{escape(ts)}</td><td>{escape(ns)}</td><td style='text-align:left'>{escape(msg)}</td></tr>"
                  for ts, ns, msg in reversed([r for r in kube.recent_rejections if sees(r[1])][-10:])]
    # Savings (as last computed for the metrics) and trends (the ledger's hourly rows): self-contained sections.
    savings_html = render_savings([r for r in agg.advice.rows if sees(r.namespace)])
    trends_html = render_trends(await agg.ledger.read(
        lambda q: read_trends(q, cluster=agg.ledger.cluster, now=now))) if whole else ""
    agents_up = sum(1 for a in g.agents.values() if a.up)
    ((gap_s, gap_nodes),) = await agg.ledger.query(  # energy priced at nothing because nobody measured it
        "SELECT COALESCE(SUM(seconds), 0), COUNT(*) FROM unmeasured_energy_totals WHERE cluster = ?",
        [agg.ledger.cluster])
    energy_gap = (f'<p class="muted energy-gap">Energy not measured: {float(gap_s) / 3600:.2f} GPU-h on {gap_nodes} '
                  "node(s) since the ledger began had no energy reading from the node's metrics exporter (some "
                  "accelerators report none). Their GPU time is booked and priced in full; what is missing is "
                  "only what depends on energy: the electricity of owned GPUs and CO2e.</p>"
                  ) if float(gap_s) > 0 and whole else ""
    refresh = max(5, int(agg.settings.tick))

    def table(head: list[str], body: list[str], *, empty: str) -> str:
        if not body:
            return f'<p class="muted">{empty}</p>'
        return "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(body) + "</table>"

    parts: list[Any] = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="refresh" content="{refresh}"><title>GPU cost status</title><style>{STYLE}</style>',
        "</head><body><h1>GPU cost status</h1>",
        f'<p class="muted">{datetime.fromtimestamp(now, UTC):%Y-%m-%d %H:%M:%S} UTC · agents up {agents_up}/'
        f"{len(g.agents)} · ledger committed {max(0, int(time.time() - g.last_commit)) if g.last_commit else '-'} s ago"
        f" · refreshes every {refresh} s</p>",
        "<h2>Namespaces</h2>",
        table(["namespace", "GPUs held", "quota used / hard", "utilisation", "cost today", "idle today",
               "cost this month", "idle this month", "below list price this month (commitments, spot, pool prices)",
               "pending GPU pods"],
              rows, empty="No GPU usage booked yet."),
        budgets_section(tuple(f for f in agg.forecasts.rows if sees(f.namespace)),
                        budgets={ns: b for ns, b in agg.budgets().items() if sees(ns)}, currency=currency),
        window_budgets_section(agg.budget_control.states, agg.budget_control.queues, held=agg.budget_control.held,
                               currency=currency, sees=sees, whole=whole),
        "<h2>Pools</h2>",
        table(POOL_HEAD, pool_table, empty="No agent reported yet." if whole else ONLY_CLUSTER),
        "<h2>GPUs by vendor and model</h2>",
        table(MODEL_HEAD, model_table, empty="No agent reported yet." if whole else ONLY_CLUSTER),
        "<h2>Capacity nobody used</h2>",
        table(["capacity", "GPU-h today", "cost today", "GPU-h this month", "cost this month"], capacity_rows,
              empty="None booked this month." if whole else ONLY_CLUSTER),
        energy_gap,
        "<h2>Which pool serves whom</h2>",
        table(["pool", "namespace", "GPUs held"], serve_rows, empty="Nothing held."),
        "<h2>GPUs held by priority class</h2>",
        table(["priority class", "GPUs held"], prio_rows, empty="Nothing held."),
        "<h2>Top idle pods</h2>",
        table(["pod", "workload", "GPUs", "idle for", "wasted"], idle_rows, empty="No pod holds an idle GPU."),
        savings_html,
        trends_html,
        "<h2>Recent quota rejections</h2>",
        table(["time", "namespace", "message"], rejections, empty="None."),
        "</body></html>",
    ]
    return "".join(parts)
