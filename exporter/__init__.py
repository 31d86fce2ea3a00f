"""gpu-cost-exporter: joins Kubernetes GPU allocation with DCGM utilisation and turns it into money."""

__version__ = "0.1.0"
