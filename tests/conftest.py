"""Shared fixtures: paths, scenario writers, a running simulated cluster and a structlog reset."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import structlog

from tests.sim_fixture import SimClusterFactory, SimHandle, running_sim_cluster

REPO = Path(__file__).resolve().parents[1]
#: Real DCGM Exporter captures, each with its source in SOURCES.md next to it.
DCGM_FIXTURES = REPO / "tests" / "fixtures" / "dcgm"


#: Integration and end-to-end tests run real daemons, servers and whole simulations, several times slower on a
#: loaded machine: a test there gets this long unless it says otherwise (``@pytest.mark.timeout``); unit tests
#: keep pyproject's 60 s. A hang still fails its test with a stack trace instead of stalling the run.
INTEGRATION_TIMEOUT = 180
_LONG_RUNNING = (REPO / "tests" / "integration", REPO / "tests" / "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give integration and end-to-end tests without a limit of their own the longer default."""
    for item in items:
        if item.get_closest_marker("timeout") is None and any(d in item.path.parents for d in _LONG_RUNNING):
            item.add_marker(pytest.mark.timeout(INTEGRATION_TIMEOUT))


@pytest.fixture(autouse=True)
def _reset_structlog() -> None:
    structlog.reset_defaults()


@pytest.fixture(name="write_scenario")
def _write_scenario(tmp_path: Path) -> Callable[[str], Path]:
    """Write a scenario YAML (dedented) into the test's temp dir and return its path."""

    def write(text: str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture(name="sim_cluster")
def _sim_cluster(tmp_path: Path) -> Iterator[SimClusterFactory]:
    """Start `gpu-cost-exporter sim-cluster` on a scenario (YAML text) in the test's temp dir, ready to use;
    everything spawned through the handle's `cluster` is killed when the test ends."""
    started: list[SimHandle] = []
    with ExitStack() as stack:
        def start(scenario: str) -> SimHandle:
            handle = stack.enter_context(running_sim_cluster(tmp_path / f"sim-{len(started)}", scenario))
            started.append(handle)
            return handle

        yield start
