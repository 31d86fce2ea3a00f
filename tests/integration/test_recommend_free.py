"""Free capacity through the whole chain: the simulator's Kubernetes API advertises each node's devices
(``status.allocatable``), the real agents and aggregator book the hour into a ledger (the devices each node
advertised, its unallocated time), and ``gpu-cost-exporter recommend`` offers what nobody held.

Cluster (1 simulated hour, 15 s ticks), prices per GPU-hour: A100-80GB 2.50, L4 0.80. A month is 730 hours.

* a100: one whole A100 held by serve (8 %, 6 GiB peak).
* a100-free: one A100 carved into seven 1g.10gb instances nobody holds: the node's whole GPU is unallocated
  (3600 s at 2.50), so 7 instance-hours are free at 2.50 x 1/7 an hour.
* l4: one L4 held by encode (90 %: busy, no row), so the L4 is offered as held.

serve: p95 bucket 10 %: 0.10 x 312 = 31.2 TFLOPS <= 0.8 x 312 / 7 = 35.66 on a 1g.10gb, 6 GiB x 1.2 =
7.73e9 <= 10e9 bytes -> mig 1g.10gb: now 2.50 x 730 = 1825.00, after 2.50 / 7 x 730 = 260.71, savings
2.50 x 730 - 2.50 / 7 x 730 = 1564.29 (the held L4 would save 2.50 x 730 - 0.80 x 730 = 1241.00).
"""

from __future__ import annotations

import sqlite3

from tests.integration.test_recommend_scenarios import A100, L4, _recommend, _simulate

SCENARIO = f"""
tick: 15s
duration: 1h
prices: {{"{A100}": 2.5, "{L4}": 0.8}}
nodes:
  - {{name: a100, model: "{A100}", gpus: 1}}
  - {{name: a100-free, model: "{A100}", gpus: 1,
     mig: {{0: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]}}}}
  - {{name: l4, model: "{L4}", gpus: 1}}
pods:
  - {{name: serve-0, namespace: infer, node: a100, owner: {{kind: Deployment, name: serve}}, gpus: 1,
     utilization: 0.08, framebuffer: 6GiB}}
  - {{name: encode-0, namespace: media, node: l4, owner: {{kind: Deployment, name: encode}}, gpus: 1,
     utilization: 0.9, framebuffer: 10GiB}}
"""


def test_inference_goes_to_the_free_mig_instance_the_cluster_pays_for() -> None:
    ledger = _simulate(SCENARIO, "free.yaml")
    rows = _recommend(ledger)
    assert set(rows) == {"serve"}
    serve = rows["serve"]
    assert serve["action"] == "mig"
    assert serve["target"] == {"gpu_model": A100, "mig_profile": "1g.10gb", "gpus": 1, "replicas": None}
    assert serve["monthly_cost_now"] == 1825.00
    assert serve["monthly_cost_after"] == round(2.50 / 7 * 730, 2) == 260.71
    assert serve["monthly_savings"] == round(2.50 * 730 - 2.50 / 7 * 730, 2) == 1564.29
    assert serve["reason"].endswith("; the cluster has it free")
    conn = sqlite3.connect(ledger)
    try:
        advertised = conn.execute("SELECT node, gpu_model, mig_profile, replicas, MAX(devices) FROM node_devices "
                                  "GROUP BY node, gpu_model, mig_profile, replicas ORDER BY node").fetchall()
    finally:
        conn.close()
    assert advertised == [("a100", A100, "", 0, 1), ("a100-free", A100, "1g.10gb", 0, 7), ("l4", L4, "", 0, 1)]
