"""Licence gate over an installed Python environment: every distribution must be under a licence on the
allow-list, read from its own metadata (License-Expression, else a recognisable License field, else the
trove classifiers), so a new dependency under another licence fails CI before it ships in the image.

``python scripts/check_licences.py`` checks every distribution of the interpreter running it (a clean
virtualenv or the image's /opt/gpu-cost-exporter); ``--closure gpu-cost-exporter`` checks only that
package and what it requires at run time (for a development environment holding test tools too).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from dataclasses import dataclass

#: Licence families the product may ship (SPDX ids; "BSD" is the unversioned trove classifier): the permissive
#: family as a whole, not the ids today's pins happen to carry, so that a dependency's next release moving to a
#: sibling licence (cffi 2.x: MIT-0) passes wherever pip installs it; a copyleft or unknown licence still fails.
ALLOWED = frozenset({"Apache-2.0", "MIT", "MIT-0", "BSD", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "PSF-2.0",
                     "Python-2.0", "ISC", "Zlib", "Unlicense", "BSL-1.0", "MPL-2.0"})

#: Distributions whose metadata names no recognisable licence, with the licence their LICENSE file states
#: (checked by reading it) and why they are let through. Empty: every runtime dependency declares one.
EXCEPTIONS: dict[str, str] = {}

#: Free-text License fields and trove classifiers seen in the wild, mapped to SPDX ids.
_TEXT = {
    "apache 2.0": "Apache-2.0", "apache-2.0": "Apache-2.0", "apache license 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0", "mit": "MIT", "mit license": "MIT", "bsd": "BSD",
    "bsd license": "BSD", "3-clause bsd license": "BSD-3-Clause", "bsd-3-clause": "BSD-3-Clause",
    "bsd-2-clause": "BSD-2-Clause", "psf-2.0": "PSF-2.0", "psf": "PSF-2.0",
    "python software foundation license": "PSF-2.0", "isc": "ISC", "isc license (iscl)": "ISC",
    "mpl-2.0": "MPL-2.0", "mozilla public license 2.0 (mpl 2.0)": "MPL-2.0",
    "mit-0": "MIT-0", "mit no attribution license (mit-0)": "MIT-0", "0bsd": "0BSD",
    "zero-clause bsd (0bsd)": "0BSD", "zlib/libpng license": "Zlib", "the unlicense (unlicense)": "Unlicense",
    "boost software license 1.0 (bsl-1.0)": "BSL-1.0",
}


@dataclass(frozen=True)
class Verdict:
    """One distribution's licence as its metadata states it, and whether that passes the allow-list."""

    name: str
    version: str
    licence: str
    allowed: bool


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _expression_allowed(expr: str) -> bool:
    """An SPDX expression passes when every AND term has at least one allowed OR alternative."""
    flat = expr.replace("(", " ").replace(")", " ")
    return all(any(alt.strip() in ALLOWED for alt in term.split(" OR ")) for term in flat.split(" AND "))


def _field(dist: md.Distribution, key: str) -> str:
    """A metadata field's first value, "" when absent (missing keys are not an error across versions)."""
    return str((dist.metadata.get_all(key) or [""])[0]).strip()


def licence_of(dist: md.Distribution) -> str | None:
    """The SPDX expression this distribution's metadata amounts to, or None when it names none we know."""
    meta = dist.metadata
    if _field(dist, "License-Expression"):
        return _field(dist, "License-Expression")
    text = _field(dist, "License").lower()
    if text in _TEXT:
        return _TEXT[text]
    found = [_TEXT.get(c.rsplit("::", 1)[-1].strip().lower(), c.rsplit("::", 1)[-1].strip())
             for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return " OR ".join(dict.fromkeys(found)) or None  # several licence classifiers: a choice (dual licence)


def judge(dist: md.Distribution) -> Verdict:
    """The verdict for one distribution; a listed exception passes under the licence its entry gives."""
    name, version = dist.metadata["Name"], dist.version
    if _canon(name) in EXCEPTIONS:
        return Verdict(name, version, f"exception: {EXCEPTIONS[_canon(name)]}", True)
    licence = licence_of(dist)
    return Verdict(name, version, licence or "(none stated)", licence is not None and _expression_allowed(licence))


def closure(root: str) -> list[md.Distribution]:
    """``root`` and everything it requires at run time (no extras), as installed here."""
    from packaging.requirements import Requirement  # present wherever pip or pytest is; not in the image

    seen: dict[str, md.Distribution] = {}
    todo = [root]
    while todo:
        name = _canon(todo.pop())
        if name in seen:
            continue
        seen[name] = dist = md.distribution(name)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def installed() -> list[md.Distribution]:
    """Every distribution on this interpreter's path, once each (first on the path wins, as at import)."""
    out: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        out.setdefault(_canon(dist.metadata["Name"]), dist)
    return list(out.values())


def main(argv: list[str] | None = None) -> int:
    """Print one line per distribution; exit 1 when any is not allowed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--closure", metavar="DIST", help="check DIST and its runtime requirements only")
    args = parser.parse_args(argv)
    verdicts = sorted((judge(d) for d in (closure(args.closure) if args.closure else installed())),
                      key=lambda v: _canon(v.name))
    for v in verdicts:
        print(f"{'ok ' if v.allowed else 'BAD'} {v.name}=={v.version}: {v.licence}")
    bad = [v.name for v in verdicts if not v.allowed]
    if bad:
        print(f"licence check: not on the allow-list ({', '.join(sorted(ALLOWED))}): {', '.join(bad)}",
              file=sys.stderr)
        return 1
    print(f"licence check: {len(verdicts)} distributions, all allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
