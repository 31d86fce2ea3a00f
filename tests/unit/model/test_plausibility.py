"""Whether an agent's counters could be true, at the edges of every check: each counter on its own, and each
bound met exactly (allowed) and passed (refused)."""

from __future__ import annotations

import pytest

from exporter.model.books import SPLIT_UNKNOWN, CounterMark
from exporter.model.plausibility import (
    EPS,
    MAX_GPU_WATTS,
    OVERSUBSCRIPTION_LIMIT,
    RATE_SLACK_RELATIVE,
    RATE_SLACK_SECONDS,
    counter_advance,
    counter_position,
    implausible,
)

PREV = CounterMark(allocated_s=100.0, used_s=40.0, unmeasured_s=10.0, energy_j=5000.0)


@pytest.mark.parametrize("field", ["allocated_s", "used_s", "unmeasured_s", "energy_j"])
def test_any_one_counter_going_back_is_refused(field: str) -> None:
    values = {"allocated_s": 120.0, "used_s": 50.0, "unmeasured_s": 20.0, "energy_j": 6000.0}
    values[field] = getattr(PREV, field) - 1.0
    assert counter_advance(PREV, CounterMark(**values)) is None


def test_an_advance_is_each_counter_minus_its_mark() -> None:
    cur = CounterMark(allocated_s=130.0, used_s=45.0, unmeasured_s=17.0, energy_j=5900.0)
    assert counter_advance(PREV, cur) == CounterMark(allocated_s=30.0, used_s=5.0, unmeasured_s=7.0, energy_j=900.0)
    assert counter_advance(None, cur) == cur
    assert counter_advance(PREV, PREV) == CounterMark()


def test_a_counter_back_by_less_than_rounding_is_no_change() -> None:
    """A float read back from the ledger may be a hair below its mark: that is no advance, not a reset."""
    cur = CounterMark(allocated_s=100.0 - EPS / 2, used_s=40.0 - EPS / 2, unmeasured_s=10.0 - EPS / 2,
                      energy_j=5000.0 - EPS / 2)
    assert counter_advance(PREV, cur) == CounterMark()


@pytest.mark.parametrize(("used", "unmeasured", "reason"), [
    (15.0, 0.0, ""), (15.0 + 2 * EPS, 0.0, "used_above_allocated"),
    (0.0, 15.0, ""), (0.0, 15.0 + 2 * EPS, "used_above_allocated"),
])
def test_used_or_unmeasured_may_reach_allocated_never_pass_it(used: float, unmeasured: float, reason: str) -> None:
    d = CounterMark(allocated_s=15.0, used_s=used, unmeasured_s=unmeasured)
    assert implausible([d], wall=None, gpus=0) == reason


def test_time_may_stand_still_but_not_go_back() -> None:
    assert implausible([], wall=0.0, gpus=1) == ""
    assert implausible([], wall=-EPS / 2, gpus=1) == ""
    assert implausible([], wall=-EPS, gpus=1) == ""  # within rounding
    assert implausible([], wall=-2 * EPS, gpus=1) == "time_went_backwards"
    assert implausible([CounterMark(allocated_s=1e12)], wall=-2 * EPS, gpus=0) == "time_went_backwards"


def test_without_wall_time_or_gpus_only_the_per_counter_checks_apply() -> None:
    huge = CounterMark(allocated_s=1e12, energy_j=1e15)
    assert implausible([huge], wall=None, gpus=8) == ""
    assert implausible([huge], wall=15.0, gpus=0) == ""


def _bound(gpus: int, wall: float) -> float:
    return gpus * (wall * (1 + RATE_SLACK_RELATIVE) + RATE_SLACK_SECONDS)


def test_one_counter_may_reach_gpus_times_wall_time_with_slack() -> None:
    bound = _bound(2, 15.0)  # 2 x (15.015 + 1) = 32.03
    assert implausible([CounterMark(allocated_s=bound)], wall=15.0, gpus=2) == ""
    assert implausible([CounterMark(allocated_s=bound * 1.0001)], wall=15.0, gpus=2) == "faster_than_wall_time"
    assert implausible([CounterMark(allocated_s=1.0)], wall=0.0, gpus=1) == ""  # the slack second alone
    assert implausible([CounterMark(allocated_s=1.5)], wall=0.0, gpus=1) == "faster_than_wall_time"


def test_all_counters_together_may_reach_twice_the_capacity() -> None:
    bound = _bound(1, 15.0)
    each = OVERSUBSCRIPTION_LIMIT * bound / 4
    assert implausible([CounterMark(allocated_s=each)] * 4, wall=15.0, gpus=1) == ""
    assert implausible([CounterMark(allocated_s=each * 1.0001)] * 4, wall=15.0, gpus=1) == "faster_than_wall_time"


def test_unmeasured_energy_time_is_bounded_like_a_counter() -> None:
    bound = _bound(1, 15.0)
    assert implausible([], wall=15.0, gpus=1, unmeasured_energy_s=bound) == ""
    assert implausible([], wall=15.0, gpus=1, unmeasured_energy_s=bound * 1.0001) == "faster_than_wall_time"


def test_unmeasured_energy_seconds_are_not_summed_with_held_seconds() -> None:
    """A legally oversubscribed node with DCGM down: 2 GPUs, 4 holders of 15 s each over 15 s = 60 GPU-s, within
    twice the bound (2 x 2 x (15 x 1.001 + 1) = 64.06), and all 2 x 15 = 30 GPU-seconds' energy unmeasured
    (within the bound 32.03). Plausible: the unmeasured seconds are the same seconds the holders held, not more
    of them; summed with the held ones (60 + 30 = 90 > 64.06) the node would be refused."""
    bound = _bound(2, 15.0)
    assert bound == pytest.approx(32.03) and OVERSUBSCRIPTION_LIMIT * bound == pytest.approx(64.06)
    held = [CounterMark(allocated_s=15.0, unmeasured_s=0.0)] * 4
    assert implausible(held, wall=15.0, gpus=2, unmeasured_energy_s=30.0) == ""
    assert implausible(held, wall=15.0, gpus=2, unmeasured_energy_s=bound) == ""
    assert implausible(held, wall=15.0, gpus=2, unmeasured_energy_s=bound * 1.0001) == "faster_than_wall_time"


def test_energy_may_reach_the_power_envelope() -> None:
    bound = _bound(4, 15.0)
    at = CounterMark(allocated_s=15.0, energy_j=MAX_GPU_WATTS * bound)
    assert implausible([at], wall=15.0, gpus=4) == ""
    over = CounterMark(allocated_s=15.0, energy_j=MAX_GPU_WATTS * bound * 1.0001)
    assert implausible([over], wall=15.0, gpus=4) == "energy_above_power_envelope"


def test_a_mark_takes_the_larger_of_each_field_and_an_unknown_split_takes_the_counters() -> None:
    """Booked at (60, 30, 0, 100 J, split unknown), now read (59.9999999, 30.5, 0, 100 J, split 5): the mark is
    (60, 30.5, 0, 100 J, 5): allocated stays at 60 (back by 1e-7, within the tolerance), the rest advance, and a
    split unknown before takes the agent's."""
    prev = CounterMark(allocated_s=60.0, used_s=30.0, energy_j=100.0, split_s=SPLIT_UNKNOWN)
    cur = CounterMark(allocated_s=60.0 - 1e-7, used_s=30.5, energy_j=100.0, split_s=5.0)
    assert counter_position(prev, cur) == CounterMark(allocated_s=60.0, used_s=30.5, energy_j=100.0, split_s=5.0)
    ahead = CounterMark(allocated_s=61.0, used_s=31.0, energy_j=101.0, split_s=6.0)
    assert counter_position(prev, ahead) is ahead
    assert counter_position(None, cur) is cur
