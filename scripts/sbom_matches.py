"""The SBOM inside the image lists exactly the distributions installed beside it (name and version), so it
describes the image's environment and not some other one. Run with the image's own interpreter."""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import sys
from pathlib import Path

SBOM = Path(sys.prefix) / "sbom.cdx.json"


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> int:
    """Compare the SBOM's components with importlib.metadata; exit 1 on a difference."""
    doc = json.loads(SBOM.read_text())
    listed = {(_canon(c["name"]), c.get("version", "")) for c in doc.get("components", [])}
    installed = {(_canon(d.metadata["Name"]), d.version) for d in md.distributions()}
    missing, extra = installed - listed, listed - installed
    if missing or extra:
        print(f"sbom: {SBOM} differs from the environment: not listed {sorted(missing)}, "
              f"not installed {sorted(extra)}", file=sys.stderr)
        return 1
    print(f"sbom: {SBOM} lists the {len(installed)} installed distributions exactly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
