"""The Lease loop stops when it is cancelled, even when the cancel meets the end of a renewal.

The renewal is replaced on the instance (``monkeypatch``) because the race needs a cancel that arrives exactly as
an attempt ends, which a real API server cannot be made to time; everything else is the real loop."""

from __future__ import annotations

import asyncio

import pytest

from exporter.aggregator.leader import LeaderElector


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
