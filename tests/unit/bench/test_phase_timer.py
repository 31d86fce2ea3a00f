"""The phase clock: a wrapped call's duration counted in its phase (also when it raises), and the pull's own
time without the decode inside it. Durations come from a virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from bench.driver_runs import DriverRun
from bench.phase_timer import PhaseClock, timed_async, timed_sync


class Ticks:
    """A virtual clock that moves only when told to."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_wrapped_call_counts_its_duration_in_its_phase() -> None:
    now = Ticks()
    clock = PhaseClock(now=now)

    def book(x: int) -> int:
        now.t += 0.25
        return x * 2

    assert timed_sync(book, clock, phase="book")(21) == 42
    assert clock.spent["book"] == 0.25


def test_a_call_that_raises_still_counts() -> None:
    now = Ticks()
    clock = PhaseClock(now=now)

    def commit() -> None:
        now.t += 0.5
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        timed_sync(commit, clock, phase="commit")()
    assert clock.spent["commit"] == 0.5


def test_an_awaited_call_counts_its_wall_time() -> None:
    now = Ticks()
    clock = PhaseClock(now=now)

    async def pull_all() -> str:
        now.t += 1.5
        return "pulled"

    assert asyncio.run(timed_async(pull_all, clock, phase="pull_wall")()) == "pulled"
    assert clock.spent["pull_wall"] == 1.5


def test_an_awaited_call_can_count_its_cpu_time_too() -> None:
    """1.5 s of wall time of which 0.5 s this process's CPU (the rest waited for the agents)."""
    now, cpu = Ticks(), Ticks()
    clock = PhaseClock(now=now, cpu=cpu)

    async def pull_all() -> None:
        now.t += 1.5
        cpu.t += 0.5

    asyncio.run(timed_async(pull_all, clock, phase="pull_wall", cpu_phase="pull_cpu")())
    assert (clock.spent["pull_wall"], clock.spent["pull_cpu"]) == (1.5, 0.5)


def test_take_leaves_the_decode_out_of_the_pull_and_starts_afresh() -> None:
    """Pull's wall 1.0 s (CPU 0.5 s) of which decode 0.25 s: pull 0.75 s, its CPU 0.25 s; book 0.5, commit 0.75;
    the tick 3.0 s."""
    clock = PhaseClock()
    for phase, s in (("pull_wall", 1.0), ("pull_cpu", 0.5), ("decode", 0.25), ("book", 0.5), ("commit", 0.75)):
        clock.add(phase, s)
    assert clock.take(3.0) == {"pull": 0.75, "pull_cpu": 0.25, "decode": 0.25, "book": 0.5, "commit": 0.75,
                               "tick": 3.0}
    assert clock.take(1.0) == {"pull": 0.0, "pull_cpu": 0.0, "decode": 0.0, "book": 0.0, "commit": 0.0,
                               "tick": 1.0}


def _run(phases: list[dict[str, float]], times: list[float]) -> DriverRun:
    return DriverRun(tree="new", exporter="x", nodes=10, agents_up=10, times=times, phases=phases,
                     rss_after_start_mb=1.0, rss_mb=1.0, peak_rss_mb=1.0)


def test_a_runs_phases_are_the_mean_of_its_ticks_after_the_first() -> None:
    """Ticks 2 and 3: book (0.2 + 0.4) / 2 = 0.3; the first tick's 9.0 left out. Its steady tick: median of
    1.0 and 2.0 = 1.5."""
    run = _run([{"book": 9.0}, {"book": 0.2}, {"book": 0.4}], [9.0, 1.0, 2.0])
    assert run.mean_phases() == {"book": pytest.approx(0.3)}
    assert run.tick_s == 1.5


def test_a_run_without_phases_says_so() -> None:
    with pytest.raises(ValueError, match="phases"):
        _run([], [1.0]).mean_phases()
