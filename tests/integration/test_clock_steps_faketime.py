"""A real agent process whose wall clock steps back 10 minutes and forward again (Debian's libfaketime, its
monotonic clock left alone), against the simulator and a real aggregator. The agent keeps ticking through the
step (it does not wait 10 minutes for the wall clock to catch up), reports both steps, the aggregator refuses
none of its snapshots, and the ledger ends equal to the agent's own counters, its node-hours conserved
(``ledger verify`` exit 0). Skipped, saying why, where libfaketime is not installed."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.procs import get, usage, wait
from tests.sim_fixture import SimClusterFactory

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")  # Debian's package ``faketime``
SCENARIO = """\
tick: 1s
duration: 2h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: train, namespace: ml, node: n0, gpus: 1, start: 1s, utilization: 0.5}]
"""


def _value(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _snapshot(env: dict[str, str]) -> dict[str, Any] | None:
    with contextlib.suppress(AssertionError, OSError):
        return usage(env)
    return None


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_real_agent_keeps_ticking_and_booking_through_a_wall_clock_step(sim_cluster: SimClusterFactory,
                                                                          tmp_path: Path) -> None:
    if not LIBFAKETIME.exists():
        pytest.skip(f"libfaketime is not installed ({LIBFAKETIME}; Debian package faketime)")
    sim = sim_cluster(SCENARIO)
    c = sim.cluster
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    faked = {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME_TIMESTAMP_FILE": str(offset), "FAKETIME_NO_CACHE": "1",
             "FAKETIME_DONT_FAKE_MONOTONIC": "1"}  # the wall clock only: CLOCK_MONOTONIC stays the kernel's
    env = sim.agent_env("n0", GPUCOST_TICK="0.5s")
    c.spawn("agent-n0", ["agent"], {**env, **faked})
    agg = sim.aggregator_env(GPUCOST_TICK="0.5s")
    c.spawn("aggregator", ["aggregator"], agg)
    base, agent = f"http://{agg['GPUCOST_LISTEN']}", f"http://{env['GPUCOST_LISTEN']}"
    wait(lambda: 'gpucost_agent_up{node="n0"} 1.0' in get(f"{base}/metrics")[1].decode(), timeout=30)

    offset.write_text("-600\n")  # ten minutes back
    wait(lambda: _value(get(f"{agent}/metrics")[1].decode(), 'gpucost_agent_clock_steps_total{direction="back"}')
         == 1.0, timeout=10)
    before = _snapshot(env)
    time.sleep(2.5)
    during = _snapshot(env)
    assert before is not None and during is not None
    assert during["seq"] >= before["seq"] + 3, (before["seq"], during["seq"])  # still ticking every 0.5 s
    assert during["timestamp"] > before["timestamp"]  # its timeline went on; the wall clock is 600 s behind it
    assert _value(get(f"{agent}/metrics")[1].decode(), "gpucost_agent_clock_offset_seconds") == pytest.approx(
        -600, abs=2)

    offset.write_text("+0\n")  # and forward again
    wait(lambda: _value(get(f"{agent}/metrics")[1].decode(),
                        'gpucost_agent_clock_steps_total{direction="forward"}') == 1.0, timeout=10)
    time.sleep(1.5)
    metrics = get(f"{base}/metrics")[1].decode()
    assert 'gpucost_agent_up{node="n0"} 1.0' in metrics
    assert "gpucost_agent_snapshots_rejected_total{" not in metrics  # nothing refused as time_went_backwards

    # Freeze the counters (SIGTERM: final tick and flush; back with a 1 h tick), book them, stop.
    assert c.stop("agent-n0") == 0
    c.spawn("agent-n0", ["agent"], {**env, **faked, "GPUCOST_TICK": "1h"})
    wait(lambda: _snapshot(env) is not None, timeout=30)
    counted = sum(h["allocated_s"] for h in (_snapshot(env) or {})["holders"])
    time.sleep(1.5)
    assert c.stop("aggregator") == 0
    logs = (c.logs / "agent-n0.log").read_text()
    assert logs.count('"clock_stepped"') == 2, logs[-2000:]
    done = subprocess.run([sys.executable, "-m", "exporter", "ledger", "verify", "--ledger", agg["GPUCOST_LEDGER"]],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    import sqlite3

    from exporter.aggregator.ledger.sqlite import decoded_rows

    conn = sqlite3.connect(agg["GPUCOST_LEDGER"])
    try:
        ((booked,),) = decoded_rows(conn.execute("SELECT SUM(allocated_s) AS allocated_s FROM usage"))
        ((since, until),) = conn.execute("SELECT since, booked_ts FROM agents").fetchall()
    finally:
        conn.close()
    assert float(booked) == pytest.approx(counted, abs=1e-6)  # exactly once
    assert counted > 0 and until - since < 120  # the books span the run's minute, not the ten minutes stepped
