"""kubectl against ``sim-cluster`` on a KAI node: the reservation pod KAI's binder runs is a pod like any other
(``kubectl get pods -A`` lists it, Running, in ``kai-resource-reservation``), and the ConfigMap of a fraction
pod holds its ``GPU_PORTION``. Skipped with a reason when no kubectl binary is installed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.integration.test_kubectl import KUBECTL, Kubectl, _rows
from tests.sim_fixture import running_sim_cluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (.ci/run installs it)")

SCENARIO = """\
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n-kai, model: "NVIDIA H100 80GB HBM3", gpus: 1, scheduler: kai}]
pods:
  - {name: a, namespace: team-a, node: n-kai, kai: {fraction: 0.5}, utilization: 0.5}
"""


@pytest.fixture(scope="module", name="kubectl")
def _kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    tmp = tmp_path_factory.mktemp("kubectl-kai")
    with running_sim_cluster(tmp / "sim", SCENARIO) as sim:
        yield Kubectl(sim.kubeconfig, tmp)


def test_get_pods_shows_the_reservation_pod(kubectl: Kubectl) -> None:
    rows = {r[1]: r for r in _rows(kubectl("get", "pods", "-A"))}
    (name,) = [n for n in rows if n.startswith("gpu-reservation-")]
    assert rows[name][:4] == ["kai-resource-reservation", name, "1/1", "Running"]
    assert rows["a"][:4] == ["team-a", "a", "1/1", "Running"]
    res = yaml.safe_load(kubectl("get", "pod", name, "-n", "kai-resource-reservation", "-o", "yaml"))
    assert res["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    pod = yaml.safe_load(kubectl("get", "pod", "a", "-n", "team-a", "-o", "yaml"))
    assert pod["metadata"]["labels"]["runai-gpu-group"] == res["metadata"]["labels"]["runai-gpu-group"]


def test_get_configmap_of_the_fraction(kubectl: Kubectl) -> None:
    (row,) = _rows(kubectl("get", "cm", "-n", "team-a"))
    assert row[1] == "2"  # NVIDIA_VISIBLE_DEVICES and GPU_PORTION
    cm = yaml.safe_load(kubectl("get", "configmap", row[0], "-n", "team-a", "-o", "yaml"))
    assert cm["data"]["GPU_PORTION"] == "0.50"
