"""The simulator's other accelerators and per-pod series: AMD Instinct nodes (ROCm device plugin IDs and
device-metrics-exporter's format, compute partitions included), Intel Gaudi nodes (serial-number IDs and
gaudi-metric-exporter's format), and the per-pod utilisation dcgm-exporter and HAMi's vGPU monitor serve."""
