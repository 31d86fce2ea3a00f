"""``gpu-cost-exporter``: one entry point for both daemons, the simulator and reports.

Bad input (unknown flag, unreadable scenario, invalid pricing or settings) prints one line on stderr
naming the file or field and exits with code 2, having written nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from pydantic_settings import SettingsError

from exporter import __version__
from exporter.config import AgentSettings, AggregatorSettings

EXIT_USAGE = 2
DEFAULT_SCENARIO = Path(__file__).parent / "sim" / "scenarios" / "default.yaml"


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"gpu-cost-exporter: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _add_settings_flags(parser: argparse.ArgumentParser, model: type[Any]) -> None:
    group = parser.add_argument_group("settings (flag, or environment variable GPUCOST_<NAME>)")
    for name, fld in model.model_fields.items():
        default = fld.default if fld.default_factory is None else "[]"
        group.add_argument(f"--{name.replace('_', '-')}", dest=f"setting_{name}", default=None, metavar="VALUE",
                           help=f"{fld.description or ''} [env GPUCOST_{name.upper()}, default {default}]")


def _settings(model: type[Any], args: argparse.Namespace) -> Any:
    overrides = {k[len("setting_"):]: v for k, v in vars(args).items() if k.startswith("setting_") and v is not None}
    try:
        return model(**overrides)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise UsageError(f"setting {field} (GPUCOST_{field.upper()}): {err['msg']}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpu-cost-exporter", description="GPU allocation, utilisation and cost accounting for Kubernetes")
    p.add_argument("--version", action="version", version=f"gpu-cost-exporter {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    agent = sub.add_parser("agent", help="the node agent (DaemonSet)")
    _add_settings_flags(agent, AgentSettings)
    agg = sub.add_parser("aggregator", help="the cluster aggregator (Deployment)")
    _add_settings_flags(agg, AggregatorSettings)

    demo = sub.add_parser("demo", help="the whole product on the built-in simulated cluster, in real time")
    demo.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO, help="scenario YAML (default: built-in)")
    demo.add_argument("--listen", default="127.0.0.1:9501", help="aggregator host:port (default 127.0.0.1:9501)")
    demo.add_argument("--workdir", type=Path, default=None, help="where to keep sockets, state and the ledger")
    demo.add_argument("--duration", default=None, help="stop after this long (e.g. 2m); default: run until Ctrl-C")
    demo.add_argument("--refresh", default=None, help="how often to tick and print (default: scenario tick)")

    sim = sub.add_parser("simulate", help="run a scenario to its end on a virtual clock, writing the ledger")
    sim.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    sim.add_argument("--ledger", type=Path, required=True, help="SQLite ledger to write")
    sim.add_argument("--workdir", type=Path, default=None)

    cluster = sub.add_parser("sim-cluster", help="serve only the simulated peers, in real time")
    cluster.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    cluster.add_argument("--workdir", type=Path, required=True)

    rep = sub.add_parser("report", help="cost report from a ledger")
    rep.add_argument("--ledger", type=Path, required=True)
    rep.add_argument("--by", default="namespace",
                     choices=["namespace", "pod", "workload", "node", "pool", "model", "priority_class"])
    rep.add_argument("--since", default=None, help="RFC3339 time or a duration back from now (24h)")
    rep.add_argument("--until", default=None, help="RFC3339 time or a duration back from now")
    rep.add_argument("--format", default="table", choices=["table", "json", "csv"])
    rep.add_argument("--reprice", type=Path, default=None, metavar="FILE",
                     help="also price the same GPU-hours by this pricing file or directory (what-if; "
                          "reprice_cost, reprice_list_cost columns); the ledger is not changed")
    return p


def _scenario(path: Path) -> Any:
    from exporter.sim.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def _duration(text: str | None, flag: str) -> float | None:
    from exporter.model.durations import parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _pricing_check(path: Path | None) -> Any:
    """The pricing file or directory, validated (one line naming file and field, exit 2)."""
    from exporter.aggregator.pricing_source import load_pricing_file
    from exporter.model.pricing import PricingError

    try:
        return load_pricing_file(path)
    except PricingError as exc:
        raise UsageError(str(exc)) from None


def _check_schema(query: Any, ledger: Path) -> None:
    """A ledger an older build wrote is migrated by the aggregator, not by a read-only report."""
    from exporter.aggregator.ledger import SCHEMA_VERSION

    found = query("SELECT value FROM meta WHERE key = 'schema_version'", ())
    version = int(found[0][0]) if found else 0
    if version < SCHEMA_VERSION:
        raise UsageError(f"{ledger}: ledger schema version {version} is older than this build's ({SCHEMA_VERSION}); "
                         "start the aggregator on it once to migrate it")


def _report(args: argparse.Namespace) -> int:
    from exporter.aggregator.report import ReportError, build_report, parse_time, render

    if not args.ledger.exists():
        raise UsageError(f"{args.ledger}: no such ledger")
    what_if = _pricing_check(args.reprice) if args.reprice is not None else None
    now = time.time()
    try:
        since, until = parse_time(args.since, now), parse_time(args.until, now)
        conn = sqlite3.connect(f"file:{args.ledger}?mode=ro", uri=True)
        try:
            def query(sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
                return list(conn.execute(sql, tuple(params)))

            _check_schema(query, args.ledger)
            rows = build_report(query, args.by, since, until)
            if what_if is not None:
                from exporter.aggregator.reprice import reprice

                rows = reprice(query, rows, by=args.by, since=since, until=until, pricing=what_if)
        finally:
            conn.close()
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{args.ledger}: not a gpu-cost-exporter ledger ({exc})") from None
    sys.stdout.write(render(rows, args.format))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except UsageError as exc:
        print(f"gpu-cost-exporter: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from exporter.logs import configure_logging

    cmd = args.command
    if cmd == "report":
        return _report(args)
    if cmd == "agent":
        settings = _settings(AgentSettings, args)
        if not settings.node_name:
            raise UsageError("setting node_name (GPUCOST_NODE_NAME): required")
        configure_logging(settings.log_level, settings.log_format)
        from exporter.agent.dcgm_devices import parse_name_table
        from exporter.agent.service import Agent

        try:
            parse_name_table(settings.dcgm_metric_names)
        except ValueError as exc:
            raise UsageError(f"setting dcgm_metric_names: {exc}") from None
        from exporter.agent.nvml import load_nvml_resolver

        resolver = load_nvml_resolver() if settings.nvml else None
        asyncio.run(Agent(settings, mig_resolver=resolver).run())
        return 0
    if cmd == "aggregator":
        settings = _settings(AggregatorSettings, args)
        _pricing_check(settings.pricing_file)
        configure_logging(settings.log_level, settings.log_format)
        from exporter.aggregator.service import Aggregator

        asyncio.run(Aggregator(settings).run())
        return 0
    if cmd == "simulate":
        scenario = _scenario(args.scenario)
        configure_logging("warning", "auto")
        from exporter.pipeline import run_simulation

        if args.ledger.exists():
            args.ledger.unlink()
        with tempfile.TemporaryDirectory(prefix="gpucost-sim-") as tmp:
            workdir = args.workdir or Path(tmp)
            asyncio.run(run_simulation(scenario, args.ledger, workdir, out=sys.stderr))
        return 0
    if cmd == "demo":
        scenario = _scenario(args.scenario)
        duration = _duration(args.duration, "--duration")
        refresh = _duration(args.refresh, "--refresh")
        configure_logging("warning", "auto")
        from exporter.pipeline import run_demo

        with tempfile.TemporaryDirectory(prefix="gpucost-demo-") as tmp:
            asyncio.run(run_demo(scenario, args.workdir or Path(tmp), args.listen, duration, refresh=refresh))
        return 0
    if cmd == "sim-cluster":
        scenario = _scenario(args.scenario)
        configure_logging("info", "auto")
        from exporter.sim.runner import serve_sim_cluster

        asyncio.run(serve_sim_cluster(scenario, args.workdir))
        return 0
    raise UsageError(f"unknown command {cmd}")
