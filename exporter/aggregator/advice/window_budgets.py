"""Budgets over windows, read from the ledger: what each has spent in its window (GPU-hours and money), what is left,
how fast it burns and when it runs out at that pace.

Spent is the usage rows of the budget's target in the hour buckets of its window (``budget_windows.window_span``), as
of the last commit: the same figures ``report --by queue --since <window start>`` shows. The burn rate is spent over
the hours elapsed in the window; the projected exhaustion is when spent + burn x time reaches a limit, if before the
window rolls over. Budgets come from a YAML file (``load_budgets_file``); a namespace's monthly budget (annotation or
the chart's ``budgets``) is the case ``{target: {namespace: NS}, money: AMOUNT, window: month}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from exporter.model.books import hour_of
from exporter.model.budget_windows import TARGETS, BudgetsFileError, WindowBudget, parse_budgets, window_span
from exporter.model.exact import ZERO, book

MAX_QUEUE_SERIES = 500  # queues with their own series; the rest (least cost) fold into ``OVERFLOW``
OVERFLOW = "__overflow__"
Query = Callable[[str, Iterable[Any]], list[tuple[Any, ...]]]


@dataclass(frozen=True, slots=True)
class BudgetState:
    """One budget at ``now``: spent, remaining (None without that limit), burn per hour, projected exhaustion."""

    budget: WindowBudget
    start: float
    end: float
    spent_gpu_hours: Decimal
    spent_money: Decimal
    burn_gpu_hours: Decimal  # per hour
    burn_money: Decimal
    exhausted_at: float | None  # when a limit is (or at the burn rate would be) reached within the window

    @property
    def remaining_gpu_hours(self) -> Decimal | None:
        """The GPU-hours left (never below 0); None when the budget has no GPU-hour limit."""
        b = self.budget.gpu_hours
        return None if b is None else max(ZERO, b - self.spent_gpu_hours)

    @property
    def remaining_money(self) -> Decimal | None:
        """The money left (never below 0); None when the budget has no money limit."""
        b = self.budget.money
        return None if b is None else max(ZERO, b - self.spent_money)

    @property
    def spent_ratio(self) -> Decimal:
        """The larger of spent / limit over its limits (1 = spent)."""
        ratios = [s / b for s, b in ((self.spent_gpu_hours, self.budget.gpu_hours),
                                     (self.spent_money, self.budget.money)) if b]
        return book(max(ratios, default=ZERO))

    @property
    def spent(self) -> bool:
        """Whether a limit has been reached."""
        return self.spent_ratio >= 1

    def thresholds_reached(self) -> list[Decimal]:
        """The alert fractions reached so far."""
        return [f for f in self.budget.alert_at if self.spent_ratio >= f]


def load_budgets_file(path: Path) -> list[WindowBudget]:
    """The budgets of a YAML/JSON file; ``BudgetsFileError`` naming the file and field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BudgetsFileError(f"{path}: cannot read: {str(exc).splitlines()[0]}") from None
    return parse_budgets(raw or {"budgets": []}, source=str(path))


def namespace_budgets(monthly: Mapping[str, float]) -> list[WindowBudget]:
    """Namespaces' monthly money budgets (annotation or values) as window budgets named ``namespace/<ns>``."""
    return [WindowBudget(f"namespace/{ns}", "namespace", ns, "month", money=Decimal(repr(amount)))
            for ns, amount in sorted(monthly.items())]


def _target_sql(b: WindowBudget) -> tuple[str, list[Any]]:
    scheduler, column = TARGETS[b.target_kind]
    if column == "team":
        return ("namespace IN (SELECT t.namespace FROM namespace_team t WHERE t.cluster = usage.cluster AND "
                "t.hour = usage.hour AND t.team = ?)", [b.target])
    if scheduler:
        return f"scheduler = ? AND {column} = ?", [scheduler, b.target]
    return f"{column} = ?", [b.target]


def _spent(query: Query, b: WindowBudget, *, window: tuple[int, float], cluster: str, currency: str,
           groups: dict[tuple[int, float], dict[tuple[str, str, str, str], tuple[Decimal, Decimal]]]
           ) -> tuple[Decimal, Decimal]:
    """GPU-seconds and cost of ``b``'s target in the hour buckets of ``window``. Every budget of one window reads
    one grouped scan (``groups``, filled on first use) instead of a query each; a team's reads the team table."""
    scheduler, column = TARGETS[b.target_kind]
    if column == "team":
        target, params = _target_sql(b)
        ((seconds, cost),) = query(
            "SELECT SUM(allocated_s), SUM(cost) FROM usage WHERE cluster = ? AND currency = ? AND hour >= ? AND "
            f"hour < ? AND {target}", [cluster, currency, *window, *params])
        return Decimal(seconds or 0), Decimal(cost or 0)
    if window not in groups:
        rows = query("SELECT scheduler, queue, cluster_queue, namespace, SUM(allocated_s), SUM(cost) FROM usage "
                     "WHERE cluster = ? AND currency = ? AND hour >= ? AND hour < ? "
                     "GROUP BY scheduler, queue, cluster_queue, namespace", [cluster, currency, *window])
        groups[window] = {(str(sc), str(q), str(cq), str(ns)): (Decimal(sec or 0), Decimal(c or 0))
                          for sc, q, cq, ns, sec, c in rows}
    at = {"namespace": 3, "queue": 1, "cluster_queue": 2}[column]
    found = [v for k, v in groups[window].items() if k[at] == b.target and (not scheduler or k[0] == scheduler)]
    return sum((v[0] for v in found), ZERO), sum((v[1] for v in found), ZERO)


def evaluate(query: Query, budgets: Iterable[WindowBudget], *, now: float, cluster: str,
             currency: str) -> list[BudgetState]:
    """Each budget's state at ``now`` from the usage rows of ``cluster`` in ``currency``."""
    out: list[BudgetState] = []
    groups: dict[tuple[int, float], dict[tuple[str, str, str, str], tuple[Decimal, Decimal]]] = {}
    for b in budgets:
        span = window_span(b.window, now=now)
        seconds, money = _spent(query, b, window=(hour_of(span.start), span.end), cluster=cluster,
                                currency=currency, groups=groups)
        hours = book(seconds / 3600)
        elapsed = Decimal(str(max(now - span.start, 1.0))) / 3600
        burn_h, burn_m = book(hours / elapsed), book(money / elapsed)
        out.append(BudgetState(b, span.start, span.end, hours, money, burn_h, burn_m,
                               _exhaustion(now=now, end=span.end, pairs=((hours, b.gpu_hours, burn_h),
                                                                         (money, b.money, burn_m)))))
    return out


def _exhaustion(*, now: float, end: float, pairs: Iterable[tuple[Decimal, Decimal | None, Decimal]]) -> float | None:
    """The earliest time a limit is reached at its burn rate (now, if already), if within the window."""
    found: list[float] = []
    for spent, limit, burn in pairs:
        if limit is None:
            continue
        if spent >= limit:
            found.append(now)
        elif burn > 0:
            at = now + float((limit - spent) / burn) * 3600
            if at < end:
                found.append(at)
    return min(found, default=None)


@dataclass(frozen=True, slots=True)
class QueueTotal:
    """One queue's GPU-hours and cost this calendar month (UTC)."""

    scheduler: str
    queue: str
    cluster_queue: str
    currency: str
    gpu_hours: Decimal
    cost: Decimal


def queue_totals(query: Query, *, now: float, cluster: str) -> list[QueueTotal]:
    """Every queue's month to date, costliest first; past ``MAX_QUEUE_SERIES`` the rest are summed per scheduler
    and currency as queue ``__overflow__`` (bounded series, nothing dropped)."""
    span = window_span("month", now=now)
    rows = query("SELECT scheduler, queue, cluster_queue, currency, SUM(allocated_s), SUM(cost) FROM usage WHERE "
                 "cluster = ? AND hour >= ? AND scheduler <> '' GROUP BY scheduler, queue, cluster_queue, currency",
                 [cluster, span.start])
    found = sorted((QueueTotal(str(s), str(q), str(cq), str(cur), book(Decimal(sec or 0) / 3600), Decimal(c or 0))
                    for s, q, cq, cur, sec, c in rows), key=lambda t: (-t.cost, t.scheduler, t.queue))
    out = found[:MAX_QUEUE_SERIES]
    folded: dict[tuple[str, str], tuple[Decimal, Decimal]] = {}
    for t in found[MAX_QUEUE_SERIES:]:
        h, c = folded.get((t.scheduler, t.currency), (ZERO, ZERO))
        folded[(t.scheduler, t.currency)] = (h + t.gpu_hours, c + t.cost)
    out += [QueueTotal(s, OVERFLOW, "", cur, h, c) for (s, cur), (h, c) in folded.items()]
    return out


def state_dict(s: BudgetState) -> dict[str, Any]:
    """One budget's state for ``/api/v1/report?view=window-budgets``; ``namespace`` is the target's (a namespace or a
    Kueue LocalQueue's), "" for cluster-wide targets, so a caller sees only what its namespaces allow."""
    b = s.budget
    ns = b.target if b.target_kind == "namespace" else b.target.split("/")[0] if b.target_kind == \
        "kueue_local_queue" else ""
    return {"budget": b.name, "target_kind": b.target_kind, "target": b.target, "namespace": ns, "window": b.window,
            "window_start": s.start, "window_end": s.end, "limit_gpu_hours": b.gpu_hours, "limit_money": b.money,
            "spent_gpu_hours": s.spent_gpu_hours, "spent_money": s.spent_money,
            "remaining_gpu_hours": s.remaining_gpu_hours, "remaining_money": s.remaining_money,
            "burn_gpu_hours_per_hour": s.burn_gpu_hours, "burn_money_per_hour": s.burn_money,
            "spent_ratio": s.spent_ratio, "exhausted_at": s.exhausted_at, "action": b.action, "acts": b.acts}
