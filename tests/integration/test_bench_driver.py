"""The bench's tick driver on real processes: this checkout's aggregator against the simulated agents, every
phase of every steady tick timed; and commit 41fc094's tree, built as the bench builds it, is what the driver
imports when it times the old code (not this checkout's, which the current directory would otherwise put
first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.agents_peer import agents_peer
from bench.aggregator_targets import OLD_COMMIT
from bench.driver_runs import Ledger, run_driver
from bench.old_tree import build_old, this_checkout
from tests.conftest import REPO

NODES = 5


def test_every_phase_of_a_tick_is_timed(tmp_path: Path) -> None:
    with agents_peer() as agents:
        run = run_driver(this_checkout(REPO), agents=agents, nodes=NODES, ticks=3,
                         ledger=Ledger(target=str(tmp_path / "l.db")), cwd=tmp_path, phases=True)
    assert run.agents_up == NODES
    assert Path(run.exporter).resolve().is_relative_to(REPO)
    assert len(run.phases) == 3
    for tick in run.phases[1:]:  # the first proves every node and may book nothing
        phases = ("pull", "pull_cpu", "decode", "book", "commit")
        assert {k: tick[k] > 0 for k in phases} == dict.fromkeys(phases, True)
        assert tick["pull"] + tick["decode"] + tick["book"] + tick["commit"] <= tick["tick"]
    assert 0 < run.rss_after_start_mb <= run.peak_rss_mb


def test_the_old_commit_is_the_code_timed_as_old(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no history to build the old commit from")
    old = build_old(REPO, OLD_COMMIT, into=tmp_path / "old")
    with agents_peer() as agents:
        run = run_driver(old, agents=agents, nodes=NODES, ticks=2, ledger=Ledger(target=str(tmp_path / "l.db")),
                         cwd=tmp_path)
    assert Path(run.exporter).resolve().is_relative_to((tmp_path / "old" / "tree").resolve())
    assert run.agents_up == NODES
    assert run.phases == []
