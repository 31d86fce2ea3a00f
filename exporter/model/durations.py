"""Durations as people write them: ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` or plain seconds."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ``ValueError`` with a readable message when it is not a duration."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            pos, seconds = 0, 0.0
            for match in _PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNITS[match.group(2)]
                pos = match.end()
            if pos != len(text) or not text:
                raise ValueError(f"not a duration: {value!r} (use e.g. 90s, 15m, 2h)") from None
    else:
        raise ValueError(f"not a duration: {value!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"not a duration: {value!r} (must be finite and >= 0)")
    return seconds


def format_duration(seconds: float) -> str:
    """Short human form: 3725 -> ``1h2m5s``."""
    s = round(seconds)
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            out += f"{s // size}{unit}"
            s %= size
    return out + (f"{s}s" if s or not out else "")
