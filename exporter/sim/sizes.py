"""Memory sizes as scenario authors write them: whole bytes, or ``6GiB``, ``512MiB``, ``1.5GB``.

Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (KB, MB, GB, TB) powers of 1000, so a
GPU's "80GB" and DCGM's MiB can both be written as they are printed.
"""

from __future__ import annotations

import math
import re

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?$")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_HINT = "use whole bytes, or e.g. 6GiB, 512MiB"


def parse_bytes(value: object) -> int:
    """Bytes in ``value``; raises ``ValueError`` with a readable message when it is not a size."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r} ({_HINT})")
    if isinstance(value, int):
        size = float(value)
    elif isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"not a size: {value!r} ({_HINT})")
        size = value
    elif isinstance(value, str) and (match := _SIZE.match(value.strip())):
        size = float(match.group(1)) * _UNITS[match.group(2) or "B"]
    else:
        raise ValueError(f"not a size: {value!r} ({_HINT})")
    if size < 0:
        raise ValueError(f"not a size: {value!r} (must be >= 0)")
    return round(size)
