"""Reading the numbers a status page chart carries: every element with a ``data-value``, with its chart."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import NamedTuple


class SvgValue(NamedTuple):
    chart: str  # data-chart of the enclosing <svg>: cost-day, cost-hour, utilisation-hour, utilisation-day
    namespace: str  # data-namespace of that <svg> ("" for the fleet's charts)
    kind: str  # cost, busy, idle, utilisation or unknown
    bucket: str  # the bucket's label: 2027-01-15 or 2027-01-15 09:00 UTC
    value: str  # "" when unknown


class _Values(HTMLParser):
    """Every element carrying ``data-value``: (chart, namespace, kind, bucket, value) in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.chart: dict[str, str] = {}
        self.found: list[SvgValue] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg" and "data-chart" in a:
            self.chart = a
        elif "data-value" in a:
            self.found.append(SvgValue(self.chart.get("data-chart", ""), self.chart.get("data-namespace", ""),
                                       a.get("data-kind", ""), a.get("data-bucket", ""), a["data-value"]))


def svg_values(html: str) -> list[SvgValue]:
    parser = _Values()
    parser.feed(html)
    return parser.found
