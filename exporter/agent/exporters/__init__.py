"""What the node's exporters say: their scrapes read into device records and per-pod series.

This package owns reading NVIDIA's dcgm-exporter (``dcgm``: device series, metric names and units, the
device-level series told apart from per-pod copies), AMD's device-metrics-exporter (``amd``: whole GPUs and
compute partitions), Intel's gaudi-metric-exporter (``gaudi``) and the per-pod utilisation series of
dcgm-exporter and HAMi's vGPU monitor (``per_pod``). Each exporter's quirks stay in its module. Import rule:
only ``exporter.model``, ``exporter.clients``, ``exporter.logs`` and this package; never ``holders`` nor the
agent's top-level modules, which wire it.
"""
