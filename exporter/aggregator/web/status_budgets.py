"""The status page's "Budgets" table: each budgeted namespace's month so far and where it will end.

Its own module so the page's other sections change independently. Figures are the forecasts as last
refreshed from the ledger (``forecasts.MonthForecasts``); a budget without one yet says "unknown".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from html import escape

from exporter.aggregator.advice.window_budgets import BudgetState, QueueTotal
from exporter.model.forecast import Forecast

HEAD = ("namespace", "monthly budget", "spent this month", "forecast for the month", "crosses the budget on")


def _money(v: float, currency: str) -> str:
    """Cents, or four decimals while amounts are still small (as the page's other tables)."""
    return f"{v:,.2f} {escape(currency)}" if abs(v) >= 10 else f"{v:.4f} {escape(currency)}"


def budgets_section(forecasts: tuple[Forecast, ...], *, budgets: Mapping[str, float], currency: str) -> str:
    """``<h2>Budgets</h2>`` and a table of every namespace with a budget (names escaped: user input)."""
    by_ns = {f.namespace: f for f in forecasts}
    rows = []
    for ns, budget in sorted(budgets.items()):
        f = by_ns.get(ns)
        if f is None:
            cells = [_money(budget, currency), *['<span class="muted">unknown</span>'] * 3]
        else:
            over = ' class="warn"' if f.month_cost > budget else ""
            crossing = f.crossing_day
            day = "not this month" if crossing is None else f"{datetime.fromtimestamp(crossing, UTC):%Y-%m-%d}"
            cells = [_money(budget, currency), _money(f.spent, f.currency),
                     f"<span{over}>{_money(f.month_cost, f.currency)}</span>", day]
        rows.append(f"<tr><td>{escape(ns)}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return ('<h2>Budgets</h2><p class="muted">No namespace has a budget (annotation '
                "gpu.platform/monthly-budget, or the chart's budgets).</p>")
    return ("<h2>Budgets</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in HEAD) + "</tr>" + "".join(rows)
            + "</table>")


WINDOW_HEAD = ("budget", "target", "window", "limit", "spent", "left", "burn per hour", "runs out", "action")


def _limits(gpu_hours: Decimal | None, money: Decimal | None, *, currency: str) -> str:
    parts = ([f"{gpu_hours:f} GPU-h"] if gpu_hours is not None else []) + (
        [f"{money:,.2f} {escape(currency)}"] if money is not None else [])
    return " + ".join(parts)


def window_budgets_section(states: tuple[BudgetState, ...], queues: tuple[QueueTotal, ...], *,
                           held: Mapping[str, object],
                           currency: str, sees: Callable[[str], bool], whole: bool) -> str:
    """``<h2>Queues and budgets</h2>``: each scheduler queue's month, then each budget over a window (a namespace's
    or a LocalQueue's shown to who may read that namespace; cluster-scoped queues and teams to cluster readers)."""
    out = ["<h2>Queues and budgets</h2>"]
    qrows = [f"<tr><td>{escape(t.scheduler)}</td><td>{escape(t.queue)}</td><td>{escape(t.cluster_queue)}</td>"
             f"<td>{float(t.gpu_hours):,.2f}</td><td>{_money(float(t.cost), t.currency)}</td></tr>"
             for t in queues if whole or (t.scheduler == "kueue" and sees(t.queue.split("/")[0]))]
    out.append("<table><tr><th>scheduler</th><th>queue</th><th>ClusterQueue</th><th>GPU-h this month</th>"
               "<th>cost this month</th></tr>" + "".join(qrows) + "</table>" if qrows else
               '<p class="muted">No GPU time booked through a scheduler queue this month.</p>')
    rows = []
    for s in states:
        b = s.budget
        ns = b.target if b.target_kind == "namespace" else b.target.split("/")[0] if b.target_kind == \
            "kueue_local_queue" else ""
        if not (whole or (ns and sees(ns))):
            continue
        left = _limits(s.remaining_gpu_hours, s.remaining_money, currency=currency)
        warn = ' class="warn"' if s.spent else ""
        runs_out = "-" if s.exhausted_at is None else f"{datetime.fromtimestamp(s.exhausted_at, UTC):%Y-%m-%d %H:%M}"
        action = b.action if b.acts else ("none" if b.action == "none" else f"{b.action} (not possible: reported only)")
        if b.name in held:
            action += " · holding now"
        cells = [escape(b.name), f"{escape(b.target_kind)} {escape(b.target)}", escape(b.window),
                 _limits(b.gpu_hours, b.money, currency=currency),
                 _limits(s.spent_gpu_hours if b.gpu_hours is not None else None,
                         s.spent_money if b.money is not None else None, currency=currency),
                 f"<span{warn}>{left}</span>",
                 _limits(s.burn_gpu_hours if b.gpu_hours is not None else None,
                         s.burn_money if b.money is not None else None, currency=currency),
                 runs_out, escape(action)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if rows:
        out.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in WINDOW_HEAD) + "</tr>" + "".join(rows)
                   + "</table>")
    return "".join(out)
