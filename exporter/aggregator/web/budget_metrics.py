"""Series of budgets over windows (``gpucost_budget_*`` with ``budget`` and ``window`` labels) and of scheduler
queues (``gpucost_queue_*`` with ``scheduler``), from the states ``BudgetControl`` last worked out: no SQL per scrape.

Cardinality is bounded: one set per budget (the file holds at most ``MAX_BUDGETS``), one per queue up to
``MAX_QUEUE_SERIES`` (the rest fold into ``__overflow__``), thresholds as configured per budget.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from exporter.aggregator.advice.budget_control import BudgetControl
from exporter.model.exact import text

Family = GaugeMetricFamily | CounterMetricFamily
_BW = ["budget", "window"]


def window_budget_families(c: BudgetControl | None, *, currency: str) -> Iterator[Family]:
    """Limits, spent, remaining, burn, projected exhaustion, reached thresholds, holds and actions of each budget;
    month-to-date GPU-seconds and cost of each queue (base units, as Prometheus and promtool want)."""
    if c is None:
        return
    info = GaugeMetricFamily("gpucost_budget_info", "a budget over a window: its target and action (always 1)",
                             labels=[*_BW, "target_kind", "target", "action"])
    limit_h = GaugeMetricFamily("gpucost_budget_limit_gpu_seconds", "the budget's GPU-seconds per window",
                                labels=_BW)
    limit_m = GaugeMetricFamily("gpucost_budget_limit_cost", "the budget's money per window", labels=[*_BW, "currency"])
    spent_h = GaugeMetricFamily("gpucost_budget_spent_gpu_seconds", "GPU-seconds the target held in the window so far",
                                labels=_BW)
    spent_m = GaugeMetricFamily("gpucost_budget_spent_cost", "cost of the target's GPUs in the window so far",
                                labels=[*_BW, "currency"])
    left_h = GaugeMetricFamily("gpucost_budget_remaining_gpu_seconds", "GPU-seconds left in the window (>= 0)",
                               labels=_BW)
    left_m = GaugeMetricFamily("gpucost_budget_remaining_cost", "money left in the window (>= 0)",
                               labels=[*_BW, "currency"])
    burn_h = GaugeMetricFamily("gpucost_budget_burn_rate_gpus", "GPUs held on average over the window elapsed "
                               "(GPU-seconds spent per second, = GPU-hours per hour)", labels=_BW)
    burn_m = GaugeMetricFamily("gpucost_budget_burn_rate_cost_per_hour", "money spent per hour of the window elapsed",
                               labels=[*_BW, "currency"])
    ratio = GaugeMetricFamily("gpucost_budget_spent_ratio", "spent / limit, the larger over GPU-hours and money "
                              "(1 = spent)", labels=_BW)
    exhaust = GaugeMetricFamily("gpucost_budget_exhaustion_timestamp_seconds", "when the budget is spent at its "
                                "burn rate (now if spent; absent: not within this window)", labels=_BW)
    reached = GaugeMetricFamily("gpucost_budget_threshold_reached", "1 for each alert fraction the budget has "
                                "reached in this window", labels=[*_BW, "threshold"])
    held = GaugeMetricFamily("gpucost_budget_held", "1 while this aggregator holds the budget's queue", labels=_BW)
    for s in c.states:
        b = s.budget
        bw = [b.name, b.window]
        info.add_metric([*bw, b.target_kind, b.target, b.action], 1.0)
        if b.gpu_hours is not None:
            limit_h.add_metric(bw, float(b.gpu_hours) * 3600)
            left_h.add_metric(bw, float(s.remaining_gpu_hours or 0) * 3600)
        if b.money is not None:
            limit_m.add_metric([*bw, currency], float(b.money))
            left_m.add_metric([*bw, currency], float(s.remaining_money or 0))
        spent_h.add_metric(bw, float(s.spent_gpu_hours) * 3600)
        spent_m.add_metric([*bw, currency], float(s.spent_money))
        burn_h.add_metric(bw, float(s.burn_gpu_hours))
        burn_m.add_metric([*bw, currency], float(s.burn_money))
        ratio.add_metric(bw, float(s.spent_ratio))
        if s.exhausted_at is not None:
            exhaust.add_metric(bw, s.exhausted_at)
        for f in s.thresholds_reached():
            reached.add_metric([*bw, text(f)], 1.0)
        if b.acts:
            held.add_metric(bw, 1.0 if b.name in c.held else 0.0)
    yield from (info, limit_h, limit_m, spent_h, spent_m, left_h, left_m, burn_h, burn_m, ratio, exhaust, reached, held)
    actions = CounterMetricFamily("gpucost_budget_actions", "holds and releases of queues by budgets (``-dry-run``: "
                                  "said, not done)", labels=["budget", "action"])
    for (budget, action), n in sorted(c.actions.items()):
        actions.add_metric([budget, action], n)
    yield actions
    yield CounterMetricFamily("gpucost_budget_errors", "budget evaluations, file reloads and queue actions that "
                              "failed", value=c.errors + c.reload_errors + (c.actor.errors if c.actor else 0))
    q_labels = ["scheduler", "queue", "cluster_queue"]
    hours = GaugeMetricFamily("gpucost_queue_month_allocated_gpu_seconds", "GPU-seconds held through the scheduler "
                              "queue this calendar month (UTC)", labels=q_labels)
    cost = GaugeMetricFamily("gpucost_queue_month_cost", "cost of the GPUs held through the scheduler queue this "
                             "calendar month (UTC)", labels=[*q_labels, "currency"])
    for t in c.queues:
        hours.add_metric([t.scheduler, t.queue, t.cluster_queue], float(t.gpu_hours) * 3600)
        cost.add_metric([t.scheduler, t.queue, t.cluster_queue, t.currency], float(t.cost))
    yield from (hours, cost)
