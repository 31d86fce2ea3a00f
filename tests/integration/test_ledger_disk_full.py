"""A full disk under the SQLite ledger, for real: the aggregator's ledger lives on a small tmpfs that a file fills
mid-run. While it is full the aggregator keeps serving and says so (``gpucost_ledger_up 0``,
``gpucost_ledger_write_failures_total{reason="disk_full"}``, ``/readyz`` 503 naming the fault, no commit), and
acknowledges no agent; once the file is removed it books everything exactly once: the ledger then equals the
agents' own counters (1e-6 GPU-s) and every node-hour holds 2 GPUs x its booked seconds.

Mounting needs root (and a kernel that lets this process mount): otherwise the test is skipped, saying why.
Acks are seen by a loopback HTTP relay between the aggregator and each agent that records every pull's query."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from exporter.aggregator.ledger.sqlite import decoded_rows
from tests.disk import fill, small_tmpfs
from tests.procs import get, usage, wait
from tests.sim_fixture import SimClusterFactory

SCENARIO = """\
tick: 1s
duration: 2h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}
  - {name: n1, model: "NVIDIA H100 80GB HBM3", gpus: 2}
pods:
  - {name: train, namespace: ml, node: n0, gpus: 1, start: 1s, utilization: 0.5}
  - {name: serve, namespace: web, node: n1, gpus: 2, start: 1s, utilization: 0.25}
"""


class Relay:
    """A loopback HTTP relay to one agent that records the ``ack`` of every pull (None: no ack sent)."""

    def __init__(self, target: str) -> None:
        self.acks: list[str | None] = []
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                relay.acks.append(parse_qs(urlparse(self.path).query).get("ack", [None])[0])
                req = urllib.request.Request(target + self.path, headers=dict(self.headers))
                try:
                    with urllib.request.urlopen(req, timeout=5) as r:
                        status, body = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, body = e.code, e.read()
                except OSError:  # the agent restarting: the aggregator sees it down, as it would directly
                    status, body = 502, b"{}"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def metric(text: str, name: str) -> float | None:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_full_disk_stops_booking_and_acks_then_books_everything_once(sim_cluster: SimClusterFactory,
                                                                          tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "ledgerfs") as fs:
        sim = sim_cluster(SCENARIO)
        c = sim.cluster
        agents = sim.agent_envs(GPUCOST_TICK="0.5s")
        relays = {node: Relay(f"http://{env['GPUCOST_LISTEN']}") for node, env in agents.items()}
        try:
            for node, env in agents.items():
                c.spawn(f"agent-{node}", ["agent"], env)
            agg = sim.aggregator_env(GPUCOST_LEDGER=str(fs / "ledger.db"), GPUCOST_TICK="0.5s",
                                     GPUCOST_AGENTS=",".join(r.url for r in relays.values()))
            c.spawn("aggregator", ["aggregator"], agg)
            base = f"http://{agg['GPUCOST_LISTEN']}"

            def scrape() -> str:
                return get(f"{base}/metrics")[1].decode()

            wait(lambda: get(f"{base}/readyz")[0] == 200, timeout=30)
            wait(lambda: all(any(a is not None for a in r.acks) for r in relays.values()), timeout=30)
            committed = metric(scrape(), "gpucost_ledger_last_commit_timestamp_seconds")

            fill(fs / "filler")
            wait(lambda: metric(scrape(), "gpucost_ledger_up") == 0.0, timeout=15)
            pulls_when_down = {node: len(r.acks) for node, r in relays.items()}
            status, body = get(f"{base}/readyz")
            assert status == 503 and b'"ledger_fault": "disk_full"' in body, body
            text = scrape()
            assert (metric(text, 'gpucost_ledger_write_failures_total{reason="disk_full"}') or 0) >= 1
            stuck = metric(text, "gpucost_ledger_last_commit_timestamp_seconds")
            assert committed is not None and stuck is not None and stuck >= committed
            time.sleep(2.0)  # four more ticks on the full disk: still serving, nothing committed, nothing acked
            text = scrape()
            assert metric(text, "gpucost_ledger_last_commit_timestamp_seconds") == stuck
            for node, r in relays.items():
                later = r.acks[pulls_when_down[node]:]
                assert len(later) >= 2 and all(a is None for a in later), (node, later)
            assert c.running("aggregator")

            (fs / "filler").unlink()
            wait(lambda: metric(scrape(), "gpucost_ledger_up") == 1.0, timeout=15)
            wait(lambda: get(f"{base}/readyz")[0] == 200, timeout=15)
            # Freeze the agents' counters (SIGTERM: final tick and flush; back with a 1 h tick), book them, stop.
            for node, env in agents.items():
                assert c.stop(f"agent-{node}") == 0
                c.spawn(f"agent-{node}", ["agent"], {**env, "GPUCOST_TICK": "1h"})
            snaps: dict[str, dict[str, Any]] = {}

            def ticked(node: str, env: dict[str, str]) -> bool:  # its one tick done: /v1/usage answers
                with contextlib.suppress(AssertionError):
                    snaps[node] = usage(env)
                return node in snaps

            for node, env in agents.items():
                wait(lambda node=node, env=env: ticked(node, env), timeout=30)
            counted = {node: sum(h["allocated_s"] for h in snap["holders"]) for node, snap in snaps.items()}
            time.sleep(2.0)
            assert c.stop("aggregator") == 0
        finally:
            for r in relays.values():
                r.close()
            c.close()
        conn = sqlite3.connect(fs / "ledger.db")
        try:
            def q(sql: str) -> list[tuple[Any, ...]]:
                return [tuple(float(v) if isinstance(v, Decimal) else v for v in row)
                        for row in decoded_rows(conn.execute(sql))]

            booked = dict(q("SELECT node, SUM(allocated_s) FROM usage GROUP BY node"))
            per_hour: dict[tuple[str, int], float] = {}
            for table, column in (("usage", "allocated_s"), ("unallocated", "seconds"), ("unobserved", "seconds")):
                for node, hour, secs in q(f"SELECT node, hour, SUM({column}) FROM {table} GROUP BY node, hour"):
                    per_hour[(node, hour)] = per_hour.get((node, hour), 0.0) + secs
            span = {n: (since, until) for n, since, until in conn.execute("SELECT node, since, booked_ts FROM agents")}
        finally:
            conn.close()
    # Exactly once: what the agents counted, no more, no less.
    for node, secs in counted.items():
        assert secs > 0 and booked[node] == pytest.approx(secs, abs=1e-6), (node, booked[node], secs)
    # Every second of each node's books in one bucket: 2 GPUs x the seconds of the hour it booked.
    for (node, hour), secs in per_hour.items():
        since, until = span[node]
        assert secs == pytest.approx(2 * max(0.0, min(hour + 3600, until) - max(hour, since)), abs=1e-6)
