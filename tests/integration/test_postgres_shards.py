"""Sharded aggregators on one PostgreSQL ledger, as real processes against ``sim-cluster``: two shards
book the cluster, then the shard count goes to three the way a StatefulSet rolls (the highest ordinal
first, so for a while shard 0 still runs with two shards while shard 2 already runs with three and both
claim the same nodes); at the end the ledger equals the agents' own counters to the microsecond."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from exporter.model.shard_spec import owner
from tests.pg import PASSWORD, PgServer, postgres_fixture
from tests.procs import Cluster, get, usage, wait
from tests.sim_fixture import SimClusterFactory

_FIXTURES = (postgres_fixture,)  # used by name
pytestmark = [pytest.mark.slow, pytest.mark.timeout(360)]  # up to 97 s each measured on a loaded machine

NODES = [f"n-{i}" for i in range(6)]
SCENARIO = "tick: 1s\nduration: 2h\nprices: {\"NVIDIA L4\": 0.8}\nnodes:\n" + "".join(
    f"  - {{name: {n}, model: \"NVIDIA L4\", gpus: 2, labels: {{gpu.platform/pool: dev}}}}\n" for n in NODES) + \
    "pods:\n" + "".join(
    f"  - {{name: p{i}, namespace: team-{'ab'[i % 2]}, node: {n}, gpus: {1 + i % 2}, utilization: 0.5}}\n"
    for i, n in enumerate(NODES))


@pytest.fixture(name="cluster")
def _cluster(sim_cluster: SimClusterFactory) -> Cluster:
    """The simulated cluster of ``SCENARIO``, ready; whatever the test spawns through it stops after."""
    return sim_cluster(SCENARIO).cluster


def _free_listen() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _shard_env(cluster: Cluster, postgres: PgServer, url: str, *, index: int, count: int) -> dict[str, str]:
    return {**cluster.aggregator_env(), "GPUCOST_LEDGER": url, "GPUCOST_CLUSTER": "prod",
            "GPUCOST_LEDGER_PASSWORD_FILE": str(postgres.password_file), "GPUCOST_LISTEN": _free_listen(),
            "GPUCOST_SHARDS": str(count), "GPUCOST_SHARD_INDEX": str(index),
            "GPUCOST_LOG_LEVEL": "debug"}  # the most an operator can make it log: still no password


def _no_password_in_logs(logs: Path) -> None:
    """Every aggregator's log (each started, at debug level) lacks the ledger password's text."""
    found = sorted(logs.glob("agg*.log"))
    assert found
    for log in found:
        text = log.read_text(errors="replace")
        assert "aggregator_started" in text, log.name
        assert PASSWORD not in text, log.name


def _metric_nodes(listen: str) -> set[str]:
    """Nodes this aggregator reports an agent for (``gpucost_agent_up{node=...}``): the ones it pulled."""
    status, body = get(f"http://{listen}/metrics")
    assert status == 200
    return {line.split('node="', 1)[1].split('"', 1)[0] for line in body.decode().splitlines()
            if line.startswith("gpucost_agent_up{")}


def _ticked(env: dict[str, str]) -> bool:
    """Whether a restarted agent serves its snapshot again (503 until its first tick)."""
    token = Path(env["GPUCOST_USAGE_TOKEN_FILE"]).read_text().strip()
    return get(f"http://{env['GPUCOST_LISTEN']}/v1/usage", {"Authorization": f"Bearer {token}"})[0] == 200


def _ledger(url: str) -> dict[str, float]:
    import psycopg

    with psycopg.connect(url, password=PASSWORD) as pg:
        rows: dict[str, float] = dict(pg.execute(
            "SELECT namespace, SUM(allocated_s) FROM usage WHERE cluster = 'prod' GROUP BY namespace").fetchall())
        totals: dict[str, float] = dict(pg.execute(
            "SELECT namespace, allocated_s FROM totals WHERE cluster = 'prod'").fetchall())
    assert rows.keys() == totals.keys()
    for ns in rows:  # hourly rows and running totals were written in the same transactions
        assert float(rows[ns]) == pytest.approx(float(totals[ns]), rel=1e-12, abs=1e-9)
    return {ns: float(v) for ns, v in rows.items()}


def test_two_then_three_shards_book_exactly_what_the_agents_counted(cluster: Cluster, postgres: PgServer) -> None:
    """By hand: n-0 -> shard 0 of 2, shard 2 of 3; n-5 -> shard 1 of 2, shard 2 of 3; the rest stay."""
    assert [(owner(n, 2), owner(n, 3)) for n in NODES] == [(0, 2), (0, 0), (0, 0), (1, 1), (0, 0), (1, 2)]
    url = postgres.database()
    for n in NODES:
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n))
    two = {i: _shard_env(cluster, postgres, url, index=i, count=2) for i in range(2)}
    for i, env in two.items():
        cluster.spawn(f"agg2-{i}", ["aggregator"], env)
    for env in two.values():
        wait(lambda env=env: get(f"http://{env['GPUCOST_LISTEN']}/readyz")[0] == 200, timeout=60.0)
    time.sleep(3.0)
    # each shard reports only its own nodes' agents (once every agent has answered: an agent not yet up
    # is reported under its URL until a shard learns whose it is)
    for i in range(2):
        wait(lambda i=i: _metric_nodes(two[i]["GPUCOST_LISTEN"]) == {n for n in NODES if owner(n, 2) == i},
             timeout=60.0)
    # Roll to three shards, highest ordinal first: shard 1 restarts with 3, shard 2 starts; shard 0 still
    # runs with 2 and books n-0, which shard 2 now books too.
    three = {i: _shard_env(cluster, postgres, url, index=i, count=3) for i in range(3)}
    assert cluster.stop("agg2-1") == 0
    cluster.spawn("agg3-2", ["aggregator"], three[2])
    cluster.spawn("agg3-1", ["aggregator"], three[1])
    # Both claim n-0 until shard 0 restarts: wait until shard 2 pulls it and one of the two has had a
    # commit refused because n-0's mark moved under it (the guard this overlap needs; which one loses the
    # race depends on when each ticks, and the one that keeps losing books n-0 once the other stops).
    wait(lambda: "n-0" in _metric_nodes(three[2]["GPUCOST_LISTEN"]), timeout=60.0)
    wait(lambda: any("shard_marks_moved" in (cluster.logs / f"{name}.log").read_text()
                     for name in ("agg2-0", "agg3-2")), timeout=60.0)
    assert cluster.stop("agg2-0") == 0
    cluster.spawn("agg3-0", ["aggregator"], three[0])
    time.sleep(3.0)
    for i in range(3):
        wait(lambda i=i: _metric_nodes(three[i]["GPUCOST_LISTEN"]) == {n for n in NODES if owner(n, 3) == i},
             timeout=60.0)
    # Freeze the agents' counters (final tick and state flush, then a 1 h tick), let the shards book them.
    for n in NODES:
        assert cluster.stop(f"agent-{n}") == 0
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n, GPUCOST_TICK="1h"))
    for n in NODES:
        wait(lambda n=n: _ticked(cluster.agent_env(n)), timeout=60.0)
    time.sleep(3.0)
    agent_alloc: dict[str, float] = {}
    for n in NODES:
        snap = usage(cluster.agent_env(n))
        for h in snap["holders"]:
            agent_alloc[h["namespace"]] = agent_alloc.get(h["namespace"], 0.0) + h["allocated_s"]
    for i in range(3):
        assert cluster.stop(f"agg3-{i}") == 0  # graceful: a final tick, exit 0
    ledger = _ledger(url)
    assert set(ledger) == {"team-a", "team-b"}
    assert agent_alloc["team-a"] > 3 * 9.0  # three 1-GPU pods for more than 9 s each: the run was real
    for ns, seconds in agent_alloc.items():
        assert ledger[ns] == pytest.approx(seconds, abs=1e-6), ns
    _no_password_in_logs(cluster.logs)


def test_paused_leader_resumes_after_losing_the_lease_and_books_nothing(cluster: Cluster,
                                                                         postgres: PgServer) -> None:
    """Two replicas of one shard on one PostgreSQL ledger. The leader is paused (SIGSTOP); the standby
    takes the Lease and the next fencing term and books on. The old leader resumes (SIGCONT) still
    believing it leads (its next renewal is a minute away); its tick's commit is refused by the term, so
    the ledger still equals the agents' own counters to the microsecond."""
    url = postgres.database()
    for n in NODES:
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n))
    ha = {"GPUCOST_LEADER_ELECTION": "true", "GPUCOST_LEASE_NAMESPACE": "default", "GPUCOST_LEASE_DURATION": "3s"}
    old = {**_shard_env(cluster, postgres, url, index=0, count=1), **ha, "GPUCOST_LEASE_RENEW_PERIOD": "60s"}
    new = {**_shard_env(cluster, postgres, url, index=0, count=1), **ha, "GPUCOST_LEASE_RENEW_PERIOD": "0.5s"}
    leader = cluster.spawn("agg-old", ["aggregator"], old)
    wait(lambda: get(f"http://{old['GPUCOST_LISTEN']}/readyz")[0] == 200, timeout=60.0)
    time.sleep(1.0)
    leader.send_signal(signal.SIGSTOP)
    cluster.spawn("agg-new", ["aggregator"], new)
    wait(lambda: get(f"http://{new['GPUCOST_LISTEN']}/readyz")[0] == 200, timeout=60.0)
    time.sleep(1.0)
    leader.send_signal(signal.SIGCONT)
    wait(lambda: "ledger term is" in (cluster.logs / "agg-old.log").read_text(), timeout=30.0)
    assert cluster.stop("agg-old") == 0
    for n in NODES:
        assert cluster.stop(f"agent-{n}") == 0
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n, GPUCOST_TICK="1h"))
    for n in NODES:
        wait(lambda n=n: _ticked(cluster.agent_env(n)), timeout=60.0)
    time.sleep(3.0)
    agent_alloc: dict[str, float] = {}
    for n in NODES:
        for h in usage(cluster.agent_env(n))["holders"]:
            agent_alloc[h["namespace"]] = agent_alloc.get(h["namespace"], 0.0) + h["allocated_s"]
    assert cluster.stop("agg-new") == 0
    ledger = _ledger(url)
    assert set(ledger) == {"team-a", "team-b"} and agent_alloc["team-b"] > 3 * 2.0
    for ns, seconds in agent_alloc.items():
        assert ledger[ns] == pytest.approx(seconds, abs=1e-6), ns
    _no_password_in_logs(cluster.logs)


COMMITTED_SCENARIO = SCENARIO.replace('prices: {"NVIDIA L4": 0.8}\n', """pricing:
  currency: USD
  default_price: 1.0
  models: {"NVIDIA L4": 0.8}
  commitments:
    - {name: l4-1yr, model: "NVIDIA L4", gpus: 6, hourly: 0.40, start: "2026-01-01T00:00:00Z",
       end: "2036-01-01T00:00:00Z"}
""")


def _node_books(url: str) -> dict[str, tuple[float, float]]:
    import psycopg

    with psycopg.connect(url, password=PASSWORD) as pg:
        rows = pg.execute("SELECT node, SUM(allocated_s), SUM(cost) FROM usage WHERE cluster = 'prod' "
                          "GROUP BY node").fetchall()
    return {node: (float(s), float(c)) for node, s, c in rows}


def test_shards_blend_a_commitment_over_the_whole_cluster(postgres: PgServer,
                                                          sim_cluster: SimClusterFactory) -> None:
    """6 L4s committed at 0.40 over the cluster's 12 (6 nodes x 2): c = 6 / 12 = 0.5, so once both shards
    have seen each other's nodes every GPU-hour costs 0.5 x 0.40 + 0.5 x 0.80 = 0.60 on both shards, and
    nothing is unused (6 <= 12). Blending over their own nodes alone, shard 0 (8 GPUs: c = 0.75) would
    charge 0.50 and shard 1 (4 GPUs: c = 1) 0.40, and book 2 unused GPUs."""
    cluster = sim_cluster(COMMITTED_SCENARIO).cluster
    url = postgres.database()
    for n in NODES:
        cluster.spawn(f"agent-{n}", ["agent"], cluster.agent_env(n))
    two = {i: _shard_env(cluster, postgres, url, index=i, count=2) for i in range(2)}
    for i, env in two.items():
        cluster.spawn(f"agg-{i}", ["aggregator"], env)
    for i in range(2):
        try:
            wait(lambda i=i: _metric_nodes(two[i]["GPUCOST_LISTEN"]) == {n for n in NODES if owner(n, 2) == i},
                 timeout=60.0)
        except AssertionError:
            print(_metric_nodes(two[i]["GPUCOST_LISTEN"]), cluster.tail(f"agg-{i}"), cluster.tail("sim"))
            raise
    time.sleep(3.0)  # every node booked at least once: both shards read the whole fleet from the ledger
    before = _node_books(url)
    time.sleep(5.0)
    after = _node_books(url)
    for i in range(2):
        assert cluster.stop(f"agg-{i}") == 0
    import psycopg

    with psycopg.connect(url, password=PASSWORD) as pg:
        unused = pg.execute("SELECT COALESCE(SUM(seconds), 0) FROM unused_commitment").fetchone()
    _no_password_in_logs(cluster.logs)
    assert set(after) == set(NODES)
    for node in NODES:
        seconds = after[node][0] - before.get(node, (0.0, 0.0))[0]
        cost = after[node][1] - before.get(node, (0.0, 0.0))[1]
        assert seconds > 2.0, node  # the pods ran between the two readings
        # money between two readings: the difference of two booked positions, each within half a nano-unit
        assert abs(cost - seconds * 0.60 / 3600) <= 2e-9 + 1e-15, node  # (two rows if an hour turns)
    assert unused is not None and float(unused[0]) == 0.0
