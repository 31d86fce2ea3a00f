"""The status page's "Savings you can take": the biggest monthly saving first, each row's numbers and
placements as the recommendation says, names escaped, and a bounded table."""

from __future__ import annotations

import re

from exporter.aggregator.web.status_savings import ranked, render_savings
from exporter.model.rightsizing.types import Action, Evidence, Placement, Recommendation

A100 = "NVIDIA A100 80GB"
MONTH = 730.0  # hours


def _rec(ns: str, wl: str, action: Action, current: Placement, target: Placement, *, now: float,
         after: float) -> Recommendation:
    return Recommendation(ns, wl, action, current, target, Evidence(0.08, 0.1, None, 48.0), now, after, "USD",
                          f"{wl} reason")


ROWS = [
    # a 1-replica-of-4 time-sliced share at 730 h x 1.00 → half of that: saves 730 x 0.50 = 365.00
    _rec("lab", "small", Action.TIME_SLICE, Placement(A100, None, 1, 2), Placement(A100, None, 1, 4),
         now=MONTH * 1.00, after=MONTH * 0.50),
    # an idle notebook on one A100 at 4.00/h: 730 x 4.00 = 2,920.00 saved
    _rec("lab", "notebook", Action.SCALE_TO_ZERO, Placement(A100), Placement(A100, None, 0),
         now=MONTH * 4.00, after=0.0),
    # whole A100 at 4.00/h → 1g.10gb at 4.00 / 7 per hour: 730 x (4.00 - 4.00 / 7) = 2,502.86 saved
    _rec("serve", "api", Action.MIG, Placement(A100), Placement(A100, "1g.10gb", 1),
         now=MONTH * 4.00, after=MONTH * 4.00 / 7),
]


def test_rows_are_ranked_by_monthly_savings() -> None:
    assert [r.workload for r in ranked(ROWS)] == ["notebook", "api", "small"]
    html = render_savings(ROWS)
    savings = [float(v) for v in re.findall(r'data-savings="([0-9.]+)"', html)]
    assert savings == [2920.00, round(730 * (4.00 - 4.00 / 7), 2), 365.00]
    assert "<td>2,920.00 USD</td>" in html and "<td>2,502.86 USD</td>" in html and "<td>365.00 USD</td>" in html


def test_each_row_says_what_to_change() -> None:
    html = render_savings(ROWS)
    assert (f"<td>lab</td><td>notebook</td><td><span class=tag>scale_to_zero</span></td>"
            f"<td>1 &times; {A100} &rarr; none</td>") in html
    assert f"<td>1 &times; {A100} &rarr; 1 &times; {A100} 1g.10gb</td>" in html
    assert f"<td>1 &times; {A100} 1/2 &rarr; 1 &times; {A100} 1/4</td>" in html
    assert "<td style='text-align:left'>api reason</td>" in html


def test_bounded_and_escaped() -> None:
    evil = _rec('x"><script>', "<b>wl</b>", Action.MIG, Placement(A100), Placement(A100, "1g.10gb", 1),
                now=10.0, after=1.0)
    html = render_savings([*ROWS, evil], shown=2)
    assert html.count("<tr data-savings=") == 2 and "2 more in /api/v1/recommendations." in html
    html = render_savings([evil])
    assert "<script" not in html and "<b>" not in html and "x&quot;&gt;&lt;script&gt;" in html


def test_nothing_to_take() -> None:
    assert "No right-sizing action yet" in render_savings([])
