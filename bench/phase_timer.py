"""Time an aggregator tick's phases by wrapping the functions that do them, at import time, from the bench.

Nothing in ``exporter/`` knows it is timed: the wrappers replace, in this process only, the pull of every agent
(``AgentPuller.pull_all``), the snapshot decode (``parse_snapshot`` as ``exporter.clients.agents`` calls it),
the booking (``Books.prepare`` and ``book_teams`` as the service calls them) and the commit
(``Ledger.commit_sync``, on the ledger's thread). The decode runs inside the pull, so the pull's own time is
its wall time minus the decode's.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

PHASES = ("pull", "decode", "book", "commit")


@dataclass(slots=True)
class PhaseClock:
    """Seconds spent in each phase since the last ``take`` (``now``: the wall clock the wrappers read, ``cpu``: this
    process's CPU clock, read around the pull: its wall time also waits for the agents)."""

    now: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.process_time
    spent: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("pull_wall", "pull_cpu", "decode", "book", "commit"), 0.0))

    def add(self, phase: str, seconds: float) -> None:
        """Count ``seconds`` in ``phase``."""
        self.spent[phase] += seconds

    def take(self, tick_s: float) -> dict[str, float]:
        """This tick's phases (``pull`` and its CPU time ``pull_cpu`` without the decode inside it, ``tick`` the
        whole), then start afresh."""
        s = self.spent
        out = {"pull": max(0.0, s["pull_wall"] - s["decode"]), "pull_cpu": max(0.0, s["pull_cpu"] - s["decode"]),
               "decode": s["decode"], "book": s["book"],
               "commit": s["commit"], "tick": tick_s}
        self.spent = dict.fromkeys(s, 0.0)
        return out


def timed_sync(fn: Callable[..., Any], clock: PhaseClock, *, phase: str) -> Callable[..., Any]:
    """``fn`` whose every call adds its duration to ``phase``."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = clock.now()
        try:
            return fn(*args, **kwargs)
        finally:
            clock.add(phase, clock.now() - t0)
    return wrapper


def timed_async(fn: Callable[..., Awaitable[Any]], clock: PhaseClock, *, phase: str,
                cpu_phase: str | None = None) -> Callable[..., Coroutine[Any, Any, Any]]:
    """Coroutine function ``fn`` whose every await adds its wall time to ``phase`` (and this process's CPU time
    meanwhile to ``cpu_phase``, if given)."""
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = clock.now(), clock.cpu()
        try:
            return await fn(*args, **kwargs)
        finally:
            clock.add(phase, clock.now() - t0)
            if cpu_phase is not None:
                clock.add(cpu_phase, clock.cpu() - c0)
    return wrapper


def _wrap(owner: object, name: str, *, wrapper: Callable[[Any], Any]) -> None:
    """Replace ``owner.name`` (a class's method or a module's function) by ``wrapper(original)``."""
    setattr(owner, name, wrapper(getattr(owner, name)))


def install() -> PhaseClock:
    """Wrap the aggregator's phase functions in this process; the returned clock collects their time."""
    from exporter.aggregator import service
    from exporter.aggregator.books.booking import Books
    from exporter.aggregator.ledger.store import Ledger
    from exporter.clients import agents

    clock = PhaseClock()
    _wrap(agents.AgentPuller, "pull_all",
          wrapper=lambda fn: timed_async(fn, clock, phase="pull_wall", cpu_phase="pull_cpu"))
    _wrap(agents, "parse_snapshot", wrapper=lambda fn: timed_sync(fn, clock, phase="decode"))
    _wrap(Books, "prepare", wrapper=lambda fn: timed_sync(fn, clock, phase="book"))
    _wrap(service, "book_teams", wrapper=lambda fn: timed_sync(fn, clock, phase="book"))
    _wrap(Ledger, "commit_sync", wrapper=lambda fn: timed_sync(fn, clock, phase="commit"))
    return clock
