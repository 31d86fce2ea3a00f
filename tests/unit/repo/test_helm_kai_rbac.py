"""The agent's grant for KAI Scheduler fractions: ConfigMaps (GPU_PORTION of gpu-memory pods) only when asked, and
only with the pod watch that finds the sharers; the reservation namespace reaches the agent."""

from __future__ import annotations

from tests.unit.repo.helm_render import FULL, render
from tests.unit.repo.test_helm_sharing_rbac import rules_of


def test_configmaps_only_when_asked_and_with_the_pod_watch() -> None:
    assert not any(r == "configmaps" for _g, r, _v in rules_of({}))
    assert ("", "configmaps", ("get",)) in rules_of({"agent": {"kai": {"configMaps": True}}})
    assert not any(r == "configmaps" for _g, r, _v in rules_of({"agent": {"watchPods": False,
                                                                          "kai": {"configMaps": True}}}))


def test_reservation_namespace_reaches_the_agent() -> None:
    (ds,) = [d for d in render({"agent": {"kai": {"reservationNamespace": "runai-reservation"}}}).of_kind("DaemonSet")
             if d["metadata"]["name"] == f"{FULL}-agent"]
    env = {e["name"]: e.get("value") for c in ds["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
    assert env["GPUCOST_KAI_RESERVATION_NAMESPACE"] == "runai-reservation"
