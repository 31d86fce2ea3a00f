"""The status page's "Budgets" table: each budgeted namespace's month so far and where it will end.

Its own module so the page's other sections change independently. Figures are the forecasts as last
refreshed from the ledger (``forecasts.MonthForecasts``); a budget without one yet says "unknown".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from html import escape

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
