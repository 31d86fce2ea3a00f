"""The status page's trend charts as inline SVG: no JavaScript, no external asset, every text escaped.

Each bar segment and each point carries its number twice: in a ``<title>`` (the browser's tooltip, for
people) and in ``data-value`` (full precision, for tests and scrapers), so what is drawn can be checked
against the ledger. A bucket the ledger cannot speak for is drawn grey with an empty ``data-value``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from exporter.aggregator.web.status_trends import CostBar, CostSeries, CurrencyTrends, Trends, UtilPoint

PLOT_W = 360
PLOT_H = 80
TOP_PAD = 12  # room for the scale's label
BOTTOM_PAD = 14  # room for the first and last bucket's label
BUSY = "#2f6fde"
IDLE = "#e8a23a"
UNKNOWN = "#d5d9e2"
LINE = "#1d7a46"


@dataclass(frozen=True, slots=True)
class Axis:
    """How a chart names its buckets and its unit."""

    label: Callable[[int], str]
    per: str  # "day" or "hour"


def day_label(ts: int) -> str:
    """A daily bar's label (UTC date)."""
    return f"{datetime.fromtimestamp(ts, UTC):%Y-%m-%d}"


def hour_label(ts: int) -> str:
    """An hourly bar's label (UTC hour)."""
    return f"{datetime.fromtimestamp(ts, UTC):%Y-%m-%d %H:00} UTC"


DAILY = Axis(day_label, "day")
HOURLY = Axis(hour_label, "hour")


def _amount(v: float, currency: str) -> str:
    """Cents for real bills, four decimals while amounts are small (as the tables above)."""
    return f"{v:,.2f} {currency}" if abs(v) >= 10 else f"{v:.4f} {currency}"


def _attr(v: float) -> str:
    """Full precision (the shortest text that reads back as the same float)."""
    return repr(float(v))


def _frame(*, chart: str, title: str, body: list[str], extra: str = "") -> str:
    h = TOP_PAD + PLOT_H + BOTTOM_PAD
    return (f'<svg class="chart" data-chart="{chart}"{extra} width="{PLOT_W}" height="{h}" '
            f'viewBox="0 0 {PLOT_W} {h}" role="img" aria-label="{escape(title)}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
            f'<rect x="0" y="{TOP_PAD}" width="{PLOT_W}" height="{PLOT_H}" fill="#fff" stroke="#e3e7ef"/>'
            + "".join(body) + "</svg>")


def _edges(starts: list[int], axis: Axis) -> list[str]:
    """The first and the last bucket's label, under the plot's two ends."""
    if not starts:
        return []
    first, last = min(starts), max(starts)
    y = TOP_PAD + PLOT_H + BOTTOM_PAD - 3
    return [f'<text x="0" y="{y}" font-size="9" fill="#778">{escape(axis.label(first))}</text>',
            f'<text x="{PLOT_W}" y="{y}" font-size="9" fill="#778" text-anchor="end">{escape(axis.label(last))}</text>']


def _bar(bar: CostBar, *, x: float, w: float, scale: float, who: str, currency: str, axis: Axis) -> str:
    when = escape(axis.label(bar.start))
    if not bar.known:
        return (f'<g data-bucket="{when}"><rect x="{x:.1f}" y="{TOP_PAD + PLOT_H - 4}" width="{w:.1f}" height="4" '
                f'fill="{UNKNOWN}" data-bucket="{when}" data-kind="unknown" data-value=""><title>{who} · {when}: '
                f"unknown (before the ledger's oldest hourly row)</title></rect></g>")
    cur = escape(currency)
    busy_h = max(0.0, bar.busy_cost) * scale
    idle_h = max(0.0, bar.idle_cost) * scale
    base = TOP_PAD + PLOT_H
    return (f'<g data-bucket="{when}" data-kind="cost" data-value="{_attr(bar.cost)}">'
            f'<rect x="{x:.1f}" y="{base - busy_h:.2f}" width="{w:.1f}" height="{busy_h:.2f}" fill="{BUSY}" '
            f'data-bucket="{when}" data-kind="busy" data-value="{_attr(bar.busy_cost)}"><title>{who} · {when}: cost '
            f"{_amount(bar.cost, cur)}, of which not idle {_amount(bar.busy_cost, cur)}</title></rect>"
            f'<rect x="{x:.1f}" y="{base - busy_h - idle_h:.2f}" width="{w:.1f}" height="{idle_h:.2f}" fill="{IDLE}" '
            f'data-bucket="{when}" data-kind="idle" data-value="{_attr(bar.idle_cost)}"><title>{who} · {when}: idle '
            f"{_amount(bar.idle_cost, cur)} of {_amount(bar.cost, cur)}</title></rect></g>")


def cost_chart(series: CostSeries, axis: Axis) -> str:
    """Stacked bars, one per bucket: the cost that was not idle below, the idle cost on top."""
    who, cur = escape(series.namespace), escape(series.currency)
    top = max((max(b.cost, b.idle_cost, b.busy_cost) for b in series.bars if b.known), default=0.0)
    scale = PLOT_H / top if top > 0 else 0.0
    slot = PLOT_W / max(1, len(series.bars))
    body = [f'<text x="2" y="{TOP_PAD - 2}" font-size="9" fill="#778">max {_amount(top, cur)} per {axis.per}</text>']
    body += [_bar(b, x=i * slot + 1, w=max(1.0, slot - 2), scale=scale, who=who, currency=series.currency, axis=axis)
             for i, b in enumerate(series.bars)]
    body += _edges([b.start for b in series.bars], axis)
    title = f"{series.namespace}: cost per {axis.per} in {series.currency}, idle stacked on the rest"
    return _frame(chart=f"cost-{axis.per}", title=title, body=body,
                  extra=f' data-namespace="{who}" data-currency="{cur}"')


def util_chart(points: tuple[UtilPoint, ...], axis: Axis) -> str:
    """The fleet's utilisation, 0 to 100 %, one point per bucket; a gap where nothing was measured."""
    slot = PLOT_W / max(1, len(points))
    body = [f'<text x="2" y="{TOP_PAD - 2}" font-size="9" fill="#778">100 %</text>']
    segment: list[str] = []
    lines: list[list[str]] = [segment]
    marks = []
    for i, p in enumerate(points):
        x = i * slot + slot / 2
        when = escape(axis.label(p.start))
        ratio = p.ratio
        if ratio is None:
            segment = []
            lines.append(segment)
            why = "nothing allocated and measured" if p.known else "before the ledger's oldest hourly row"
            marks.append(f'<rect x="{x - 2:.1f}" y="{TOP_PAD + PLOT_H - 4}" width="4" height="4" fill="{UNKNOWN}" '
                         f'data-bucket="{when}" data-kind="unknown" data-value=""><title>{when}: utilisation '
                         f"unknown ({why})</title></rect>")
            continue
        y = TOP_PAD + PLOT_H * (1 - ratio)
        segment.append(f"{x:.1f},{y:.2f}")
        marks.append(f'<circle cx="{x:.1f}" cy="{y:.2f}" r="2.5" fill="{LINE}" data-bucket="{when}" '
                     f'data-kind="utilisation" data-value="{_attr(ratio)}"><title>{when}: utilisation {ratio:.1%} '
                     f"(used {p.used_gpu_hours:.2f} of {p.allocated_gpu_hours - p.unmeasured_gpu_hours:.2f} measured "
                     f"GPU-h; {p.unmeasured_gpu_hours:.2f} GPU-h unmeasured)</title></circle>")
    body += [f'<polyline points="{" ".join(s)}" fill="none" stroke="{LINE}" stroke-width="1.5"/>'
             for s in lines if len(s) > 1]
    body += marks
    body += _edges([p.start for p in points], axis)
    return _frame(chart=f"utilisation-{axis.per}", title=f"fleet GPU utilisation per {axis.per}", body=body)


LEGEND = (f'<p class="muted"><svg width="10" height="10"><rect width="10" height="10" fill="{BUSY}"/></svg> '
          f'cost not idle (used or unmeasured) <svg width="10" height="10"><rect width="10" height="10" '
          f'fill="{IDLE}"/></svg> idle cost <svg width="10" height="10"><rect width="10" height="10" '
          f'fill="{UNKNOWN}"/></svg> unknown · hover a bar for its amount; times are UTC</p>')


def _currency_table(c: CurrencyTrends) -> str:
    rows = "".join(f"<tr><td>{escape(d.namespace)}<br><span class=muted>{_amount(d.total, escape(c.currency))} in "
                   f"30 days</span></td><td>{cost_chart(d, DAILY)}</td><td>{cost_chart(h, HOURLY)}</td></tr>"
                   for d, h in zip(c.daily, c.hourly, strict=True))
    return (f"<h3>Cost per namespace in {escape(c.currency)}</h3><table class=charts><tr><th>namespace</th>"
            f"<th>per day, last 30 days</th><th>per hour, last 24 h</th></tr>{rows}</table>")


def render_trends(trends: Trends) -> str:
    """The "Trends" section: cost charts per currency, then the fleet's utilisation."""
    if not trends.costs:
        return '<h2>Trends</h2><p class="muted">No GPU usage booked in the last 30 days.</p>'
    parts = ["<h2>Trends</h2>", LEGEND, *(_currency_table(c) for c in trends.costs),
             "<h3>Fleet utilisation (used ÷ measured allocated GPU-hours)</h3><table class=charts><tr>"
             "<th>per hour, last 24 h</th><th>per day, last 30 days</th></tr><tr>"
             f"<td>{util_chart(trends.util_hourly, HOURLY)}</td><td>{util_chart(trends.util_daily, DAILY)}</td>"
             "</tr></table>"]
    return "".join(parts)
