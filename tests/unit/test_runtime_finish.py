"""``runtime.finish``: work that cannot be called back once started (a commit on a thread) is waited for to its end
even when the caller is cancelled, once or repeatedly, and the cancel is re-raised after it, never lost; without a
cancel the task's own result or failure comes back."""

from __future__ import annotations

import asyncio
import threading

import pytest
from structlog.testing import capture_logs

from exporter.runtime import finish, start_ticking


def _gated(gate: threading.Event, ended: list[str]) -> asyncio.Task[str]:
    """A task whose work runs on a thread until ``gate`` opens, as a ledger commit does."""

    def work() -> str:
        assert gate.wait(5.0)
        ended.append("work")
        return "committed"

    return asyncio.ensure_future(asyncio.to_thread(work))


async def test_the_result_or_the_failure_comes_back_without_a_cancel() -> None:
    gate, ended = threading.Event(), list[str]()
    gate.set()
    assert await finish(_gated(gate, ended)) == "committed"

    async def fails() -> None:
        raise ValueError("refused: stale term")

    with pytest.raises(ValueError, match="stale term"):
        await finish(asyncio.ensure_future(fails()))


@pytest.mark.parametrize("cancels", [1, 3])
async def test_a_cancelled_caller_waits_for_the_work_then_stops(cancels: int) -> None:
    gate, ended, after = threading.Event(), list[str](), list[str]()
    work = _gated(gate, ended)

    async def caller() -> None:
        await finish(work)
        after.append("the caller went on")  # never: it was cancelled

    task = asyncio.ensure_future(caller())
    await asyncio.sleep(0.05)
    for _ in range(cancels):
        task.cancel()
        await asyncio.sleep(0.05)
    assert not task.done() and not work.done()  # waiting for the thread, whatever the cancels
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended == ["work"] and work.result() == "committed" and after == []


async def test_a_cancel_meeting_a_failure_stops_the_caller_and_the_failure_is_retrieved() -> None:
    gate = threading.Event()

    def work() -> None:
        assert gate.wait(5.0)
        raise OSError("database went away")

    job = asyncio.ensure_future(asyncio.to_thread(work))
    caller = asyncio.ensure_future(finish(job))
    await asyncio.sleep(0.05)
    caller.cancel()
    await asyncio.sleep(0.05)
    gate.set()
    with capture_logs() as logs, pytest.raises(asyncio.CancelledError):  # the cancel, not the failure
        await caller
    assert isinstance(job.exception(), OSError)
    assert [(e["event"], e["log_level"]) for e in logs] == [("work_failed_while_cancelled", "error")]
    assert "database went away" in logs[0]["error"]


async def test_a_caller_cancelled_before_it_waits_stops_after_the_work() -> None:
    """``cancelled=True``: the caller caught its cancel before it came to wait (a tick cancelled as it handed its
    commit over); it still waits for the work, then stops."""
    gate, ended = threading.Event(), list[str]()
    work = _gated(gate, ended)
    threading.Timer(0.1, gate.set).start()
    with pytest.raises(asyncio.CancelledError):
        await finish(work, cancelled=True)
    assert ended == ["work"] and work.result() == "committed"


async def test_a_timeout_around_it_ends_as_a_timeout_after_the_work() -> None:
    gate, ended = threading.Event(), list[str]()
    work = _gated(gate, ended)
    threading.Timer(0.2, gate.set).start()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await finish(work)
    assert ended == ["work"]


async def test_a_cancel_arriving_as_the_work_ends_is_not_lost() -> None:
    """The work's end and the cancel reach the caller in one turn of the loop: the work is done when the cancel
    wakes the caller, and the caller must still stop (a SIGTERM that hits a tick as its commit returns)."""
    work: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    caller = asyncio.ensure_future(finish(work))
    await asyncio.sleep(0)  # the caller waits on the work
    work.set_result("committed")
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_the_schedulers_shutdown_cancels_a_running_tick() -> None:
    """Why a daemon's tick must finish its commit through a cancel: at SIGTERM the daemon shuts its scheduler
    down, and that cancels the tick it is running (then the daemon ticks once more to flush)."""
    started, outcome = asyncio.Event(), list[str]()

    async def tick() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    scheduler = start_ticking(tick, 3600.0)
    await asyncio.wait_for(started.wait(), 10.0)
    scheduler.shutdown(wait=False)
    await asyncio.sleep(0.1)
    assert outcome == ["cancelled"]
