"""The contract's DRA claim forms (``resource_claims``, pod ``claims`` as requests or ``shared``) and the
``mps: N`` / ``hami: true`` node forms: what they allocate, deterministically, and one-line errors."""

from __future__ import annotations

import pytest

from exporter.sim.scenario import ScenarioError, parse_scenario

HEAD = """
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: dra, model: "NVIDIA H100 80GB HBM3", gpus: 3, dra: true, mig: {2: [3g.40gb, 3g.40gb]}}
  - {name: dra2, model: "NVIDIA H100 80GB HBM3", gpus: 1, dra: true}
"""


def devices(text: str) -> dict[str, list[tuple[str, ...]]]:
    return {p.name: [c.devices for c in p.claims] for p in parse_scenario(HEAD + text, "s.yaml").pods}


def test_own_claims_take_the_lowest_free_device_in_start_order() -> None:
    """a (0-30m) takes gpu-0; b (10m-) finds gpu-0 busy and takes gpu-1; c (30m-) finds gpu-0 free again.
    MIG requests take GPU 2's 3g.40gb instances in carve order."""
    got = devices("""pods:
  - {name: b, namespace: n, node: dra, start: 10m, claims: [{device_class: gpu.nvidia.com}]}
  - {name: a, namespace: n, node: dra, end: 30m, claims: [{device_class: gpu.nvidia.com, count: 1}]}
  - {name: c, namespace: n, node: dra, start: 30m, claims: [{device_class: gpu.nvidia.com}]}
  - {name: m1, namespace: n, node: dra, claims: [{device_class: mig.nvidia.com, profile: 3g.40gb}]}
  - {name: m2, namespace: n, node: dra, claims: [{device_class: mig.nvidia.com, profile: 3g.40gb}]}
""")
    assert got["a"] == [("gpu-0",)] and got["b"] == [("gpu-1",)] and got["c"] == [("gpu-0",)]
    assert got["m1"] == [("gpu-2-mig-3g40gb-9-1",)] and got["m2"] == [("gpu-2-mig-3g40gb-9-2",)]


def test_a_shared_claim_holds_its_device_from_first_pod_to_last() -> None:
    """shared is used by s1 (0-10m) and s2 (50m-): allocated 0-60m on gpu-0, so o (20m-30m) gets gpu-1.
    Both pods hold the same claim object; the count of 2 gives it two devices."""
    scenario = parse_scenario(HEAD + """resource_claims: [{name: shared, namespace: n, device_class: gpu.nvidia.com}]
pods:
  - {name: s1, namespace: n, node: dra, end: 10m, claims: [{shared: shared}]}
  - {name: o, namespace: n, node: dra, start: 20m, end: 30m, claims: [{device_class: gpu.nvidia.com}]}
  - {name: s2, namespace: n, node: dra, start: 50m, claims: [{shared: shared}]}
""", "s.yaml")
    s1, o, s2 = scenario.pods
    assert s1.claims[0] is s2.claims[0] and s1.claims[0].devices == ("gpu-0",)
    assert s1.claims[0].name == "shared" and s1.claims[0].pod_claim is None
    assert o.claims[0].devices == ("gpu-1",)


def test_two_own_claims_of_one_pod_have_distinct_names_and_are_stable() -> None:
    """The pod claim names are gpu and gpu-1; the generated names are the same on every parse."""
    text = HEAD + "pods: [{name: p, namespace: n, node: dra, claims: [{device_class: gpu.nvidia.com}, " \
                  "{device_class: gpu.nvidia.com}]}]\n"
    first, again = (parse_scenario(text, "s.yaml").pods[0].claims for _ in range(2))
    assert [c.pod_claim for c in first] == ["gpu", "gpu-1"]
    assert [c.devices for c in first] == [("gpu-0",), ("gpu-1",)]
    assert [c.name for c in first] == [c.name for c in again]
    assert first[0].name.startswith("p-gpu-") and first[1].name.startswith("p-gpu-1-")


def test_explicit_mig_claims_get_the_mig_class() -> None:
    (pod,) = parse_scenario(HEAD + "pods: [{name: p, namespace: n, node: dra, claims: "
                                   "[{name: c, devices: [gpu-2-mig-3g40gb-9-1]}]}]\n", "s.yaml").pods
    assert pod.claims[0].device_class == "mig.nvidia.com"


def test_node_mps_and_hami_forms() -> None:
    scenario = parse_scenario("""prices: {"NVIDIA L4": 1.0}
nodes: [{name: m, model: "NVIDIA L4", gpus: 1, mps: 4}, {name: h, model: "NVIDIA L4", gpus: 1, hami: true},
        {name: old, model: "NVIDIA L4", gpus: 1, sharing: mps, replicas: 2}]
""", "s.yaml")
    assert [(n.sharing, n.time_slicing) for n in scenario.nodes] == [("mps", 4), ("hami", None), ("mps", 2)]


POD = "{name: p, namespace: n, node: dra, claims: [CLAIM]}"


@pytest.mark.parametrize(("extra", "message"), [
    ("pods: [" + POD.replace("CLAIM", "{device_class: tpu.example.com}") + "]",
     "s.yaml: pods[0].claims[0].device_class: expected one of gpu.nvidia.com, mig.nvidia.com, got 'tpu.example.com'"),
    ("pods: [" + POD.replace("CLAIM", "{device_class: mig.nvidia.com}") + "]",
     "s.yaml: pods[0].claims[0].profile: expected a non-empty string"),
    ("pods: [" + POD.replace("CLAIM", "{device_class: mig.nvidia.com, profile: big}") + "]",
     "s.yaml: pods[0].claims[0].profile: not a MIG profile: 'big'"),
    ("pods: [" + POD.replace("CLAIM", "{device_class: gpu.nvidia.com, profile: 3g.40gb}") + "]",
     "s.yaml: pods[0].claims[0].profile: only for mig.nvidia.com"),
    ("pods: [" + POD.replace("CLAIM", "{device_class: gpu.nvidia.com, count: 0}") + "]",
     "s.yaml: pods[0].claims[0].count: expected an integer >= 1, got 0"),
    ("pods: [" + POD.replace("CLAIM", "{device_class: gpu.nvidia.com, count: 3}") + "]",
     "s.yaml: pods[0].claims[0].count: node dra has only 2 free gpu.nvidia.com at 0s (3 asked)"),
    ("pods: [" + POD.replace("CLAIM", "{device_class: mig.nvidia.com, profile: 1g.10gb}") + "]",
     "s.yaml: pods[0].claims[0].count: node dra has only 0 free mig.nvidia.com 1g.10gb at 0s (1 asked)"),
    ("pods: [" + POD.replace("CLAIM", "{device_class: gpu.nvidia.com, admin_access: yes please}") + "]",
     "s.yaml: pods[0].claims[0].admin_access: expected true or false"),
    ("pods: [" + POD.replace("CLAIM", "{shared: nope}") + "]",
     "s.yaml: pods[0].claims[0].shared: no resource_claims entry 'nope' in namespace n"),
    ("pods: [" + POD.replace("CLAIM", "{shared: c, count: 1}") + "]", "s.yaml: pods[0].claims[0].count: unknown field"),
    ("pods: [" + POD.replace("CLAIM", "{count: 1}") + "]",
     "s.yaml: pods[0].claims[0]: give device_class (with count), shared: <resource_claims name>, or name and devices"),
    ("resource_claims: [{name: c, namespace: n, device_class: gpu.nvidia.com}]\npods: ["
     + POD.replace("CLAIM", "{shared: c}") + ", {name: q, namespace: n, node: dra2, claims: [{shared: c}]}]",
     "s.yaml: pods[1].claims[0].shared: claim n/c is allocated on node dra, not dra2"),
    ("resource_claims: [{name: c, namespace: n, device_class: gpu.nvidia.com}]",
     "s.yaml: resource_claims[0]: no pod uses claim n/c"),
    ("resource_claims: [{name: c, namespace: n, device_class: gpu.nvidia.com, count: 4}]\npods: ["
     + POD.replace("CLAIM", "{shared: c}") + "]",
     "s.yaml: resource_claims[0].count: node dra has only 2 free gpu.nvidia.com at 0s (4 asked)"),
    ("resource_claims: [{name: c, device_class: gpu.nvidia.com}]", "s.yaml: resource_claims[0].namespace: expected"),
    ("resource_claims: [{name: c, namespace: n, device_class: gpu.nvidia.com}, "
     "{name: c, namespace: n, device_class: gpu.nvidia.com}]", "s.yaml: resource_claims[1].name: duplicate claim n/c"),
    ("resource_claims: [{name: c, namespace: n, device_class: gpu.nvidia.com, size: 1}]",
     "s.yaml: resource_claims[0].size: unknown field"),
])
def test_claim_errors_name_the_field(extra: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(HEAD + extra + "\n", "s.yaml")
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize(("node", "message"), [
    ("{name: x, model: m, gpus: 1, mps: 4, time_slicing: 2}", "s.yaml: nodes[0].mps: give mps or time_slicing"),
    ("{name: x, model: m, gpus: 1, mps: 1}", "s.yaml: nodes[0].mps: expected an integer >= 2, got 1"),
    ("{name: x, model: m, gpus: 1, hami: maybe}", "s.yaml: nodes[0].hami: expected true or false, got 'maybe'"),
    ("{name: x, model: m, gpus: 1, hami: true, mps: 2}", "s.yaml: nodes[0].hami: HAMi is its own device plugin"),
    ("{name: x, model: m, gpus: 1, mps: 2, sharing: hami}", "s.yaml: nodes[0].sharing: 'hami' contradicts"),
])
def test_node_form_errors_name_the_field(node: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(f"default_price: 1.0\nnodes: [{node}]\n", "s.yaml")
    assert str(info.value).startswith(message), str(info.value)
