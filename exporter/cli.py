"""``gpu-cost-exporter``: one entry point for both daemons, the simulator and reports.

Bad input (unknown flag, unreadable scenario, invalid pricing or settings) prints one line on stderr
naming the file or field and exits with code 2, having written nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pydantic import ValidationError

from exporter import __version__
from exporter.cli_common import UsageError, duration_arg, pricing_check
from exporter.cli_ledger import focus_command, recommend_command, report_command
from exporter.config import AgentSettings, AggregatorSettings
from exporter.settings.common import CONFIG_FILE, DaemonSettings, SettingsFileError, error_line

EXIT_USAGE = 2
DEFAULT_SCENARIO = Path(__file__).parent / "sim" / "scenarios" / "default.yaml"
SettingsT = TypeVar("SettingsT", bound=DaemonSettings)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"gpu-cost-exporter: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _add_settings_flags(parser: argparse.ArgumentParser, model: type[DaemonSettings]) -> None:
    group = parser.add_argument_group("settings (flag, else environment variable GPUCOST_<NAME>, else the "
                                      "settings file --config-file, else the default)")
    for name, fld in model.model_fields.items():
        default = fld.default if fld.default_factory is None else "[]"
        flags = [f"--{name.replace('_', '-')}", *(["--config"] if name == CONFIG_FILE else [])]
        group.add_argument(*flags, dest=f"setting_{name}", default=None,
                           metavar="FILE" if name == CONFIG_FILE else "VALUE",
                           help=f"{fld.description or ''} [env GPUCOST_{name.upper()}, default {default}]")


def _settings(model: type[SettingsT], args: argparse.Namespace) -> SettingsT:
    overrides = {k[len("setting_"):]: v for k, v in vars(args).items() if k.startswith("setting_") and v is not None}
    try:
        return model(**overrides)
    except (ValidationError, SettingsFileError) as exc:
        raise UsageError(error_line(model, exc, init=overrides)) from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand; daemon subcommands take each setting as a flag."""
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
    rep.add_argument("--ledger", required=True, help="SQLite ledger file or postgresql:// URL")
    rep.add_argument("--ledger-password-file", type=Path, default=None, help="password of a PostgreSQL ledger")
    rep.add_argument("--by", default="namespace", help="one or more of cluster, namespace, pod, workload, node, "
                     "pool, model, priority_class, claim, sharing (comma-separated: cluster,namespace)")
    rep.add_argument("--cluster", default=None, help="only this cluster's rows (default: every cluster)")
    rep.add_argument("--since", default=None, help="RFC3339 time or a duration back from now (24h)")
    rep.add_argument("--until", default=None, help="RFC3339 time or a duration back from now")
    rep.add_argument("--format", default="table", choices=["table", "json", "csv"])
    rep.add_argument("--reprice", type=Path, default=None, metavar="FILE",
                     help="also price the same GPU-hours by this pricing file or directory (what-if; "
                          "reprice_cost, reprice_list_cost columns); the ledger is not changed")
    rep.add_argument("--budgets", action="store_true",
                     help="the budgets view instead: per namespace this month's spend, burn rate, month-end forecast "
                          "and budget crossing day, as of the ledger's latest booked time")
    rep.add_argument("--budget", action="append", default=[], metavar="NS=AMOUNT",
                     help="a namespace's monthly budget for --budgets (repeatable)")
    rep.add_argument("--budgets-file", type=Path, default=None, metavar="FILE",
                     help="YAML/JSON {namespace: amount} (or the chart's values with budgets:) for --budgets")
    rep.add_argument("--forecast-window", default="24h", help="booked time the burn rate is averaged over (24h)")

    rec = sub.add_parser("recommend", help="right-sizing recommendations and their monthly savings from a ledger")
    rec.add_argument("--ledger", required=True, help="SQLite ledger file or postgresql:// URL")
    rec.add_argument("--ledger-password-file", type=Path, default=None, help="password of a PostgreSQL ledger")
    rec.add_argument("--cluster", default="default", help="the cluster whose rows to judge (default: default)")
    rec.add_argument("--window", default="7d", help="evidence window ending at the latest booked time (default 7d)")
    rec.add_argument("--since", default=None, help="start of the window instead (as in report: RFC3339 time or a "
                     "duration back from now); widened to the start of its hour")
    rec.add_argument("--until", default=None, help="end of the window instead (as in report), capped at the latest "
                     "booked time; --window then counts back from it")
    rec.add_argument("--min-evidence", default="24h", help="no row for a workload observed fewer hours (24h)")
    rec.add_argument("--idle-threshold", type=float, default=0.05, help="p95 at or below this is idle (0.05)")
    rec.add_argument("--format", default="table", choices=["table", "json", "csv"])

    exp = sub.add_parser("export", help="export a ledger window as FOCUS (FinOps cost and usage) CSV or Parquet")
    exp.add_argument("--ledger", required=True, help="SQLite ledger file or postgresql:// URL")
    exp.add_argument("--ledger-password-file", type=Path, default=None, help="password of a PostgreSQL ledger")
    exp.add_argument("--format", required=True, choices=["focus-csv", "focus-parquet"])
    exp.add_argument("--since", default=None, help="RFC3339 time or a duration back from now (720h); default: "
                     "the start of --until's UTC month (with neither: the current month to date)")
    exp.add_argument("--until", default=None, help="RFC3339 time, a duration back from now, or now (default: now)")
    exp.add_argument("--all", action="store_true", dest="whole",
                     help="export the whole ledger (not with --since or --until)")
    exp.add_argument("--focus-version", default="1.3", choices=["1.3", "1.2"])
    exp.add_argument("--output", default="-", help="file (metadata beside it in FILE.metadata.json), - = stdout")
    exp.add_argument("--billed-cost", default="effective", choices=["effective", "zero"],
                     help="effective: internal chargeback; zero: beside the cloud's own FOCUS data (no double count)")
    exp.add_argument("--cluster", default="default", help="the cluster's name (SubAccountId)")
    exp.add_argument("--host-provider", default=None, help="the cloud that hosts the nodes (HostProviderName)")

    prc = sub.add_parser("pricing", help="the published rate card of a pricing file")
    prc.add_argument("--pricing-file", type=Path, required=True)
    prc.add_argument("--format", required=True, choices=["focus-price-list"])
    prc.add_argument("--ledger", default=None, help="list exactly the SKUs this ledger's rows reference (SQLite "
                     "file or postgresql:// URL)")
    prc.add_argument("--ledger-password-file", type=Path, default=None, help="password of a PostgreSQL ledger")
    return p


def _scenario(path: Path) -> Any:
    from exporter.sim.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    """The entry point: the command's exit code; a usage error is one line on stderr and exit code 2."""
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
        return report_command(args)
    if cmd == "recommend":
        return recommend_command(args)
    if cmd in ("export", "pricing"):
        return focus_command(args)
    if cmd == "agent":
        settings = _settings(AgentSettings, args)
        if not settings.node_name:
            raise UsageError("setting node_name (GPUCOST_NODE_NAME): required")
        configure_logging(settings.log_level, settings.log_format)
        from exporter.agent.exporters.dcgm import parse_name_table
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
        conf = _settings(AggregatorSettings, args)
        if conf.is_postgres() and not conf.cluster:
            raise UsageError("setting cluster (GPUCOST_CLUSTER): required with a PostgreSQL ledger")
        pricing_check(conf.pricing_file)
        configure_logging(conf.log_level, conf.log_format)
        from exporter.aggregator.ledger.store import LedgerError
        from exporter.aggregator.service import Aggregator

        try:
            asyncio.run(Aggregator(conf).run())
        except LedgerError as exc:
            raise UsageError(f"setting ledger (GPUCOST_LEDGER): {exc}") from None
        return 0
    if cmd == "simulate":
        scenario = _scenario(args.scenario)
        configure_logging("warning", "auto")
        from exporter.pipeline import run_simulation

        if args.ledger.exists():
            args.ledger.unlink()
        with tempfile.TemporaryDirectory(prefix="gpucost-sim-") as tmp:
            workdir = args.workdir or Path(tmp)
            asyncio.run(run_simulation(scenario, args.ledger, workdir=workdir, out=sys.stderr))
        return 0
    if cmd == "demo":
        scenario = _scenario(args.scenario)
        duration = duration_arg(args.duration, "--duration")
        refresh = duration_arg(args.refresh, "--refresh")
        configure_logging("warning", "auto")
        from exporter.pipeline import run_demo

        with tempfile.TemporaryDirectory(prefix="gpucost-demo-") as tmp:
            asyncio.run(run_demo(scenario, args.workdir or Path(tmp), listen=args.listen, duration=duration,
                                 refresh=refresh))
        return 0
    if cmd == "sim-cluster":
        scenario = _scenario(args.scenario)
        configure_logging("info", "auto")
        from exporter.sim.runner import serve_sim_cluster

        asyncio.run(serve_sim_cluster(scenario, args.workdir))
        return 0
    raise UsageError(f"unknown command {cmd}")
