"""An older commit's ``exporter/`` in a temporary virtualenv, to time it beside this checkout in the same run.

``git archive`` extracts the commit's package (not its bench: the driver is this checkout's); the virtualenv
reuses the installed dependencies (``--system-site-packages``) and the old tree goes first on ``PYTHONPATH``,
so ``import exporter`` is the old code while ``bench`` still comes from this checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Tree:
    """A Python and the ``PYTHONPATH`` that make ``import exporter`` a given tree's code."""

    label: str
    python: str
    pythonpath: str

    def env(self) -> dict[str, str]:
        """The environment to run ``python -m bench.tick_driver`` in for this tree."""
        return dict(os.environ, PYTHONPATH=self.pythonpath)


def this_checkout(repo: Path) -> Tree:
    """This checkout's code, with this interpreter."""
    return Tree(label="new", python=sys.executable, pythonpath=str(repo))


def build_old(repo: Path, commit: str, *, into: Path) -> Tree:
    """Extract ``commit``'s ``exporter/`` under ``into`` and make a virtualenv beside it."""
    tree = into / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "exporter"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    venv = into / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    return Tree(label=f"old {commit}", python=str(venv / "bin" / "python"), pythonpath=f"{tree}{os.pathsep}{repo}")
