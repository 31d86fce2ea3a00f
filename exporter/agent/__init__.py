"""The node agent: DCGM Exporter x kubelet pod-resources -> cumulative per-pod GPU usage counters."""
