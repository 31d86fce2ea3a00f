"""A newcomer's first hour, as README walks it: the entry point, the demo on both built-in scenarios (the tables,
the token and curl it prints, every route and output format while it runs, the status page in Chromium, the ledger
it keeps), ``simulate``, ``report`` in every format, ``export`` and ``recommend`` on what it wrote.

One ``simulate`` of the default scenario and one short run of each demo per module: every check reads those."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.ledger.report import DIMENSIONS
from exporter.sim.runner import free_port
from scripts.status_page_shot import chromium, rendered
from tests.conftest import REPO
from tests.procs import get, wait

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ACCELERATORS = REPO / "exporter" / "sim" / "scenarios" / "accelerators.yaml"
NINE = re.compile(r"-?[0-9]+\.[0-9]{9}")
DEMO_SECONDS = 90  # the checks below while it runs, and a few booked ticks, budgets and trends for them


def exporter(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exporter", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


class Raw(str):
    """A JSON number as it was written (json's ``parse_float`` hands over the text)."""


def numbers(obj: Any) -> Iterator[str]:
    """Every non-integer number in parsed JSON, as written."""
    if isinstance(obj, Raw):
        yield str(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from numbers(v)


def nine_digit_json(text: str) -> Any:
    """The parsed JSON, having checked that every decimal in it is plain text with exactly 9 fractional digits
    (amounts, GPU-hours, forecasts: one format, one zero)."""
    parsed = json.loads(text, parse_float=Raw)
    odd = [n for n in numbers(parsed) if not NINE.fullmatch(n)]
    assert odd == [], odd[:10]
    return parsed


def nine_digit_csv(text: str, *, text_columns: set[str]) -> list[dict[str, str]]:
    """The CSV's rows, having checked that every numeric cell has exactly 9 fractional digits."""
    rows = list(csv.DictReader(io.StringIO(text)))
    odd = [(k, v) for r in rows for k, v in r.items() if k not in text_columns and v not in ("", "True", "False")
           and not NINE.fullmatch(v)]
    assert rows and odd == [], odd[:10]
    return rows


# -- simulate, report, export, recommend -------------------------------------------------------------------


@dataclass(frozen=True)
class Simulated:
    ledger: Path
    out: str
    started: float
    finished: float


@pytest.fixture(scope="module", name="sim")
def _sim(tmp_path_factory: pytest.TempPathFactory) -> Simulated:
    ledger = tmp_path_factory.mktemp("simulate") / "ledger.db"
    started = time.time()
    done = exporter("simulate", "--ledger", str(ledger), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return Simulated(ledger, done.stdout + done.stderr, started, time.time())


@pytest.mark.timeout(700)
def test_simulate_ends_by_now_and_says_when_and_how_long(sim: Simulated) -> None:
    m = re.search(r"simulated 7200s of 'default.yaml' \((\d{4}-\d\d-\d\d \d\d:\d\d) to (\d{4}-\d\d-\d\d \d\d:\d\d) "
                  r"UTC\) in ([0-9.]+)s", sim.out)
    assert m is not None, sim.out[-2000:]
    start, end = (datetime.strptime(t, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp() for t in m.groups()[:2])
    assert end - start == 7200 and end <= sim.started and sim.started - end < 3600
    assert float(m.group(3)) <= sim.finished - sim.started


@pytest.mark.timeout(700)
def test_report_in_every_format(sim: Simulated) -> None:
    table = exporter("report", "--ledger", str(sim.ledger)).stdout
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["Namespace", "Allocated", "GPU-h"], lines[0]
    assert max(map(len, lines)) <= 120 and "CO2e" not in table and "_" not in lines[0]
    by_vendor = exporter("report", "--ledger", str(sim.ledger), "--by", "vendor").stdout
    assert max(map(len, by_vendor.splitlines())) <= 120 and "--wide" in by_vendor
    wide = exporter("report", "--ledger", str(sim.ledger), "--by", "vendor", "--wide").stdout
    assert "Unobserved list cost" in wide and "--wide" not in wide and "CO2e" not in wide
    rows = nine_digit_json(exporter("report", "--ledger", str(sim.ledger), "--format", "json").stdout)
    assert {r["namespace"] for r in rows} >= {"ai-training", "ai-research", "__unallocated__"}
    as_csv = exporter("report", "--ledger", str(sim.ledger), "--by", "pod", "--format", "csv").stdout
    nine_digit_csv(as_csv, text_columns={"namespace", "pod", "currency", "co2e_kg", "commitment"})
    assert ",0," not in as_csv and ",0.000000000," in as_csv  # one zero
    by_model = exporter("report", "--ledger", str(sim.ledger), "--by", "gpu_model", "--format", "json").stdout
    assert by_model == exporter("report", "--ledger", str(sim.ledger), "--by", "model", "--format", "json").stdout
    assert {r["gpu_model"] for r in json.loads(by_model)} >= {"NVIDIA H100 80GB HBM3", "NVIDIA L4"}
    budgets = exporter("report", "--ledger", str(sim.ledger), "--budgets", "--budget", "ai-training=500",
                       "--format", "json").stdout
    assert nine_digit_json(budgets)[0]["namespace"]
    nine_digit_csv(exporter("report", "--ledger", str(sim.ledger), "--budgets", "--format", "csv").stdout,
                   text_columns={"namespace", "month", "budget_crossing_day", "currency"})
    helped = exporter("report", "--help").stdout
    assert all(d in helped for d in DIMENSIONS) and "vendor" in helped and "gpu_model" in helped


@pytest.mark.timeout(700)
def test_export_holds_the_whole_run_with_pricing_categories(sim: Simulated, tmp_path: Path) -> None:
    plain = exporter("export", "--ledger", str(sim.ledger), "--format", "focus-csv").stdout
    whole = exporter("export", "--ledger", str(sim.ledger), "--format", "focus-csv", "--all").stdout
    month = datetime.now(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()
    if sim.started - 3 * 3600 > month:  # the run is inside this month: the default window is all of it
        assert plain == whole
    rows = list(csv.DictReader(io.StringIO(whole)))
    assert len(rows) >= 40
    category = {(r["ResourceName"], r["PricingCategory"]) for r in rows if r["ResourceName"] and r["SkuPriceId"]}
    assert ("gpu-h100-spot-0", "Dynamic") in category and ("gpu-h100-0", "Standard") in category
    assert {c for n, c in category if n != "gpu-h100-spot-0"} == {"Standard"}
    ratios = [json.loads(r["AllocatedMethodDetails"], parse_float=Raw)["Elements"][0]["AllocatedRatio"]
              for r in rows if r["AllocatedMethodDetails"]]
    assert ratios and all(len(str(x).partition(".")[2]) <= 9 for x in ratios), ratios[:5]
    noise = [x for x in ratios if re.search(r"(9{5,}\d|0{5,}[1-9])$", str(x))]  # 0.124999999, 0.125000001
    assert noise == []


@pytest.mark.timeout(700)
def test_recommend_says_why_it_has_nothing(sim: Simulated) -> None:
    out = exporter("recommend", "--ledger", str(sim.ledger)).stdout
    assert "(no recommendations: a row needs a workload observed 24 h (--min-evidence)" in out, out
    assert "observed in the window is 2.0 h" in out, out


# -- the demo, both built-in scenarios ----------------------------------------------------------------------


@dataclass
class Demo:
    listen: str
    log: Path
    proc: subprocess.Popen[str]

    @property
    def url(self) -> str:
        return f"http://{self.listen}"

    def out(self) -> str:
        return self.log.read_text()


def _start(tmp: Path, *args: str) -> Demo:
    listen = f"127.0.0.1:{free_port()}"
    log = tmp / "demo.out"
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "demo", "--listen", listen, "--refresh", "3s",
                             "--duration", f"{DEMO_SECONDS}s", *args], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, text=True)
    return Demo(listen, log, proc)


@pytest.fixture(scope="module", name="demos")
def _demos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Demo]]:
    """Both built-in scenarios' demos, side by side, each kept (``--keep``) for ``report`` afterwards."""
    demos = {"default": _start(tmp_path_factory.mktemp("demo"), "--keep"),
             "accelerators": _start(tmp_path_factory.mktemp("demo-acc"), "--keep", "--scenario", str(ACCELERATORS))}
    try:
        for d in demos.values():
            wait(lambda d=d: get(f"{d.url}/readyz")[0] == 200, timeout=60)
            wait(lambda d=d: "--- t+" in d.out(), timeout=60)
        yield demos
    finally:
        for d in demos.values():
            if d.proc.poll() is None:
                d.proc.terminate()
            d.proc.wait(timeout=60)


def _wait_ended(d: Demo) -> str:
    d.proc.wait(timeout=DEMO_SECONDS + 120)
    assert d.proc.returncode == 0, d.out()[-3000:]
    return d.out()


@pytest.mark.timeout(300)
def test_demo_walks_every_route_and_format(demos: dict[str, Demo]) -> None:
    d = demos["default"]
    for by in (*DIMENSIONS, "model", "cluster,namespace", "vendor,gpu_model"):
        status, body = get(f"{d.url}/api/v1/report?by={by}")
        assert status == 200, (by, body[:300])
        nine_digit_json(body.decode())
    wait(lambda: b'"ai-training"' in get(f"{d.url}/api/v1/report?view=budgets")[1], timeout=60)
    nine_digit_json(get(f"{d.url}/api/v1/report?view=budgets")[1].decode())
    status, body = get(f"{d.url}/api/v1/recommendations")
    assert status == 200
    nine_digit_json(body.decode())
    status, body = get(f"{d.url}/api/v1/focus?since=2h&until=now")
    assert status == 200 and b"PricingCategory" in body
    assert get(f"{d.url}/api/v1/keda/utilization?namespace=ai-training")[0] == 200
    assert get(f"{d.url}/healthz")[0] == 200 and get(f"{d.url}/readyz")[0] == 200
    metrics = get(f"{d.url}/metrics")[1].decode()
    assert 'gpucost_gpu_model_info{gpu_model="NVIDIA H100 80GB HBM3",vendor="nvidia"} 1.0' in metrics


@pytest.mark.timeout(300)
def test_demo_prints_the_token_and_a_curl_that_works(demos: dict[str, Demo]) -> None:
    out = demos["default"].out()
    m = re.search(r"bearer token in (\S+):\n\s+curl -H \"Authorization: Bearer \$\(cat (\S+)\)\" (http://\S+/v1/usage)",
                  out)
    assert m is not None and m.group(1) == m.group(2), out[:3000]
    token = Path(m.group(1)).read_text().strip()
    assert get(m.group(3))[0] == 401
    assert get(m.group(3), headers={"Authorization": f"Bearer {token}"})[0] == 200


@pytest.mark.timeout(300)
def test_status_page_in_chromium_shows_the_documented_sections(demos: dict[str, Demo]) -> None:
    if chromium() is None:
        pytest.skip("needs Debian's chromium")
    documented = re.findall(r"^## (.+)$", (REPO / "docs" / "status-page.md").read_text(), re.M)
    page = rendered(f"{demos['default'].url}/")
    assert page.sections == documented
    acc = demos["accelerators"].url
    wait(lambda: b"<td>gaudi</td>" in get(f"{acc}/")[1] and b"<td>amd</td>" in get(f"{acc}/")[1], timeout=60)
    html = get(f"{acc}/")[1].decode()
    models = html.split("<h2>GPUs by vendor and model</h2>", 1)[1].split("<h2>", 1)[0]
    assert "Intel Gaudi" in models and "AMD Instinct MI300X OAM" in models and "NVIDIA H100 80GB HBM3" in models
    assert "did not measure" not in html and "its cost is not in these figures" not in html
    if "Energy not measured" in html:
        assert "priced in full" in html
    assert "saved by commitments and spot" not in html and "below list price this month" in html
    metrics = get(f"{acc}/metrics")[1].decode()
    assert 'vendor="gaudi"' in metrics and 'vendor="amd"' in metrics


@pytest.mark.timeout(400)
def test_demo_tables_and_the_ledger_it_keeps(demos: dict[str, Demo]) -> None:
    for name, d in demos.items():
        out = _wait_ended(d)
        assert "(no usage booked in this window)" not in out, name
        first = out.split("--- t+", 1)[1].split("\n\n", 1)[0].splitlines()
        assert first[1].split()[:3] == ["Namespace", "Allocated", "GPU-h"], first[:3]
        assert any(float(r.split()[1].replace(",", "")) > 0 for r in first[2:] if not r.startswith("(")), first
        tables, inside = [], False
        for line in out.splitlines():
            inside = line.startswith("--- ") or (inside and line != "")
            if inside:
                tables.append(line)
        assert tables and max(map(len, tables)) <= 120, max(tables, key=len)
        assert "--- by vendor and GPU model" in out
        kept = re.search(r"^ledger kept: gpu-cost-exporter report --ledger (\S+) --by vendor,gpu_model$", out, re.M)
        assert kept is not None, out[-2000:]
        report = exporter("report", "--ledger", kept.group(1), "--by", "vendor,gpu_model")
        assert report.returncode == 0 and "nvidia" in report.stdout, report.stderr
        if name == "accelerators":
            assert re.search(r"^gaudi\s+Intel Gaudi", report.stdout, re.M) and re.search(r"^amd\s+AMD", report.stdout,
                                                                                             re.M), report.stdout
        shutil.rmtree(Path(kept.group(1)).parent, ignore_errors=True)


def test_the_entry_point_readme_installs_is_this_one() -> None:
    """README's first command runs ``gpu-cost-exporter demo``: the console script of this package."""
    readme = (REPO / "README.md").read_text()
    assert "pip install . && gpu-cost-exporter demo" in readme
    # pip puts the console script beside the interpreter that installed the package (a virtualenv's bin/ need
    # not be on PATH when its python is called by path).
    script = shutil.which("gpu-cost-exporter", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the package is not installed (pip install -e .)")
    helped = subprocess.run([script, "demo", "--help"], capture_output=True, text=True, check=True).stdout
    assert "--keep" in helped
