"""The status page's "Savings you can take": the right-sizing rows as last computed for the metrics
(the page never recomputes them), the biggest monthly saving first."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from exporter.model.rightsizing.types import Placement, Recommendation

SHOWN = 25


def ranked(rows: Iterable[Recommendation]) -> list[Recommendation]:
    """Most money first; equal savings in namespace then workload order, so the page does not shuffle."""
    return sorted(rows, key=lambda r: (-r.monthly_savings, r.namespace, r.workload))


def placement(p: Placement) -> str:
    """``2 x NVIDIA A100 80GB 1g.10gb``; a time-sliced share as ``1/4``; nothing held as ``none``."""
    if p.gpus == 0:
        return "none"
    kind = p.mig_profile or (f"1/{p.replicas}" if p.replicas else "")
    return f"{p.gpus} &times; {escape(p.gpu_model)}{' ' + escape(kind) if kind else ''}"


def _money(v: float, currency: str) -> str:
    return f"{v:,.2f} {escape(currency)}"


def render_savings(rows: Iterable[Recommendation], *, shown: int = SHOWN) -> str:
    """The section, ``shown`` rows at most; the rest are counted and left to /api/v1/recommendations."""
    ordered = ranked(rows)
    head = "<h2>Savings you can take</h2>"
    if not ordered:
        return head + ('<p class="muted">No right-sizing action yet: a workload needs enough evidence in the '
                       "window first.</p>")
    body = "".join(
        f'<tr data-savings="{r.monthly_savings:.2f}"><td>{escape(r.namespace)}</td><td>{escape(r.workload)}</td>'
        f"<td><span class=tag>{escape(str(r.action))}</span></td><td>{placement(r.current)} &rarr; "
        f"{placement(r.target)}</td><td>{_money(r.monthly_savings, r.currency)}</td>"
        f"<td style='text-align:left'>{escape(r.reason)}</td></tr>" for r in ordered[:shown])
    more = len(ordered) - shown
    tail = (f'<p class="muted">{more} more in /api/v1/recommendations.</p>' if more > 0 else "")
    return (head + "<table class=savings><tr><th>namespace</th><th>workload</th><th>action</th>"
            "<th>current &rarr; target</th><th>monthly savings</th><th>reason</th></tr>" + body + "</table>"
            + '<p class="muted">A month is 730 hours at the prices booked in the window.</p>' + tail)
