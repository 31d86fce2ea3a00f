"""Benchmarks: ``run.py`` prints figures beside baselines from the same run; the rest are its parts."""
