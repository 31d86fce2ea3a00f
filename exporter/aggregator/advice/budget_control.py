"""Budgets over windows, after each commit: re-read the budgets file when it changed, work out every budget's state
from the ledger, and (the leader only) hold a spent budget's queue or release the queue it held.

A hold is recorded in the ledger (``budget_holds``) and on the object (``queue_hold.HELD_BY``); a release happens
when the budget has room again: its window rolled over, or its limit was raised. Each action is a structured log
line, a Kubernetes Event on the queue, a counter (``gpucost_budget_actions_total``) and, through the
``gpucost_budget_held`` series and its alert, a Slack message. A failure here never fails the tick's commit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.aggregator.advice.window_budgets import (
    BudgetState,
    QueueTotal,
    evaluate,
    load_budgets_file,
    namespace_budgets,
    queue_totals,
)
from exporter.aggregator.kube.queue_hold import QueueActor
from exporter.aggregator.ledger.store import Ledger
from exporter.config import AggregatorSettings
from exporter.logs import get_logger
from exporter.model.budget_windows import BudgetsFileError, WindowBudget

log = get_logger("aggregator.budgets")


@dataclass(slots=True)
class BudgetControl:
    """The budgets file, the budgets' states, and the queues this aggregator holds (``held``, as in the ledger: a
    hold is released through what it held, even when its budget was since removed or retargeted)."""

    path: Path | None = None
    queue_refresh: float = 300.0
    namespace: str = "default"  # where Volcano Commands (and cluster-scoped queues' Events) are created
    dry_run: bool = False
    specs: list[WindowBudget] = field(default_factory=list)
    states: tuple[BudgetState, ...] = ()
    queues: tuple[QueueTotal, ...] = ()
    held: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # budget -> (target kind, target, action)
    actions: Counter[tuple[str, str]] = field(default_factory=Counter)  # (budget, action) -> times
    reload_errors: int = 0
    errors: int = 0
    actor: QueueActor | None = None
    _stamp: tuple[int, int] | None = None
    _queues_at: float | None = None
    _loaded_holds: bool = False
    _dry: set[str] = field(default_factory=set)  # budgets a dry run said it would hold (said once per spell)

    @classmethod
    def of(cls, settings: AggregatorSettings, *, namespace: str) -> BudgetControl:
        """The aggregator's: its budgets file, its dry-run setting, queue totals refreshed as often as forecasts."""
        return cls(settings.window_budgets_file, queue_refresh=settings.forecast_refresh, namespace=namespace,
                   dry_run=settings.budget_dry_run)

    def maybe_reload(self) -> None:
        """Swap in the file's budgets when it changed and is valid; else keep the last good ones (logged)."""
        if self.path is None:
            return
        try:
            st = self.path.stat()
        except OSError:
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self.specs = load_budgets_file(self.path)
        except BudgetsFileError as exc:
            self.reload_errors += 1
            log.error("budgets_reload_failed_keeping_previous", error=str(exc))
            return
        log.info("budgets_loaded", path=str(self.path), budgets=len(self.specs),
                 acting=[b.name for b in self.specs if b.acts])

    def budgets(self, monthly: Mapping[str, float]) -> list[WindowBudget]:
        """The file's budgets, then each namespace's monthly budget not named in the file."""
        names = {b.name for b in self.specs}
        return self.specs + [b for b in namespace_budgets(monthly) if b.name not in names]

    async def after_commit(self, ledger: Ledger, *, monthly: Mapping[str, float], currency: str, now: float,
                           leader: bool, api: Any = None) -> None:
        """Refresh the states (and, when due, the per-queue totals); act if leading (through ``api``, the API
        client; None: no cluster). Never raises."""
        if api is not None and self.actor is None:
            self.actor = QueueActor(api, self.namespace, dry_run=self.dry_run)
        try:
            self.maybe_reload()
            budgets = self.budgets(monthly)
            due = self._queues_at is None or now - self._queues_at >= self.queue_refresh
            if due or self.held or any(b.acts for b in budgets):  # acting budgets and holds: after every commit
                self.states = tuple(await ledger.read(lambda q: evaluate(q, budgets, now=now, cluster=ledger.cluster,
                                                                        currency=currency)))
            if due:
                self.queues = tuple(await ledger.read(lambda q: queue_totals(q, now=now, cluster=ledger.cluster)))
                self._queues_at = now
            if leader and self.actor is not None:
                await self._act(ledger, now=now)
        except Exception as exc:  # budgets are advice and actions on other systems: the books go on
            self.errors += 1
            log.warning("budgets_failed", error=repr(exc)[:300])

    async def _act(self, ledger: Ledger, *, now: float) -> None:
        assert self.actor is not None
        if not self._loaded_holds:
            rows = await ledger.query("SELECT budget, target_kind, target, action FROM budget_holds WHERE cluster = ?",
                                      [ledger.cluster])
            self.held = {str(b): (str(k), str(t), str(a)) for b, k, t, a in rows}
            self._loaded_holds = True
        states = {s.budget.name: s for s in self.states}
        for s in self.states:
            b = s.budget
            if not s.spent:
                self._dry.discard(b.name)
            if b.acts and s.spent and b.name not in self.held and b.name not in self._dry:
                await self._hold(ledger, s, now=now)
        for name, (kind, target, action) in list(self.held.items()):
            now_state = states.get(name)
            same = now_state is not None and now_state.budget.acts and (
                now_state.budget.target_kind, now_state.budget.target) == (kind, target)
            if same and now_state is not None and now_state.spent:
                continue  # still spent: the hold stays
            why = f"budget {name} has room again" if same else f"budget {name} was removed or changed"
            held = WindowBudget(name, kind, target, now_state.budget.window if now_state else "day", action=action)
            done = await self.actor.release(held, reason=why)
            if done is None:
                continue  # the API did not answer: try again next tick
            if done.action == "release":
                self._record("release", held, dry_run=done.dry_run)
            if not done.dry_run:  # released, or no longer ours to release (a person changed it)
                self.held.pop(name, None)
                await ledger.execute("DELETE FROM budget_holds WHERE cluster = ? AND budget = ?",
                                     [ledger.cluster, name])

    async def _hold(self, ledger: Ledger, s: BudgetState, *, now: float) -> None:
        assert self.actor is not None
        b = s.budget
        why = (f"budget {b.name} spent: {s.spent_gpu_hours} GPU-h / {b.gpu_hours or '-'} GPU-h, "
               f"{s.spent_money} / {b.money or '-'} in window {b.window}")
        done = await self.actor.hold(b, reason=why)
        if done is None or done.action not in ("hold", "drain"):
            return
        self._record(done.action, b, dry_run=done.dry_run)
        if done.dry_run:
            self._dry.add(b.name)
            return
        self.held[b.name] = (b.target_kind, b.target, b.action)
        await ledger.execute("INSERT INTO budget_holds (cluster, budget, target_kind, target, action, held_at) "
                             "VALUES (?, ?, ?, ?, ?, ?)", [ledger.cluster, b.name, b.target_kind, b.target, b.action,
                                                           now])

    def _record(self, action: str, b: WindowBudget, *, dry_run: bool) -> None:
        self.actions[(b.name, f"{action}-dry-run" if dry_run else action)] += 1
        log.warning("budget_action", budget=b.name, action=action, target_kind=b.target_kind, target=b.target,
                    window=b.window, dry_run=dry_run)
