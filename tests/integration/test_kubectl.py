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
from collections.abc import Iterator
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
  - {name: late-0, namespace: team-a, node: gpu-h100-0, gpus: 1, start: 8s, end: 10s, utilization: 0.1}
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


def test_watch_prints_added_and_deleted_rows(kubectl: Kubectl) -> None:
    """late-0 runs from 8 s to 10 s of the scenario: the watch prints it coming and going."""
    proc = subprocess.Popen(kubectl.argv("get", "pods", "-n", "team-a", "-w", "--output-watch-events"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kubectl.env())
    killer = threading.Timer(90, proc.kill)  # a safety net only: the loop below ends on DELETED late-0
    killer.start()
    seen: list[list[str]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line.split())
            if seen[-1][:2] == ["DELETED", "late-0"]:
                break
    finally:
        killer.cancel()
        proc.kill()
        proc.wait(timeout=10)
    assert seen[0][:3] == ["EVENT", "NAME", "READY"]
    assert ["ADDED", "train-0", "1/1", "Running"] in [r[:4] for r in seen]
    assert ["DELETED", "late-0"] in [r[:2] for r in seen]


def test_lease_created_with_kubectl_is_listed(kubectl: Kubectl) -> None:
    lease = textwrap.dedent("""\
        apiVersion: coordination.k8s.io/v1
        kind: Lease
        metadata: {name: ops-check, namespace: team-a}
        spec: {holderIdentity: operator-1, leaseDurationSeconds: 15}
        """)
    kubectl("create", "--validate=false", "-f", "-", stdin=lease)
    rows = _rows(kubectl("get", "leases", "-n", "team-a"))
    assert [r[:2] for r in rows] == [["ops-check", "operator-1"]]
