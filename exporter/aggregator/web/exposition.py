"""Text exposition 0.0.4 of metric families, with escaped label strings cached between scrapes.

With tens of thousands of pods, prometheus-client's generic per-sample formatting dominates a scrape;
this renderer writes the same samples (a test compares them with ``generate_latest``). A family object
rendered at the last scrape and handed in again (the collector reuses the families whose sources did not
change: ``held_cache``) is served from its bytes of then, not formatted again.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

Family = GaugeMetricFamily | CounterMetricFamily
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def _fmt(value: float) -> str:
    text = repr(float(value))
    if text[-1] in "nf":  # nan, inf, -inf
        return "NaN" if text == "nan" else ("+Inf" if text == "inf" else "-Inf")
    return text


class ExpositionRenderer:
    """Renders families to text; caches escaped label strings between scrapes (bounded)."""

    MAX_CACHE = 200_000

    def __init__(self) -> None:
        self._labels: dict[str, dict[tuple[str, ...], str]] = {}
        self._size = 0
        self._bodies: dict[int, tuple[Family, bytes]] = {}  # id -> (the family, kept alive so ids stay unique; text)

    def render(self, families: list[Family]) -> bytes:
        """The families as one scrape body, in the format ``generate_latest`` writes; the cache is dropped when full.
        Only the last scrape's families are remembered, so the byte cache holds at most one scrape."""
        if self._size > self.MAX_CACHE:
            self._labels.clear()
            self._size = 0
        bodies: dict[int, tuple[Family, bytes]] = {}
        for fam in families:
            seen = self._bodies.get(id(fam))
            bodies[id(fam)] = seen if seen is not None and seen[0] is fam else (fam, self._family(fam))
        self._bodies = bodies
        return b"".join(bodies[id(fam)][1] for fam in families)

    def _family(self, fam: Family) -> bytes:
        """One family's text."""
        out: list[str] = []
        append = out.append
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        append(f"# HELP {name} {fam.documentation.translate(_ESCAPES)}\n# TYPE {name} {fam.type}\n")
        cache = self._labels.setdefault(fam.name, {})
        for sample in fam.samples:
            labels = sample.labels
            if not labels:
                append(f"{sample.name} {_fmt(sample.value)}\n")
                continue
            values = tuple(labels.values())
            text = cache.get(values)
            if text is None:
                text = ",".join(f'{k}="{str(v).translate(_ESCAPES)}"' for k, v in labels.items())
                cache[values] = text
                self._size += 1
            append(f"{sample.name}{{{text}}} {_fmt(sample.value)}\n")
        return "".join(out).encode()
