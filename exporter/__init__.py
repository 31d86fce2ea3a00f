"""gpu-cost-exporter: joins Kubernetes GPU allocation with DCGM utilisation and turns it into money."""

from importlib.metadata import PackageNotFoundError, version

try:  # pyproject.toml is the one place the version is written; the installed metadata carries it here
    __version__ = version("gpu-cost-exporter")
except PackageNotFoundError:  # a bare source tree on sys.path, never installed
    __version__ = "0+unknown"
