"""Split seconds in the counter checks: a split counter going back is refused like the others, a mark from before
split seconds were booked (``SPLIT_UNKNOWN``) advances none, and split seconds may reach allocated, not pass it."""

from __future__ import annotations

from exporter.model.books import SPLIT_UNKNOWN, CounterMark
from exporter.model.plausibility import counter_advance, implausible


def test_split_seconds_advance_from_a_known_mark_and_never_go_back() -> None:
    prev = CounterMark(allocated_s=100.0, split_s=40.0)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=70.0)) == CounterMark(
        allocated_s=60.0, split_s=30.0)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=39.0)) is None


def test_a_mark_without_split_seconds_advances_none_whatever_the_agent_says() -> None:
    """The agent's 70 split seconds cover its whole epoch, not this interval: the advance splits nothing, and a
    split below the unknown mark's -1 is not "going back"."""
    prev = CounterMark(allocated_s=100.0, split_s=SPLIT_UNKNOWN)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=70.0)) == CounterMark(allocated_s=60.0)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=-5.0)) == CounterMark(allocated_s=60.0)


def test_split_seconds_may_reach_allocated_but_not_pass_it() -> None:
    assert implausible([CounterMark(allocated_s=60.0, split_s=60.0)], wall=None, gpus=0) == ""
    assert implausible([CounterMark(allocated_s=60.0, split_s=60.1)], wall=None, gpus=0) == "split_above_allocated"
