"""The Lease loop stops when it is cancelled, even when the cancel meets the end of a renewal; a take-over of the
ledger holds a term only together with the books it covers.

The renewal is replaced on the instance (``monkeypatch``) because the race needs a cancel that arrives exactly as
an attempt ends, which a real API server cannot be made to time; everything else is the real loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exporter.aggregator.fleet.leader import LeaderElector, take_over_ledger
from exporter.aggregator.ledger.store import Ledger, LedgerState


async def test_a_cancel_that_meets_the_end_of_a_renewal_stops_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each renewal cancels the loop's task and then succeeds: the loop must end cancelled after the first, where
    ``asyncio.wait_for`` on 3.11 returned the renewal's result and the loop ran on (a daemon that never stops)."""
    elector = LeaderElector(None, "default", name="lease", lease_duration=3.0, renew_period=0.01)
    attempts = 0

    async def renew_then_cancelled() -> bool:
        nonlocal attempts
        attempts += 1
        loop_task.cancel()
        return True

    monkeypatch.setattr(elector, "try_acquire_or_renew", renew_then_cancelled)
    loop_task = asyncio.ensure_future(elector.run())
    done, _ = await asyncio.wait([loop_task], timeout=2.0)
    if not done:
        loop_task.cancel()
    assert loop_task in done and loop_task.cancelled() and attempts == 1


async def test_a_failed_renewal_keeps_the_loop_going_and_never_leads() -> None:
    """The API server's fault (here: no server at all) is logged and retried, never raised; no lease, no leader."""
    from kubernetes_asyncio.client import ApiClient, Configuration

    config = Configuration(host="http://127.0.0.1:9")  # the discard port: refused
    async with ApiClient(config) as api:
        elector = LeaderElector(api, "default", name="lease", lease_duration=3.0, renew_period=0.01)
        loop_task = asyncio.ensure_future(elector.run())
        await asyncio.sleep(0.3)
        assert not loop_task.done() and not elector.is_leader
        loop_task.cancel()
        done, _ = await asyncio.wait([loop_task], timeout=2.0)
        assert loop_task in done and loop_task.cancelled()


async def test_a_take_over_whose_books_fail_to_load_books_nothing_until_they_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new leader takes the next fencing term, then reloads the books. When the reload fails (the database went
    away between the two), the term used to stay held with the old books in memory: a tick in the retry's wait
    booked on stale marks with a term the ledger accepts, so what the previous leader booked since was booked
    again. Now nothing may be booked until a later attempt holds both a term and the books it covers. (The read's
    failure is injected on the instance: a real database cannot be made to fail between two statements.)"""
    ledger = Ledger(tmp_path / "ledger.db", fenced=True)
    await ledger.open()
    load_state, failed, calls = ledger.load_state, asyncio.Event(), list[int]()

    async def fails_once() -> LedgerState:
        calls.append(1)
        if len(calls) == 1:
            failed.set()
            raise OSError("connection reset by peer")
        return await load_state()

    monkeypatch.setattr(ledger, "load_state", fails_once)
    restored: list[LedgerState] = []
    take_over = asyncio.ensure_future(take_over_ledger(ledger, holder="replica-b", leading=lambda: True,
                                                       lock=asyncio.Lock(), restore=restored.append, retry=0.2))
    try:
        await asyncio.wait_for(failed.wait(), 10.0)  # resumed once the attempt has failed and its wait begun
        assert (ledger.may_book, ledger.term, restored) == (False, None, [])
        await asyncio.wait_for(take_over, 10.0)
        assert (ledger.may_book, ledger.term, len(restored), len(calls)) == (True, 2, 1, 2)
    finally:
        take_over.cancel()
        await ledger.close()
