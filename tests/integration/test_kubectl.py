"""kubectl, the real one, against ``gpu-cost-exporter sim-cluster`` and the kubeconfig it writes.

Discovery, server-side Table printing, get by name, describe (which lists events by field selector),
watches printed as tables, and a Lease created through kubectl: what an operator does to look at the
simulated cluster. Skipped with a reason when no kubectl binary is installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.sim_fixture import running_sim_cluster

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (.ci/run installs it)")

SCENARIO = """\
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: gpu-h100-0, model: "NVIDIA H100 80GB HBM3", gpus: 2}
  - {name: gpu-h100-dra, model: "NVIDIA H100 80GB HBM3", gpus: 1, dra: true}
namespaces:
  - {name: team-a, gpu_quota: 4}
queues:
  - {kind: kueue, name: gpu-cq, gpus: 4, namespaces: [team-a]}
  - {kind: volcano, name: research, gpus: 2, namespaces: [team-a]}
pods:
  - {name: train-0, namespace: team-a, node: gpu-h100-0, gpus: 1, utilization: 0.5}
  - {name: wide-job, namespace: team-a, gpus: 8, pending_reason: Insufficient nvidia.com/gpu}
  - {name: claimer, namespace: team-a, node: gpu-h100-dra, claims: [{name: one-gpu, devices: [gpu-0]}]}
"""


@dataclass(frozen=True, slots=True)
class Kubectl:
    """Runs kubectl with the simulator's kubeconfig and a private cache (discovery is cached on disk)."""

    kubeconfig: Path
    home: Path

    def argv(self, *args: str) -> list[str]:
        return [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.home / "cache"),
                *args]

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig)}

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=60, env=self.env(),
                              input=stdin, check=False)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout


@pytest.fixture(scope="module", name="kubectl")
def _kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    tmp = tmp_path_factory.mktemp("kubectl")
    with running_sim_cluster(tmp / "sim", SCENARIO) as sim:  # one cluster for the module: kubectl only reads
        yield Kubectl(sim.kubeconfig, tmp)


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()[1:]]


def test_get_pods_prints_the_servers_table(kubectl: Kubectl) -> None:
    """Server-side printing: READY and STATUS columns, pending pods Pending, every namespace with -A."""
    out = kubectl("get", "pods", "-A")
    assert out.splitlines()[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = {r[1]: r for r in _rows(out)}
    assert rows["train-0"][:4] == ["team-a", "train-0", "1/1", "Running"]
    assert rows["wide-job"][:4] == ["team-a", "wide-job", "0/1", "Pending"]
    wide = kubectl("get", "pods", "-n", "team-a", "-o", "wide")
    assert "gpu-h100-0" in next(line for line in wide.splitlines() if line.startswith("train-0"))


def test_get_every_kind_by_name_and_short_name(kubectl: Kubectl) -> None:
    nodes = _rows(kubectl("get", "no"))
    assert [r[:2] for r in nodes] == [["gpu-h100-0", "Ready"], ["gpu-h100-dra", "Ready"]]
    assert [r[0] for r in _rows(kubectl("get", "resourceclaims", "-n", "team-a"))] == ["one-gpu"]
    assert len(_rows(kubectl("get", "resourceslices"))) == 1
    assert ["team-a", "Active"] in [r[:2] for r in _rows(kubectl("get", "ns"))]
    quota = kubectl("get", "quota", "-n", "team-a")
    assert "requests.nvidia.com/gpu:" in quota and "/4" in quota
    assert [r[0] for r in _rows(kubectl("get", "cq"))] == ["gpu-cq"]
    assert [r[:2] for r in _rows(kubectl("get", "lq", "-n", "team-a"))] == [["gpu-cq-lq", "gpu-cq"]]
    assert [r[:2] for r in _rows(kubectl("get", "queues.scheduling.volcano.sh"))] == [["research", "Open"]]
    events = kubectl("get", "events", "-n", "team-a")
    assert "FailedScheduling" in events and "pod/wide-job" in events


def test_get_one_object_as_yaml(kubectl: Kubectl) -> None:
    pod = yaml.safe_load(kubectl("get", "pod", "train-0", "-n", "team-a", "-o", "yaml"))
    assert pod["kind"] == "Pod" and pod["spec"]["nodeName"] == "gpu-h100-0"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    node = yaml.safe_load(kubectl("get", "node", "gpu-h100-0", "-o", "yaml"))
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"


def test_describe_pod_and_node(kubectl: Kubectl) -> None:
    """describe selects the pod's events by involvedObject uid; a node's by spec.nodeName for its pods."""
    pod = kubectl("describe", "pod", "wide-job", "-n", "team-a")
    assert "FailedScheduling" in pod and "Insufficient nvidia.com/gpu" in pod
    node = kubectl("describe", "node", "gpu-h100-0")
    assert "train-0" in node and "nvidia.com/gpu" in node


#: Short-lived pods every 15 s from 10 s on: whenever kubectl's watch starts (however loaded the machine),
#: a later one comes and goes while it watches. (The module's cluster is shared and its clock runs on.)
WAVES = SCENARIO + "".join(
    f"  - {{name: wave-{k}, namespace: team-a, node: gpu-h100-0, gpus: 1, start: {10 + 15 * k}s, "
    f"end: {14 + 15 * k}s}}\n" for k in range(12))


def _watch(kubectl: Kubectl, *args: str, until: Callable[[list[list[str]]], bool],
           then: Callable[[], object] | None = None) -> list[list[str]]:
    """Rows ``get -w --output-watch-events`` prints until ``until(rows)``; ``then`` runs once it is started.
    The timer is a safety net for a broken server, not a timing expectation."""
    proc = subprocess.Popen(kubectl.argv("get", *args, "-w", "--output-watch-events"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=kubectl.env())
    killer = threading.Timer(300, proc.kill)
    killer.start()
    seen: list[list[str]] = []
    try:
        if then is not None:
            then()
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line.split())
            if until(seen):
                break
    finally:
        killer.cancel()
        proc.kill()
        proc.wait(timeout=10)
    assert until(seen), f"kubectl get {' '.join(args)} -w printed {seen}"
    return seen


def _came_and_went(rows: list[list[str]]) -> bool:
    """Some wave pod was printed ADDED and, after that, DELETED."""
    added: set[str] = set()
    for r in rows:
        if r[:1] == ["ADDED"] and r[1].startswith("wave-"):
            added.add(r[1])
        if r[:1] == ["DELETED"] and r[1] in added:
            return True
    return False


def test_watch_prints_added_and_deleted_rows(tmp_path: Path) -> None:
    """On a cluster of its own: the watch prints the server's table rows, a running pod ADDED, and a pod
    that ends DELETED (waves of pods, so no window of wall-clock time has to be hit)."""
    with running_sim_cluster(tmp_path / "sim", WAVES) as sim:
        kubectl = Kubectl(sim.kubeconfig, tmp_path)
        seen = _watch(kubectl, "pods", "-n", "team-a", until=_came_and_went)
    assert seen[0][:3] == ["EVENT", "NAME", "READY"]
    assert ["ADDED", "train-0", "1/1", "Running"] in [r[:4] for r in seen]


@pytest.mark.parametrize(("args", "row"), [
    (("resourceclaims", "-n", "team-a"), ["ADDED", "one-gpu"]),
    (("resourceslices",), ["ADDED", "gpu-h100-dra-gpu.nvidia.com-"]),
    (("namespaces",), ["ADDED", "team-a", "Active"]),
    (("resourcequotas", "-n", "team-a"), ["ADDED", "gpu-quota"]),
    (("clusterqueues",), ["ADDED", "gpu-cq"]),
    (("queues.scheduling.volcano.sh",), ["ADDED", "research", "Open"]),
])
def test_watch_every_kind(kubectl: Kubectl, args: tuple[str, ...], row: list[str]) -> None:
    """A watch first prints what exists, as ADDED rows of the server's table."""
    def found(rows: list[list[str]]) -> bool:  # the last cell may be a prefix (generated names)
        n = len(row)
        return any(len(r) >= n and r[: n - 1] == row[:-1] and r[n - 1].startswith(row[-1]) for r in rows)
    seen = _watch(kubectl, *args, until=found)
    assert seen[0][0] == "EVENT"


def test_watch_leases_prints_one_created_meanwhile(kubectl: Kubectl) -> None:
    """A Lease created while the watch runs is printed ADDED (live, or listed if the watch started later)."""
    lease = LEASE.replace("NAME", "watched").replace("HOLDER", "operator-2")
    seen = _watch(kubectl, "leases", "-n", "team-a", until=lambda rows: ["ADDED", "watched"] in [r[:2] for r in rows],
                  then=lambda: kubectl("create", "--validate=false", "-f", "-", stdin=lease))
    assert seen[0][:2] == ["EVENT", "NAME"]


@pytest.mark.parametrize(("args", "expected"), [
    (("resourceclaim", "one-gpu", "-n", "team-a"),
     ["Kind:         ResourceClaim", "Device Class Name:  gpu.nvidia.com", "Device:   gpu-0", "Reserved For:"]),
    (("resourceslices",), ["Kind:         ResourceSlice", "Driver:       gpu.nvidia.com", "Name:       gpu-0"]),
    (("namespace", "team-a"), ["Status:       Active", "Resource Quotas", "requests.nvidia.com/gpu"]),
    (("resourcequota", "gpu-quota", "-n", "team-a"), ["Name:                    gpu-quota",
                                                      "requests.nvidia.com/gpu"]),
    (("clusterqueue", "gpu-cq"), ["Kind:         ClusterQueue", "Nominal Quota:  4"]),
    (("queues.scheduling.volcano.sh", "research"), ["Kind:         Queue", "State:             Open"]),
])
def test_describe_every_kind(kubectl: Kubectl, args: tuple[str, ...], expected: list[str]) -> None:
    out = kubectl("describe", *args)
    for text in expected:
        assert text in out, f"{text!r} not in:\n{out}"


def test_describe_lease(kubectl: Kubectl) -> None:
    kubectl("create", "--validate=false", "-f", "-",
            stdin=LEASE.replace("NAME", "described").replace("HOLDER", "operator-3"))
    out = kubectl("describe", "lease", "described", "-n", "team-a")
    assert "Kind:         Lease" in out and "Holder Identity:         operator-3" in out


LEASE = textwrap.dedent("""\
    apiVersion: coordination.k8s.io/v1
    kind: Lease
    metadata: {name: NAME, namespace: team-a}
    spec: {holderIdentity: HOLDER, leaseDurationSeconds: 15}
    """)


def test_lease_created_with_kubectl_is_listed(kubectl: Kubectl) -> None:
    kubectl("create", "--validate=false", "-f", "-", stdin=LEASE.replace("NAME", "ops-check").replace(
        "HOLDER", "operator-1"))
    rows = _rows(kubectl("get", "leases", "-n", "team-a"))
    assert ["ops-check", "operator-1"] in [r[:2] for r in rows]
