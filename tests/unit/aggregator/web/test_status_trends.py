"""The status page's trend charts on both ledger backends: the numbers each bar and point carries are the
hand-computed sums of the hourly rows written here, unknown stays unknown, and the SVG says the same."""

from __future__ import annotations

import pytest

from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.aggregator.web.status_charts import render_trends
from exporter.aggregator.web.status_trends import OTHER, CostSeries, Trends, read_trends
from exporter.model.books import UsageAmounts, UsageKey
from exporter.model.exact import exact
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture
from tests.svg_values import svg_values

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

H = 3600
D = 20833 * 86400  # 2027-01-15T00:00:00Z, a UTC midnight
NOW = D + 10 * H + 1800  # 10:30 that day
THIS_HOUR = D + 10 * H
PRICE = 4.00  # per GPU-hour, every row below


def _row(w: TickWrite, *, hour: int, ns: str, pod: str, alloc_h: float, used_h: float, unmeasured_h: float = 0.0,
         idle_cost: float, currency: str = "USD", price: float = PRICE) -> None:
    """One hourly row; cost = allocated GPU-h x price, idle seconds = allocated - used - unmeasured."""
    idle_h = alloc_h - used_h - unmeasured_h
    w.usage[UsageKey(hour, ns, pod, pod, "n1", "pool", "M", "", "", currency)] = UsageAmounts(
        allocated_s=exact(alloc_h * H), used_s=exact(used_h * H), unmeasured_s=exact(unmeasured_h * H),
            idle_s=exact(idle_h * H),
        cost=exact(alloc_h * price), idle_cost=exact(idle_cost), energy_j=exact(0.0), list_cost=exact(alloc_h * price))


def _books() -> TickWrite:
    w = TickWrite()
    # this hour (10:00): a 2 GPU-h, half used (idle 1 h x 4.00); c 0.25 GPU-h, 0.0625 h idle (x 4.00 = 0.25);
    # e 0.125 GPU-h with DCGM down (unmeasured: not idle); d 1 GPU-h fully used at 5.00, priced in EUR
    _row(w, hour=THIS_HOUR, ns="a", pod="p1", alloc_h=2.0, used_h=1.0, idle_cost=4.0)
    _row(w, hour=THIS_HOUR, ns="c", pod="p1", alloc_h=0.25, used_h=0.1875, idle_cost=0.25)
    _row(w, hour=THIS_HOUR, ns="e", pod="p1", alloc_h=0.125, used_h=0.0, unmeasured_h=0.125, idle_cost=0.0)
    _row(w, hour=THIS_HOUR, ns="d", pod="p1", alloc_h=1.0, used_h=1.0, idle_cost=0.0, currency="EUR", price=5.0)
    # and a pod of a priced in EUR too (another pricing file's currency): its own series, never added to USD
    _row(w, hour=THIS_HOUR, ns="a", pod="p3", alloc_h=1.0, used_h=1.0, idle_cost=0.0, currency="EUR", price=5.0)
    # 09:00: two pods of a, one a quarter used (0.75 h idle x 4.00 = 3.00), one fully used
    _row(w, hour=THIS_HOUR - H, ns="a", pod="p1", alloc_h=1.0, used_h=0.25, idle_cost=3.0)
    _row(w, hour=THIS_HOUR - H, ns="a", pod="p2", alloc_h=1.0, used_h=1.0, idle_cost=0.0)
    # yesterday 11:00 = 23 h ago (the 24-hour window's first hour): b 0.75 GPU-h, all used
    _row(w, hour=THIS_HOUR - 23 * H, ns="b", pod="p1", alloc_h=0.75, used_h=0.75, idle_cost=0.0)
    # yesterday 10:00 = 24 h ago (outside the 24 h, inside yesterday): a 24 GPUs, half idle (12 h x 4.00)
    _row(w, hour=THIS_HOUR - 24 * H, ns="a", pod="p1", alloc_h=24.0, used_h=12.0, idle_cost=48.0)
    # 29 days ago (the 30-day window's first day): b 0.5 GPU-h, half idle (0.25 x 4.00)
    _row(w, hour=D - 29 * 86400, ns="b", pod="p1", alloc_h=0.5, used_h=0.25, idle_cost=1.0)
    # 30 days ago: outside every window
    _row(w, hour=D - 30 * 86400 + 5 * H, ns="b", pod="p1", alloc_h=250.0, used_h=0.0, idle_cost=1000.0)
    return w


async def _trends(t: LedgerTarget, w: TickWrite, *, top: int = 8) -> Trends:
    ledger = Ledger(t.target, password_file=t.password_file)
    await ledger.open()
    try:
        await ledger.commit(w)
        return await ledger.read(lambda q: read_trends(q, cluster=ledger.cluster, now=NOW, top=top))
    finally:
        await ledger.close()


def _series(trends: Trends, currency: str) -> tuple[dict[str, CostSeries], dict[str, CostSeries]]:
    c = next(c for c in trends.costs if c.currency == currency)
    return {s.namespace: s for s in c.daily}, {s.namespace: s for s in c.hourly}


async def test_cost_bars_are_the_hourly_rows_summed(ledger_target: LedgerTarget) -> None:
    """Top 2 of 4 namespaces by 30-day cost (a 112.00, b 5.00), c and e summed as the others; EUR apart."""
    trends = await _trends(ledger_target, _books(), top=2)
    assert trends.days[0] == D - 29 * 86400 and trends.days[-1] == D and len(trends.days) == 30
    assert trends.hours[0] == THIS_HOUR - 23 * H and trends.hours[-1] == THIS_HOUR and len(trends.hours) == 24
    assert [c.currency for c in trends.costs] == ["EUR", "USD"]
    daily, hourly = _series(trends, "USD")
    assert list(daily) == ["a", "b", OTHER]  # a: 8 + 8 + 96 = 112; b: 3 + 2 = 5; the others: 1.00 + 0.50
    assert daily["a"].total == pytest.approx(8.0 + 4.0 + 4.0 + 96.0)
    today, yesterday = daily["a"].bars[-1], daily["a"].bars[-2]
    assert today.cost == pytest.approx(2 * PRICE + 1 * PRICE + 1 * PRICE)  # 10:00 and 09:00's two pods
    assert today.idle_cost == pytest.approx(4.0 + 3.0)
    assert today.busy_cost == pytest.approx(16.0 - 7.0)
    assert yesterday.cost == pytest.approx(24 * PRICE) and yesterday.idle_cost == pytest.approx(12 * PRICE)
    assert all(b.cost == 0.0 and b.known for b in daily["a"].bars[:-2])
    assert daily["b"].bars[-2].cost == pytest.approx(0.75 * PRICE)  # 23 h ago is yesterday
    assert daily["b"].bars[0].cost == pytest.approx(0.5 * PRICE)  # 29 days ago; 30 days ago not counted
    assert daily["b"].bars[0].idle_cost == pytest.approx(0.25 * PRICE)
    assert daily["b"].total == pytest.approx(3.0 + 2.0)
    assert daily[OTHER].bars[-1].cost == pytest.approx(0.25 * PRICE + 0.125 * PRICE)  # c + e
    assert daily[OTHER].bars[-1].idle_cost == pytest.approx(0.25 + 0.0)  # e's unmeasured hour is not idle
    assert hourly["a"].bars[-1].cost == pytest.approx(2 * PRICE) and hourly["a"].bars[-1].idle_cost == 4.0
    assert hourly["a"].bars[-2].cost == pytest.approx(2 * PRICE) and hourly["a"].bars[-2].idle_cost == 3.0
    assert sum(b.cost for b in hourly["a"].bars) == pytest.approx(16.0)  # the 96.00 of 24 h ago is outside
    assert hourly["b"].bars[0].cost == pytest.approx(0.75 * PRICE)
    eur_daily, eur_hourly = _series(trends, "EUR")
    assert list(eur_daily) == ["a", "d"]  # 5.00 each: ties in name order
    assert eur_daily["d"].bars[-1].cost == pytest.approx(1 * 5.0) and eur_daily["a"].total == pytest.approx(1 * 5.0)
    assert eur_hourly["d"].bars[-1].cost == pytest.approx(5.0) and eur_hourly["a"].bars[-1].cost == 5.0


async def test_fleet_utilisation_is_used_over_measured(ledger_target: LedgerTarget) -> None:
    """Per hour and per day, every currency's GPU-hours together: used ÷ (allocated - unmeasured)."""
    trends = await _trends(ledger_target, _books())
    now_hour = trends.util_hourly[-1]
    assert now_hour.allocated_gpu_hours == pytest.approx(2.0 + 0.25 + 0.125 + 1.0 + 1.0)
    assert now_hour.unmeasured_gpu_hours == pytest.approx(0.125)
    assert now_hour.ratio == pytest.approx((1.0 + 0.1875 + 0.0 + 1.0 + 1.0) / (4.375 - 0.125))
    assert trends.util_hourly[-2].ratio == pytest.approx((0.25 + 1.0) / 2.0)
    assert trends.util_hourly[0].ratio == pytest.approx(0.75 / 0.75)
    assert trends.util_hourly[5].ratio is None and trends.util_hourly[5].known  # nothing held: no ratio
    assert trends.util_daily[-1].ratio == pytest.approx((3.1875 + 1.25) / (4.375 + 2.0 - 0.125))
    assert trends.util_daily[-2].ratio == pytest.approx((12.0 + 0.75) / (24.0 + 0.75))
    assert trends.util_daily[0].ratio == pytest.approx(0.25 / 0.5)


async def test_buckets_before_the_books_are_unknown(ledger_target: LedgerTarget) -> None:
    """The oldest row is 20 h old: older hours and days are unknown, not zero; later empty ones are zero."""
    w = TickWrite()
    _row(w, hour=THIS_HOUR - 20 * H, ns="a", pod="p1", alloc_h=1.0, used_h=0.5, idle_cost=2.0)
    trends = await _trends(ledger_target, w)
    daily, hourly = _series(trends, "USD")
    assert [b.known for b in hourly["a"].bars[:4]] == [False, False, False, True]  # 23, 22, 21 h ago unknown
    assert hourly["a"].bars[3].cost == pytest.approx(1 * PRICE)
    assert all(b.known and b.cost == 0.0 for b in hourly["a"].bars[4:])
    assert [b.known for b in daily["a"].bars] == [False] * 28 + [True, True]  # 20 h ago is yesterday 14:00
    assert [p.known for p in trends.util_hourly[:4]] == [False, False, False, True]
    assert trends.util_hourly[3].ratio == pytest.approx(0.5 / 1.0)


async def test_svg_carries_the_same_numbers(ledger_target: LedgerTarget) -> None:
    """The rendered charts' ``data-value``s are the sums above; no script, the unknown bucket is empty."""
    trends = await _trends(ledger_target, _books(), top=2)
    html = render_trends(trends)
    assert "<script" not in html and "href" not in html
    values = svg_values(html)
    got = {(c, ns, kind, bucket): v for c, ns, kind, bucket, v in values}
    assert float(got[("cost-day", "a", "cost", "2027-01-15")]) == pytest.approx(16.0)
    assert float(got[("cost-day", "a", "idle", "2027-01-15")]) == pytest.approx(7.0)
    assert float(got[("cost-day", "a", "busy", "2027-01-15")]) == pytest.approx(9.0)
    assert float(got[("cost-day", "a", "idle", "2027-01-14")]) == pytest.approx(48.0)
    assert float(got[("cost-hour", "a", "idle", "2027-01-15 09:00 UTC")]) == pytest.approx(3.0)
    assert float(got[("cost-day", "(other namespaces)", "cost", "2027-01-15")]) == pytest.approx(1.5)
    assert float(got[("cost-day", "d", "cost", "2027-01-15")]) == pytest.approx(5.0)
    assert float(got[("utilisation-hour", "", "utilisation", "2027-01-15 09:00 UTC")]) == pytest.approx(0.625)
    assert got[("utilisation-hour", "", "unknown", "2027-01-15 05:00 UTC")] == ""  # nothing held then
    # 5 series (a, b, the others in USD; a, d in EUR) x (30 + 24) bars x 3 numbers, one per utilisation bucket
    assert len(values) == (3 + 2) * (30 + 24) * 3 + 24 + 30
    assert "<title>a · 2027-01-15: idle 7.0000 USD of 16.00 USD</title>" in html


async def test_names_are_escaped(ledger_target: LedgerTarget) -> None:
    """A namespace name is data: markup in it is shown as text in titles and attributes alike."""
    w = TickWrite()
    _row(w, hour=THIS_HOUR, ns='x"><script>alert(1)</script>', pod="p1", alloc_h=1.0, used_h=1.0, idle_cost=0.0)
    html = render_trends(await _trends(ledger_target, w))
    assert "<script" not in html
    assert 'data-namespace="x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in html
