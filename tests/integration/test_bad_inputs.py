"""Every bad input a person can hand the command line: one line on stderr naming the file or setting, exit 2,
nothing created, changed or removed. Real processes of ``python -m exporter``, one per row.

Rows that need a file the caller cannot read run the command as UID 0 without capabilities (setpriv) when the
tests run as root, as root with CAP_DAC_OVERRIDE reads any file whatever its mode.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.timeout(120)
#: Root with every capability dropped, as the chart runs the agent: the owner's mode bits apply to it like to
#: anyone (no CAP_DAC_OVERRIDE), so a mode-000 file is unreadable, while the interpreter -- which may live where
#: only root may read, a pyenv under /root -- still starts.
WITHOUT_CAPABILITIES = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]


@dataclass(frozen=True)
class Case:
    """``args`` (``{d}`` = the scratch directory) and ``env``; the stderr line must contain ``says``."""

    args: str
    says: str
    env: dict[str, str] = field(default_factory=dict)
    unprivileged: bool = False  # needs a caller that cannot read a mode-000 file


AGG = "aggregator --listen 127.0.0.1:0 --ledger {d}/new.db"
AGENT = "agent --node-name n0 --listen 127.0.0.1:0 --state-dir {d}/state"
CASES = {
    # a ledger path that is not a ledger file
    "report-ledger-directory": Case("report --ledger {d}/dir", "--ledger {d}/dir: is a directory"),
    "report-ledger-fifo": Case("report --ledger {d}/fifo", "--ledger {d}/fifo: is not a regular file"),
    "report-ledger-unreadable": Case("report --ledger {d}/locked.db", "--ledger {d}/locked.db: cannot be read",
                                     unprivileged=True),
    "report-ledger-missing": Case("report --ledger {d}/none.db", "--ledger {d}/none.db: no such ledger"),
    "recommend-ledger-directory": Case("recommend --ledger {d}/dir", "--ledger {d}/dir: is a directory"),
    "recommend-ledger-fifo": Case("recommend --ledger {d}/fifo", "--ledger {d}/fifo: is not a regular file"),
    "export-ledger-directory": Case("export --format focus-csv --all --ledger {d}/dir",
                                    "--ledger {d}/dir: is a directory"),
    "export-ledger-fifo": Case("export --format focus-csv --all --ledger {d}/fifo",
                               "--ledger {d}/fifo: is not a regular file"),
    "pricing-ledger-directory": Case("pricing --format focus-price-list --pricing-file {d}/p.yaml --ledger {d}/dir",
                                     "--ledger {d}/dir: is a directory"),
    "aggregator-ledger-directory": Case("aggregator --listen 127.0.0.1:0 --ledger {d}/dir",
                                        "setting ledger (GPUCOST_LEDGER): {d}/dir: is a directory"),
    "aggregator-ledger-fifo": Case("aggregator --listen 127.0.0.1:0 --ledger {d}/fifo",
                                   "setting ledger (GPUCOST_LEDGER): {d}/fifo: is not a regular file"),
    "aggregator-ledger-unreadable": Case("aggregator --listen 127.0.0.1:0 --ledger {d}/locked.db",
                                         "setting ledger (GPUCOST_LEDGER): {d}/locked.db: cannot be read",
                                         unprivileged=True),
    "aggregator-ledger-no-directory": Case("aggregator --listen 127.0.0.1:0 --ledger {d}/none/l.db",
                                           "{d}/none/l.db: no such directory {d}/none"),
    # simulate and export never replace a file they did not write
    "simulate-onto-a-text-file": Case("simulate --ledger {d}/notes.txt",
                                      "--ledger {d}/notes.txt: exists and is not a ledger simulate wrote"),
    "simulate-overwrite-a-text-file": Case("simulate --overwrite --ledger {d}/notes.txt",
                                           "--ledger {d}/notes.txt: exists and is not a ledger simulate wrote"),
    "simulate-onto-a-directory": Case("simulate --ledger {d}/dir", "--ledger {d}/dir: exists and is not a ledger"),
    "simulate-onto-a-fifo": Case("simulate --ledger {d}/fifo", "--ledger {d}/fifo: exists and is not a ledger"),
    "simulate-no-directory": Case("simulate --ledger {d}/none/l.db", "--ledger {d}/none/l.db: no such directory"),
    "export-onto-a-text-file": Case("export --format focus-csv --all --ledger {d}/none.db --output {d}/notes.txt",
                                    "--output {d}/notes.txt: exists and is not a file export wrote"),
    "export-overwrite-a-text-file": Case("export --format focus-csv --all --overwrite --ledger {d}/none.db --output "
                                         "{d}/notes.txt", "--output {d}/notes.txt: exists and is not a file export"),
    # token files
    "aggregator-token-missing": Case(AGG + " --agent-token-file {d}/none.token",
                                     "setting agent_token_file (GPUCOST_AGENT_TOKEN_FILE): {d}/none.token: no such "
                                     "file"),
    "aggregator-token-unreadable": Case(AGG + " --agent-token-file {d}/locked.token",
                                        "setting agent_token_file (GPUCOST_AGENT_TOKEN_FILE): {d}/locked.token: "
                                        "cannot be read", unprivileged=True),
    "aggregator-token-directory": Case(AGG + " --agent-token-file {d}/dir", "{d}/dir: is a directory"),
    "aggregator-token-fifo": Case(AGG + " --agent-token-file {d}/fifo", "{d}/fifo: is not a regular file"),
    "aggregator-token-empty": Case(AGG + " --agent-token-file {d}/empty.token",
                                   "setting agent_token_file (GPUCOST_AGENT_TOKEN_FILE): {d}/empty.token: is empty"),
    "aggregator-token-whitespace": Case(AGG + " --agent-token-file {d}/blank.token",
                                        "{d}/blank.token: holds only whitespace"),
    "aggregator-token-from-env": Case(AGG, "setting agent_token_file (GPUCOST_AGENT_TOKEN_FILE): {d}/dir: is a "
                                      "directory", env={"GPUCOST_AGENT_TOKEN_FILE": "{d}/dir"}),
    "aggregator-password-empty": Case(AGG + " --ledger-password-file {d}/empty.token",
                                      "setting ledger_password_file (GPUCOST_LEDGER_PASSWORD_FILE): {d}/empty.token: "
                                      "is empty"),
    "agent-token-missing": Case(AGENT + " --usage-token-file {d}/none.token",
                                "setting usage_token_file (GPUCOST_USAGE_TOKEN_FILE): {d}/none.token: no such file"),
    "agent-token-unreadable": Case(AGENT + " --usage-token-file {d}/locked.token", "{d}/locked.token: cannot be read",
                                   unprivileged=True),
    "agent-token-directory": Case(AGENT + " --usage-token-file {d}/dir", "{d}/dir: is a directory"),
    "agent-token-empty": Case(AGENT + " --usage-token-file {d}/empty.token", "{d}/empty.token: is empty"),
    "agent-token-whitespace": Case(AGENT + " --usage-token-file {d}/blank.token",
                                   "{d}/blank.token: holds only whitespace"),
    # URLs that do not parse
    "agents-not-a-url": Case(AGG + " --agents not-a-url",
                             "setting agents (GPUCOST_AGENTS): 'not-a-url' is not an http:// or https:// URL"),
    "agents-one-of-several": Case(AGG, "setting agents (GPUCOST_AGENTS): 'ftp://a:1' is not an http:// or https://",
                                  env={"GPUCOST_AGENTS": "http://10.0.0.1:9500,ftp://a:1"}),
    "agents-port-out-of-range": Case(AGG + " --agents http://10.0.0.1:99999", "'http://10.0.0.1:99999' is not a URL"),
    "agents-no-host": Case(AGG + " --agents http://:9500", "'http://:9500' is not an http:// or https:// URL"),
    "agent-dcgm-url": Case(AGENT + " --dcgm-url localhost:9400/metrics",
                           "setting dcgm_url (GPUCOST_DCGM_URL): 'localhost:9400/metrics' is not an http:// or"),
    "agent-hami-url": Case(AGENT + " --hami-monitor-url http//x",
                           "setting hami_monitor_url (GPUCOST_HAMI_MONITOR_URL)"),
}


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """The files every row is run against: a directory, a FIFO, mode-000 files, empty and blank tokens, a text
    file; traversable by ``nobody`` (pytest's own temporary directories are root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="gpucost-bad-inputs-"))
    d.chmod(0o755)
    (d / "dir").mkdir()
    os.mkfifo(d / "fifo")
    for name in ("locked.db", "locked.token"):
        (d / name).write_text("secret\n")
        (d / name).chmod(0)
    (d / "empty.token").write_text("")
    (d / "blank.token").write_text("  \n\t\n")
    (d / "notes.txt").write_text("the only copy of my notes\n")
    (d / "p.yaml").write_text("default_price: 1.0\n")
    yield d
    shutil.rmtree(d)


def _tree(d: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every entry under ``d``: mode, size, mtime and (regular files) a digest of the content."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
        out[str(p.relative_to(d))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_input_is_one_line_exit_2_and_nothing_changed(scratch: Path, name: str) -> None:
    case = CASES[name]
    before = _tree(scratch)
    args = case.args.format(d=scratch).split()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GPUCOST_")}
    env.update({k: v.format(d=scratch) for k, v in case.env.items()})
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    prefix: list[str] = []
    if case.unprivileged and os.geteuid() == 0:
        prefix = WITHOUT_CAPABILITIES
    proc = subprocess.run([*prefix, sys.executable, "-m", "exporter", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpu-cost-exporter: error: ")
    assert case.says.format(d=scratch) in lines[0]
    assert proc.stdout == ""
    assert _tree(scratch) == before


def test_a_mistyped_variable_is_warned_once_at_start_with_a_suggestion(tmp_path: Path) -> None:
    """GPUCOST_TIK=30s (meant: GPUCOST_TICK) used to be ignored without a word. The aggregator still starts (the
    variable may belong to a newer build), and says once, before it starts, which variable it ignores and
    what was probably meant; the agent's own setting in its environment is named as the other daemon's."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GPUCOST_")}
    env.update({"GPUCOST_TIK": "30s", "GPUCOST_USAGE_TOKEN_FILE": "/nowhere", "GPUCOST_LOG_FORMAT": "json",
                "GPUCOST_LISTEN": "127.0.0.1:0", "GPUCOST_LEDGER": str(tmp_path / "l.db")})
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "aggregator"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "aggregator_started" in line:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    warned = [json.loads(x) for x in lines if "unknown_setting_variable" in x]
    assert [w["detail"] for w in warned] == [
        "GPUCOST_TIK is not a setting (did you mean GPUCOST_TICK?); ignored",
        "GPUCOST_USAGE_TOKEN_FILE is a setting of the other daemon, not of this one; ignored"]
    assert all(w["level"] == "warning" for w in warned)
    assert "aggregator_started" in lines[-1]
