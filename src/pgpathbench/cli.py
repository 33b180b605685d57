"""pgpathbench's command line: parses and validates options, then hands over.

No business logic here. A user mistake becomes one line on stderr and exit 2; an interrupt
exits 130 (SIGINT) or 143 (SIGTERM) after cleaning up; anything else is a bug with a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console

from . import __version__
from .errors import Interrupted, UserError
from .matrix import Preset
from .files import write_atomically
from .report import present
from .servers.topology import require_proxy
from .studies import STUDIES, get as get_study
from .studies.base import StudyOptions

FORMATS = ("table", "markdown", "csv", "json")


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + message
        raise UserError(message)


def _common(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: the same option on `run` and on `run STUDY` must not overwrite each other.
    p.add_argument("--workspace", default=argparse.SUPPRESS, metavar="DIR",
                   help="where managed servers and the results cluster live (env PGPATHBENCH_HOME)")
    p.add_argument("--results-dsn", default=argparse.SUPPRESS, metavar="DSN",
                   help="store results in this existing database instead of the managed cluster")
    p.add_argument("--server-user", default=argparse.SUPPRESS, metavar="USER",
                   help="OS user that runs managed servers when pgpathbench runs as root (default postgres)")
    p.add_argument("--pg-bindir", default=argparse.SUPPRESS, metavar="DIR",
                   help="PostgreSQL bin directory (default: Debian's PostgreSQL 15)")


def _count(option: str, minimum: int):
    def parse(v: str) -> int:
        if not v.lstrip("-").isdigit() or int(v) < minimum:
            raise argparse.ArgumentTypeError(f"'{v}' must be a whole number >= {minimum}")
        return int(v)
    return parse


def build_parser() -> Parser:
    parser = Parser(prog="pgpathbench", description="Benchmark laboratory for PostgreSQL data-access paths.")
    parser.add_argument("--version", action="version", version=f"pgpathbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    run = sub.add_parser("run", help="run a study (or resume a run)")
    _common(run)
    run.add_argument("--resume", metavar="RUN", help="measure only what RUN is missing ('latest' works)")
    studies = run.add_subparsers(dest="study", metavar="STUDY", parser_class=Parser)
    for study in STUDIES.values():
        sp = studies.add_parser(study.name, help=study.title, description=f"{study.title} (seeds {', '.join(study.seeds)})")
        _common(sp)
        sp.add_argument("--preset", choices=list(study.presets), default="standard",
                        help="; ".join(f"{p.name}: {p.help}" for p in study.presets.values()))
        sp.add_argument("--repeat", type=_count("--repeat", 1), help="rounds (default: the preset's)")
        sp.add_argument("--seed", type=_count("--seed", 0), help="seed of the shuffled order of each round")
        sp.add_argument("--keep-servers", action="store_true", help="keep the servers' data after the run")
        for dim in study.dimensions.values():
            sp.add_argument(f"--{dim.name.replace('_', '-')}", dest=dim.name, metavar="A,B", help=f"{dim.help}" +
                            (f" (from {','.join(dim.values)})" if dim.values else "") +
                            f" [default {','.join(study.default_dims[dim.name])}]")
        for param in study.parameters.values():
            sp.add_argument(f"--{param.name.replace('_', '-')}", dest=f"param_{param.name}", help=param.help)

    s = sub.add_parser("studies", help="list the studies, their dimensions and presets")
    s.add_argument("--format", choices=("table", "json"), default="table")

    r = sub.add_parser("runs", help="list stored runs")
    _common(r)
    r.add_argument("--format", choices=("table", "json"), default="table")

    rep = sub.add_parser("report", help="report a stored run")
    _common(rep)
    rep.add_argument("run", nargs="*", default=["latest"], metavar="RUN",
                     help="a run id, latest (default) or latest~N; several runs with --html make one page")
    rep.add_argument("--format", choices=FORMATS, default="table")
    rep.add_argument("--wide", action="store_true", help="terminal tables with every column (wider than 120)")
    rep.add_argument("--html", metavar="FILE", help="write a self-contained HTML report (tables, charts, "
                     "environment) to FILE and print its path")

    ex = sub.add_parser("export", help="export a stored run's measurements (csv, or versioned json)")
    _common(ex)
    ex.add_argument("run", nargs="?", default="latest", metavar="RUN", help="a run id, or latest (default)")
    ex.add_argument("--format", choices=("csv", "json"), default="json")

    cmp = sub.add_parser("compare", help="compare two stored runs case by case (ratio B/A with 95%% CI)")
    _common(cmp)
    cmp.add_argument("run_a", metavar="RUN_A", help="the baseline run (id, or latest)")
    cmp.add_argument("run_b", metavar="RUN_B", help="the run compared with it (id, or latest)")
    cmp.add_argument("--format", choices=("table", "markdown", "html"), default="table")
    cmp.add_argument("--html", metavar="FILE", help="write the comparison as a self-contained HTML file")
    cmp.add_argument("--force", action="store_true",
                     help="compare even when the runs' environments differ (the differences are printed)")

    d = sub.add_parser("doctor", help="say what is installed and what is missing")
    _common(d)

    c = sub.add_parser("clean", help="stop and remove every managed server and its data")
    _common(c)
    c.add_argument("--all", action="store_true", help="also remove the results cluster and its stored runs")
    return parser


def study_options(study, args: argparse.Namespace) -> StudyOptions:
    """Preset defaults, overridden by explicit options; every value validated."""
    preset: Preset = study.presets[args.preset]
    params = {}
    for name, param in study.parameters.items():
        raw = getattr(args, f"param_{name}")
        if raw is None:
            params[name] = preset.params.get(name, param.default)
            continue
        try:
            params[name] = param.parse(raw)
        except ValueError as e:
            raise UserError(f"--{name.replace('_', '-')}: {e}") from None
    dims = {}
    for name, dim in study.dimensions.items():
        raw = getattr(args, name)
        dims[name] = dim.validate(raw, f"--{name.replace('_', '-')}") if raw is not None else \
            tuple(preset.dims.get(name, study.default_dims[name]))
    options = StudyOptions(study.name, preset.name, args.repeat or preset.repeat, params, dims)
    if any(v != "0ms" for v in dims.get("latency", ())) or params.get("bandwidth"):
        require_proxy()
    if not study.cases(options):
        raise UserError("no cases left after exclusions (e.g. --workload rw only allows targets other than "
                        "fdw_external_ro); widen --workload or --target")
    return options


def _opt(args, name):
    return getattr(args, name, None)


def _context(args):
    """Workspace and binaries from the common options, checked."""
    from .servers import binaries
    from .workspace import Workspace
    bins = binaries.resolve(15, _opt(args, "pg_bindir"))
    ws = Workspace.open(_opt(args, "workspace"), _opt(args, "server_user"))
    return ws, bins


def _store(args, ws, bins):
    from .store import ResultsStore
    return ResultsStore.open(_opt(args, "results_dsn"), ws, bins)


def cmd_run(args, out: Console, err: Console) -> int:
    from .progress import ProgressReporter
    from .runner import Runner
    if args.study is None and args.resume is None:
        raise UserError("run: name a study (" + ", ".join(STUDIES) + ") or --resume RUN")
    if args.study is not None and args.resume is not None:
        raise UserError("--resume: takes no study; the run's own options are reused")
    options = None
    if args.study is not None:
        study = get_study(args.study)
        options = study_options(study, args)
    ws, bins = _context(args)
    if options is not None:
        bins.require(*get_study(options.study).required_tools)
    with _store(args, ws, bins) as store:
        runner = Runner(store, ws, bins, ProgressReporter(err), keep_servers=getattr(args, "keep_servers", False))
        if options is not None:
            run_id = runner.start(options, args.seed)
        else:
            bins.require("initdb", "postgres", "pgbench")
            run_id = runner.resume(args.resume)
        _print_report(store, run_id, "table", out)
    return 0


def cmd_studies(args, out: Console, err: Console) -> int:
    present.print_studies(STUDIES.values(), args.format, out)
    return 0


def cmd_runs(args, out: Console, err: Console) -> int:
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        runs = store.runs()
    present.print_runs(runs, args.format, out)
    return 0


def _print_report(store, run_ref: str, fmt: str, out: Console, wide: bool = False) -> None:
    present.print_report(store.result(run_ref), fmt, out, STUDIES, wide)


def cmd_report(args, out: Console, err: Console) -> int:
    target = _html_target(args.html, "--html") if args.html else None
    if target is None and len(args.run) > 1:
        raise UserError("RUN: one run per report, or several with --html FILE (one page)")
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        if target is None:
            _print_report(store, args.run[0], args.format, out, args.wide)
            return 0
        runs = [store.result(ref) for ref in args.run]
    write_atomically(target, present.html_page(runs, STUDIES))
    out.out(str(target), highlight=False)
    return 0


def _html_target(path: str, option: str) -> Path:
    """FILE of --html, checked before anything runs: its directory must exist and be writable."""
    import os
    target = Path(path).expanduser().absolute()
    if target.is_dir():
        raise UserError(f"{option}: {path} is a directory; name a file, e.g. {Path(path) / 'report.html'}")
    if not target.parent.is_dir():
        raise UserError(f"{option}: directory {target.parent} does not exist; create it or name another file")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise UserError(f"{option}: cannot write in {target.parent}; name a file in a writable directory")
    return target


def cmd_export(args, out: Console, err: Console) -> int:
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        _print_report(store, args.run, args.format, out)
    return 0


def _named_result(store, ref: str, name: str):
    try:
        return store.result(ref)
    except UserError as e:
        raise UserError(str(e).replace("RUN:", f"{name}:", 1)) from None


def cmd_compare(args, out: Console, err: Console) -> int:
    from .compare import environment_differences
    target = _html_target(args.html, "--html") if args.html else None
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        run_a, run_b = _named_result(store, args.run_a, "RUN_A"), _named_result(store, args.run_b, "RUN_B")
    differences = environment_differences(run_a, run_b)
    if differences and not args.force:
        raise UserError(f"compare: the runs' environments differ: {'; '.join(differences)}; "
                        "compare runs made alike, or pass --force to compare anyway")
    if differences:
        print(f"pgpathbench: warning: the runs' environments differ: {'; '.join(differences)}", file=sys.stderr)
    if not any(c.measurements and (b := run_b.study(c.study)) and (o := b.case(c.case_id)) and o.measurements
               for c in run_a.cases):
        raise UserError(f"compare: {run_a.run_id} and {run_b.run_id} share no case (same study and case "
                        "id); compare runs of the same study and dimensions")
    if target is not None or args.format in ("html", "markdown"):
        text = present.comparison(run_a, run_b, STUDIES, differences, "html" if target else args.format)
        if target is None:
            out.out(text, highlight=False, end="" if args.format == "html" else "\n")
            return 0
        write_atomically(target, text)
        out.out(str(target), highlight=False)
    else:
        present.print_comparison(run_a, run_b, STUDIES, differences, out)
    return 0


def cmd_doctor(args, out: Console, err: Console) -> int:
    from .doctor import checks
    rows, ok = checks(_opt(args, "workspace"), _opt(args, "server_user"), _opt(args, "pg_bindir"),
                      _opt(args, "results_dsn"))
    present.print_doctor(rows, out)
    return 0 if ok else 1


def cmd_clean(args, out: Console, err: Console) -> int:
    from .clean import clean
    ws, _ = _context(args)
    for line in clean(ws, remove_results=args.all):
        out.print(line, highlight=False)
    return 0


COMMANDS = {"run": cmd_run, "studies": cmd_studies, "runs": cmd_runs, "report": cmd_report,
            "export": cmd_export, "compare": cmd_compare, "doctor": cmd_doctor, "clean": cmd_clean}


def main(argv: Sequence[str] | None = None) -> int:
    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal:  # piped or captured: keep tables whole rather than 80 columns wide
        out = Console(highlight=False, soft_wrap=False, width=200)
    err = Console(stderr=True, highlight=False)
    if not err.is_terminal:
        err = Console(stderr=True, highlight=False, width=200)
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args, out, err)
    except UserError as e:
        print(f"pgpathbench: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"pgpathbench: interrupted by {signal.Signals(e.signum).name}; finished measurements are kept, "
              "'pgpathbench run --resume latest' measures the rest", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("pgpathbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
