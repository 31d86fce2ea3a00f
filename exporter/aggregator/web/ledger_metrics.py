"""The ledger's health on /metrics: up, writes that failed by reason, and when it last committed a tick."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


def ledger_families(*, up: bool, write_failures: Mapping[str, int],
                    last_commit: float) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    """``gpucost_ledger_up``, ``gpucost_ledger_write_failures_total{reason}``,
    ``gpucost_ledger_last_commit_timestamp_seconds``."""
    yield GaugeMetricFamily("gpucost_ledger_up", "1 while the ledger's database takes writes (0: no tick is booked "
                            "or acknowledged until it does)", value=1.0 if up else 0.0)
    failures = CounterMetricFamily("gpucost_ledger_write_failures_total", "ledger writes (ticks, compactions, "
                                   "fencing terms) that failed, by reason: disk_full, io_error, read_only, corrupt, "
                                   "locked, unreachable, other", labels=["reason"])
    for reason, n in sorted(write_failures.items()):
        failures.add_metric([reason], n)
    yield failures
    yield GaugeMetricFamily("gpucost_ledger_last_commit_timestamp_seconds", "when the ledger last committed a tick",
                            value=last_commit)
