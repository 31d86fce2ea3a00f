#!/usr/bin/env python3
"""Generate the Grafana dashboards (JSON) from this one description.

Written as a small generator rather than by hand because every panel shares the same data-source,
variable and layout boilerplate; written without a dashboard SDK because the output is plain JSON in
Grafana's stable classic model and needs nothing more. The JSON goes to dashboards/ and into the Helm
chart (files/dashboards/), and a test fails when either copy is stale.
Every query is scoped to the dashboard's ``cluster`` variable: Prometheus adds the cluster as an external
label, so one Grafana over a fleet's Thanos or Mimir shows one cluster or several; joins match on it too,
so "All" never pairs two clusters' namespaces. The label is named ``cluster`` unless told otherwise.
Usage: ``python dashboards/generate.py [--check] [--cluster-label NAME --out DIR]``.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHART_COPY = HERE.parent / "helm" / "gpu-cost-exporter" / "files" / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
NS = 'namespace=~"$namespace"'
DEFAULT_CLUSTER_LABEL = "cluster"
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# A series selector: a recorded (level:metric:operation) or plain gpucost_ metric, or a DCGM one, and its
# matchers if it has any. Nothing else in these queries looks like one (functions, by/on label lists).
SELECTOR = re.compile(r"(?<![\w:])((?:[a-z_]+:)?gpucost_\w+(?::\w+)*|DCGM_FI_\w+)(\{[^}]*\})?")
JOIN = re.compile(r"\bon \(")


def scope(expr: str, label: str) -> str:
    """``expr`` with every selector matching ``label=~"$cluster"`` and every join matching on ``label``."""
    matcher = f'{label}=~"$cluster"'

    def one(m: re.Match[str]) -> str:
        inner = (m.group(2) or "{}")[1:-1]
        return f"{m.group(1)}{{{matcher}{',' if inner else ''}{inner}}}"

    return JOIN.sub(f"on ({label}, ", SELECTOR.sub(one, expr))


def _var_query(name: str, label: str, metric: str, all_value: str = ".*") -> dict[str, Any]:
    """A multi-value variable of one label's values. "All" is ``.*``, which also matches series without
    the label (a Prometheus without the external label, queried directly)."""
    query = f"label_values({metric}, {name})"
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": f"{name}-var"},
            "definition": query, "refresh": 2, "multi": True, "includeAll": True,
            "allValue": all_value, "current": {"selected": True, "text": "All", "value": "$__all"}, "sort": 1}


TEMPLATING = [
    {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
     "current": {}, "hide": 0},
    _var_query("cluster", "Cluster", "gpucost_allocated_gpu_seconds_total"),
    _var_query("namespace", "Namespace", "gpucost_allocated_gpu_seconds_total"),
    _var_query("pool", "Pool", "gpucost_unallocated_gpu_seconds_total"),
    _var_query("gpu_model", "GPU model", "gpucost_unallocated_gpu_seconds_total"),
]


def panel(title: str, kind: str, exprs: list[tuple[str, str]], unit: str = "short", w: int = 12, h: int = 8,
          description: str = "", instant: bool = False) -> dict[str, Any]:
    return {
        "type": kind, "title": title, "description": description, "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": 0, "y": 0},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom"}} if kind == "timeseries" else {},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": DS,
                     **({"instant": True, "format": "table"} if instant else {})}
                    for i, (expr, legend) in enumerate(exprs)],
    }


def layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    x = y = row_h = 0
    for i, p in enumerate(panels, start=1):
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p["gridPos"].update(x=x, y=y)
        p["id"] = i
        x += w
        row_h = max(row_h, h)
    return panels


def dashboard(uid: str, title: str, panels: list[dict[str, Any]], description: str) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "description": description, "tags": ["gpu", "cost", "gpu-cost-exporter"],
        "timezone": "browser", "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1,
        "refresh": "1m", "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": TEMPLATING}, "annotations": {"list": []}, "links": [],
        "panels": layout(panels),
    }


SAVINGS_NOTE = ("Per 730-hour month at the prices booked over the recommendation window, in the ledger's "
                "currency; refreshed hourly by the aggregator.")
FORECAST_NOTE = ("In the pricing currency: spent this calendar month (UTC) plus the recent burn rate times the "
                 "hours left. Budgets come from the namespace annotation gpu.platform/monthly-budget or the "
                 "chart's values.")

DASHBOARDS: dict[str, dict[str, Any]] = {
    "gpu-cost-overview": dashboard("gpucost-overview", "GPU cost overview", [
        panel("Cost in range", "stat", [(f"sum(increase(gpucost_cost_total{{{NS}}}[$__range]))", "cost")], w=6, h=4),
        panel("Idle cost in range", "stat", [(f"sum(increase(gpucost_idle_cost_total{{{NS}}}[$__range]))", "idle")],
              w=6, h=4),
        panel("GPUs held now", "stat", [(f"sum(gpucost_allocated_gpus{{{NS}}})", "GPUs")], w=6, h=4),
        panel("Unallocated capacity cost in range", "stat",
              [('sum(increase(gpucost_unallocated_cost_total{pool=~"$pool",gpu_model=~"$gpu_model"}[$__range]))',
                "unallocated")], w=6, h=4),
        panel("Cost per namespace (per hour)", "timeseries",
              [(f"sum by (namespace, currency) (rate(gpucost_cost_total{{{NS}}}[$__rate_interval])) * 3600",
                "{{namespace}} ({{currency}})")]),
        panel("Idle cost per namespace (per hour)", "timeseries",
              [(f"sum by (namespace, currency) (rate(gpucost_idle_cost_total{{{NS}}}[$__rate_interval])) * 3600",
                "{{namespace}} ({{currency}})")]),
        panel("List vs effective cost per namespace in range", "bargauge",
              [(f"sum by (namespace) (increase(gpucost_list_cost_total{{{NS}}}[$__range]))", "{{namespace}} list"),
               (f"sum by (namespace) (increase(gpucost_cost_total{{{NS}}}[$__range]))", "{{namespace}} effective")],
              description="List: GPU-hours at public prices. Effective: after spot, pool multipliers, commitments "
                          "and owned hardware (with its energy). The gap is what discounts saved."),
        panel("Saved by commitments and spot (per hour)", "timeseries",
              [(f"sum by (namespace, currency) (rate(gpucost_list_cost_total{{{NS}}}[$__rate_interval]) - "
                f"rate(gpucost_cost_total{{{NS}}}[$__rate_interval])) * 3600", "{{namespace}} ({{currency}})")],
              description="List cost minus effective cost; negative on owned hardware, whose energy is not in "
                          "the list price."),
        panel("Top idle pods (money wasted per hour)", "table",
              [(f"topk(10, gpucost_pod_hourly_cost{{{NS}}} and on (namespace, pod) (gpucost_pod_idle_seconds > 0))",
                "")], instant=True),
        panel("Unallocated GPUs by pool and model", "timeseries",
              [('sum by (pool, gpu_model) (rate(gpucost_unallocated_gpu_seconds_total{pool=~"$pool",'
                'gpu_model=~"$gpu_model"}[$__rate_interval]))', "{{pool}} {{gpu_model}}")]),
        panel("CO2e per namespace in range", "bargauge",
              [(f"sum by (namespace) (increase(gpucost_co2e_grams_total{{{NS}}}[$__range]))", "{{namespace}}")],
              unit="massg", w=24,
              description="Grams CO2e of the energy DCGM measured: joules / 3.6e6 x PUE x grid (or pool) intensity, "
                          "from the pricing file's emissions: section. Empty without it; energy not measured has "
                          "no CO2e here (see gpucost_unmeasured_energy_seconds_total)."),
    ], "Cost and idle cost per namespace, idle pods, capacity nobody holds, and the CO2e of the energy used."),
    "gpu-namespace-drilldown": dashboard("gpucost-namespace", "GPU namespace drill-down", [
        panel("Allocated vs used GPU-hours in range", "bargauge",
              [(f"sum by (namespace) (increase(gpucost_allocated_gpu_seconds_total{{{NS}}}[$__range])) / 3600",
                "{{namespace}} allocated"),
               (f"sum by (namespace) (increase(gpucost_used_gpu_seconds_total{{{NS}}}[$__range])) / 3600",
                "{{namespace}} used"),
               (f"sum by (namespace) (increase(gpucost_unmeasured_gpu_seconds_total{{{NS}}}[$__range])) / 3600",
                "{{namespace}} unmeasured"),
               (f"sum by (namespace) (increase(gpucost_split_gpu_seconds_total{{{NS}}}[$__range])) / 3600",
                "{{namespace}} split by fraction")], w=24),
        panel("Held GPU time: measured vs split by fraction", "timeseries",
              [(f"sum by (namespace) (rate(gpucost_allocated_gpu_seconds_total{{{NS}}}[$__rate_interval]) - "
                f"rate(gpucost_unmeasured_gpu_seconds_total{{{NS}}}[$__rate_interval]) - "
                f"rate(gpucost_split_gpu_seconds_total{{{NS}}}[$__rate_interval]))", "{{namespace}} measured"),
               (f"sum by (namespace) (rate(gpucost_split_gpu_seconds_total{{{NS}}}[$__rate_interval]))",
                "{{namespace}} split by fraction")],
              description="GPUs held whose use was measured, against those on busy shared GPUs whose busy time was "
                          "split by fraction because per-pod use was missing, stale or all 0 (used is then an "
                          "estimate).", w=24),
        panel("GPU utilisation by namespace", "timeseries",
              [(f"gpucost_gpu_utilization_ratio{{{NS}}}", "{{namespace}}")], unit="percentunit"),
        panel("GPUs held by namespace", "timeseries", [(f"gpucost_allocated_gpus{{{NS}}}", "{{namespace}}")]),
        panel("Utilisation by workload", "timeseries",
              [(f"gpucost_workload_gpu_utilization_ratio{{{NS}}}", "{{namespace}}/{{workload}}")],
              unit="percentunit"),
        panel("GPUs held by workload", "table",
              [(f"sum by (namespace, workload, gpu_model) (gpucost_pod_allocated_gpus{{{NS}}})", "")], instant=True),
        panel("GPU-hours per namespace per hour (recorded)", "timeseries",
              [(f"namespace:gpucost_allocated_gpu_hours:increase1h{{{NS}}}", "{{namespace}} allocated"),
               (f"namespace:gpucost_used_gpu_hours:increase1h{{{NS}}}", "{{namespace}} used")], w=24),
    ], "Allocated vs used GPU-hours, utilisation and workloads of one or more namespaces."),
    "gpu-idle-waste": dashboard("gpucost-idle", "GPU idle waste", [
        panel("Squatting pods ranked by money wasted per hour", "table",
              [(f"sort_desc(gpucost_pod_hourly_cost{{{NS}}} and on (namespace, pod) (gpucost_pod_idle_seconds > 0))",
                "")], w=24, instant=True),
        panel("Idle time per pod", "timeseries",
              [(f"gpucost_pod_idle_seconds{{{NS}}} > 0", "{{namespace}}/{{pod}}")], unit="s"),
        panel("Idle cost rate per namespace (recorded, per hour)", "timeseries",
              [(f"namespace:gpucost_idle_cost_per_hour:rate15m{{{NS}}}", "{{namespace}} ({{currency}})")]),
        panel("Idle cost per namespace, last 24 h (recorded)", "bargauge",
              [(f"namespace:gpucost_idle_cost:increase1d{{{NS}}}", "{{namespace}}")], w=24),
    ], "Pods that hold GPUs they do not use, and what that costs."),
    "gpu-quota-queue": dashboard("gpucost-quota", "GPU quota and queue", [
        panel("GPU quota: used vs hard", "timeseries", [(f"gpucost_quota_gpus{{{NS}}}", "{{namespace}} {{type}}")]),
        panel("GPU quota headroom", "bargauge",
              [(f'gpucost_quota_gpus{{{NS},type="hard"}} - ignoring (type) gpucost_quota_gpus{{{NS},type="used"}}',
                "{{namespace}}")]),
        panel("Pending GPU pods by reason", "timeseries",
              [(f"sum by (namespace, reason) (gpucost_pending_gpu_pods{{{NS}}})", "{{namespace}} {{reason}}")]),
        panel("Batch queues (Volcano, Kueue): GPUs used vs capability", "timeseries",
              [("gpucost_queue_gpus", "{{source}} {{queue}} {{type}}")]),
        panel("Quota rejections in range", "bargauge",
              [(f"sum by (namespace) (increase(gpucost_quota_rejections_total{{{NS}}}[$__range]))", "{{namespace}}")]),
    ], "What platform teams otherwise script by hand: quota, pending pods and why, rejections."),
    "gpu-device-health": dashboard("gpucost-devices", "GPU device health", [
        panel("Utilisation per device", "timeseries",
              [("gpucost_device_utilization_ratio", "{{vendor}} {{node}} {{gpu_uuid}} {{mig_profile}}")],
              unit="percentunit"),
        panel("Mean utilisation by vendor", "timeseries",
              [("avg by (vendor, gpu_model) (gpucost_device_utilization_ratio)", "{{vendor}} {{gpu_model}}")],
              unit="percentunit", description="NVIDIA (DCGM Exporter), AMD (device-metrics-exporter; compute "
              "partitions other than 0 have no reading) and Intel Gaudi (gaudi-metric-exporter) devices."),
        panel("GPU temperature (DCGM, with holder)", "timeseries",
              [("DCGM_FI_DEV_GPU_TEMP", "{{Hostname}} gpu{{gpu}} {{namespace}}/{{pod}}")], unit="celsius"),
        panel("Power draw (DCGM)", "timeseries",
              [("DCGM_FI_DEV_POWER_USAGE", "{{Hostname}} gpu{{gpu}} {{GPU_I_PROFILE}}")], unit="watt"),
        panel("Framebuffer used (DCGM)", "timeseries",
              [("DCGM_FI_DEV_FB_USED", "{{Hostname}} gpu{{gpu}} {{namespace}}/{{pod}}")], unit="decmbytes"),
        panel("Power attributed to pods", "timeseries",
              [(f"sum by (namespace, pod) (rate(gpucost_pod_energy_joules_total{{{NS}}}[$__rate_interval]))",
                "{{namespace}}/{{pod}}")], unit="watt"),
        panel("DCGM reachable per node", "stat", [("gpucost_dcgm_up", "{{node}}")]),
    ], "Per-GPU DCGM readings joined to the pods that hold each device."),
    "gpu-savings-budgets": dashboard("gpucost-savings", "Savings & budgets", [
        panel("Monthly savings on offer", "stat",
              [(f"sum(gpucost_recommendation_monthly_savings{{{NS}}}) or vector(0)", "savings")], w=6, h=4,
              description=SAVINGS_NOTE),
        panel("Right-sizing actions on offer", "stat",
              [(f"count(gpucost_recommendation_monthly_savings{{{NS}}}) or vector(0)", "actions")], w=6, h=4),
        panel("Namespaces forecast over budget", "stat",
              [(f"count(gpucost_forecast_month_cost{{{NS}}} > on (namespace) gpucost_budget{{{NS}}}) or vector(0)",
                "namespaces")], w=6, h=4, description=FORECAST_NOTE),
        panel("Month-end forecast, all budgeted namespaces", "stat",
              [(f"sum(gpucost_forecast_month_cost{{{NS}}} and on (namespace) gpucost_budget{{{NS}}})", "forecast"),
               (f"sum(gpucost_budget{{{NS}}})", "budget")], w=6, h=4, description=FORECAST_NOTE),
        panel("Monthly savings by namespace and action", "bargauge",
              [(f"sort_desc(sum by (namespace, action) (gpucost_recommendation_monthly_savings{{{NS}}}))",
                "{{namespace}} {{action}}")], description=SAVINGS_NOTE),
        panel("Right-sizing actions, biggest saving first", "table",
              [(f"sort_desc(gpucost_recommendation_monthly_savings{{{NS}}})", "")], instant=True,
              description="Each workload's one action (the one that saves most); the reason and the target are "
                          "on the status page and at /api/v1/recommendations."),
        panel("Month-end forecast as a share of the budget", "bargauge",
              [(f"sort_desc(gpucost_forecast_month_cost{{{NS}}} / on (namespace) gpucost_budget{{{NS}}})",
                "{{namespace}}")], unit="percentunit", description=FORECAST_NOTE),
        panel("Month-end forecast and budget per namespace", "timeseries",
              [(f"gpucost_forecast_month_cost{{{NS}}}", "{{namespace}} forecast"),
               (f"gpucost_budget{{{NS}}}", "{{namespace}} budget")], description=FORECAST_NOTE),
        panel("Savings on offer over time by action", "timeseries",
              [(f"sum by (action) (gpucost_recommendation_monthly_savings{{{NS}}})", "{{action}}")], w=24,
              description=SAVINGS_NOTE),
    ], "What right-sizing would save per month, and each namespace's budget against its month-end forecast."),
}


def scoped(d: dict[str, Any], label: str) -> dict[str, Any]:
    """One dashboard with every panel query and every variable but ``cluster`` itself scoped to the
    cluster; the ``cluster`` variable lists the values of ``label``."""
    out = copy.deepcopy(d)
    for var in out["templating"]["list"]:
        if var["type"] != "query":
            continue
        if var["name"] == "cluster":
            query = f"label_values(gpucost_allocated_gpu_seconds_total, {label})"
        else:
            query = scope(var["definition"], label)
        var["query"]["query"] = var["definition"] = query
    for p in out["panels"]:
        for t in p["targets"]:
            t["expr"] = scope(t["expr"], label)
    return out


def render(cluster_label: str = DEFAULT_CLUSTER_LABEL) -> dict[str, str]:
    if not LABEL_NAME.fullmatch(cluster_label):
        raise ValueError(f"--cluster-label: {cluster_label!r} is not a Prometheus label name")
    return {f"{name}.json": json.dumps(scoped(d, cluster_label), indent=2, sort_keys=False) + "\n"
            for name, d in DASHBOARDS.items()}


def _option(name: str) -> str | None:
    if name not in sys.argv:
        return None
    i = sys.argv.index(name) + 1
    if i >= len(sys.argv):
        raise ValueError(f"{name}: needs a value")
    return sys.argv[i]


def main() -> int:
    """Write (or ``--check``) the committed copies, cluster label ``cluster``; another label goes to ``--out``."""
    try:
        label, out = _option("--cluster-label") or DEFAULT_CLUSTER_LABEL, _option("--out")
        if label != DEFAULT_CLUSTER_LABEL and out is None:
            raise ValueError("--cluster-label: the committed dashboards use 'cluster'; give --out DIR for another")
        files = render(label)
    except ValueError as exc:
        print(f"dashboards/generate.py: {exc}", file=sys.stderr)
        return 2
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (Path(out) / name).write_text(text)
        return 0
    if "--check" in sys.argv:
        stale = [n for n, t in files.items() for d in (HERE, CHART_COPY)
                 if not (d / n).exists() or (d / n).read_text() != t]
        if stale:
            print(f"stale dashboards: {stale}; run python dashboards/generate.py", file=sys.stderr)
            return 1
        return 0
    CHART_COPY.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (HERE / name).write_text(text)
        (CHART_COPY / name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
