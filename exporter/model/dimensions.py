"""The report's dimensions and the booked columns each groups by: one name per dimension (``gpu_model``, as the
metric label and the JSON key), aliases kept for what older commands said (``model``). Plain data, so the CLI can
list them in ``--help`` without loading the aggregator."""

from __future__ import annotations

GROUPS: dict[str, tuple[str, ...]] = {
    "cluster": ("cluster",),
    "namespace": ("namespace",),
    "pod": ("namespace", "pod"),
    "workload": ("namespace", "workload"),
    "node": ("node",),
    "pool": ("pool",),
    "gpu_model": ("gpu_model",),  # the name the metric label and the JSON key carry
    "model": ("gpu_model",),  # kept: an alias of gpu_model
    "priority_class": ("priority_class",),
    "claim": ("namespace", "claim"),  # DRA ResourceClaim ``<namespace>/<name>``; "" for device-plugin holders
    "sharing": ("sharing",),  # none | time-slicing | mps | hami | dra | kai; "" booked before the agent said
    #: The scheduler queue that admitted the pod: scheduler (kueue | volcano | kai | yunikorn | ""), queue (Kueue:
    #: ``<namespace>/<localqueue>``) and Kueue's ClusterQueue; "" for pods no queue admitted (or booked before).
    "queue": ("scheduler", "queue", "cluster_queue"),
    "cluster_queue": ("scheduler", "cluster_queue"),
    "scheduler": ("scheduler",),
    "vendor": ("vendor",),  # nvidia | amd | gaudi | unknown: derived from the model name (``DERIVED``)
}
ALIASES = {"model": "gpu_model"}
#: Every report dimension by its one name (``--help`` and errors list these; an alias is accepted too).
DIMENSIONS = tuple(k for k in GROUPS if k not in ALIASES)
