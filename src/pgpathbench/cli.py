"""pgpathbench's command line: parses and validates options, then hands over.

No business logic here (the grammar and its checks are in cli_parser.py). Exit codes: 0 all
measured; 1 a run ended with failed measurements or stopped because a server died (one line);
2 a user mistake (one line on stderr, nothing written); 130 (SIGINT) or 143 (SIGTERM) after
cleaning up. Anything else is a bug with a traceback.
"""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console

from . import validate
from .cli_parser import FORMATS, build_parser, study_options  # noqa: F401 (FORMATS: for importers)
from .errors import Interrupted, RunFailed, UserError
from .report import Table
from .report import export, render
from .studies import STUDIES, get as get_study


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
        raise UserError("run: name a study; choose from " + ", ".join(STUDIES) + ", or give --resume RUN")
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
        failed, total = store.failed_count(run_id)
    if failed:
        raise RunFailed(f"{failed} of {total} measurements failed; 'pgpathbench report {run_id}' lists them, "
                        f"'pgpathbench run --resume {run_id}' measures them again")
    return 0


def cmd_studies(args, out: Console, err: Console) -> int:
    if args.format == "json":
        import json
        out.print_json(json.dumps([{
            "name": s.name, "title": s.title, "seeds": list(s.seeds),
            "dimensions": {d.name: {"values": list(d.values) or None, "default": list(s.default_dims[d.name]),
                                    "help": d.help} for d in s.dimensions.values()},
            "parameters": {p.name: p.help for p in s.parameters.values()},
            "presets": {p.name: {"help": p.help, "repeat": p.repeat, **p.params} for p in s.presets.values()},
        } for s in STUDIES.values()]))
        return 0
    for s in STUDIES.values():
        rows = [[f"dimension {d.name}", ",".join(d.values) or "(any)", ",".join(s.default_dims[d.name]), d.help]
                for d in s.dimensions.values()]
        rows += [[f"parameter {p.name}", "", str(p.default) if p.default is not None else "(preset)", p.help]
                 for p in s.parameters.values()]
        rows += [[f"preset {p.name}", "", f"{p.repeat} rounds", p.help] for p in s.presets.values()]
        render.to_terminal([Table(f"{s.name}: {s.title} (seeds {', '.join(s.seeds)})",
                                  ["", "values", "default", "meaning"], rows)], out)
    return 0


def cmd_runs(args, out: Console, err: Console) -> int:
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        runs = store.runs()
    if args.format == "json":
        out.out(export.runs_to_json(runs), highlight=False)
        return 0
    rows = [[r["run_id"], ",".join(r["studies"]), r["preset"], r["status"], r["started_at"].strftime("%Y-%m-%d %H:%M:%S"),
             r["measurements"], r["errors"]] for r in runs]
    render.to_terminal([Table("Stored runs", ["run", "studies", "preset", "status", "started", "measurements",
                                              "errors"], rows, [] if rows else ["No runs yet."], align_left=5)], out)
    return 0


def _print_report(store, run_ref: str, fmt: str, out: Console) -> None:
    run = store.run(run_ref)
    measurements = store.measurements(run["run_id"])
    probes = store.probes(run["run_id"])
    if fmt == "json":
        out.out(export.to_json(run, measurements, probes), highlight=False)
        return
    if fmt == "csv":
        out.out(export.to_csv(measurements), highlight=False, end="")
        return
    tables = [_run_table(run)]
    for name in run["studies"]:
        tables += get_study(name).report(run, measurements, probes)
    if fmt == "markdown":
        out.out(render.to_markdown(tables), highlight=False)
    else:
        render.to_terminal(tables, out)


def _run_table(run: dict) -> Table:
    sessions = run["environment"].get("sessions") or [{}]
    env = sessions[-1]
    servers = env.get("servers", {})
    version = ", ".join(sorted({v.get("version", "—").split(" on ")[0] for v in servers.values()})) or "—"
    rows = [["run", run["run_id"]], ["studies", ", ".join(run["studies"])], ["preset", run["preset"]],
            ["status", run["status"]], ["started", str(run["started_at"])[:19]],
            ["server", version], ["client", env.get("pgbench", "—")],
            ["machine", f"{env.get('cpu_model', '?')}, {env.get('cores', '?')} cores, "
                        f"{(env.get('memory_bytes') or 0) / 2**30:.1f} GiB, kernel {env.get('kernel', '?')}"],
            ["sessions", str(len(sessions))]]
    return Table("Run", ["", ""], rows, align_left=2)


def cmd_report(args, out: Console, err: Console) -> int:
    target = _html_target(args.html, "--html") if args.html else None
    if target is None and len(args.run) > 1:
        raise UserError("RUN: one run per report, or several with --html FILE (one page)")
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        if target is None:
            _print_report(store, args.run[0], args.format, out)
            return 0
        runs = []
        for ref in args.run:
            run = store.run(ref)
            runs.append((run, store.measurements(run["run_id"]), store.probes(run["run_id"])))
    _write_atomically(target, html_report(runs))
    out.out(str(target), highlight=False)
    return 0


def html_report(runs: list[tuple[dict, list[dict], list[dict]]]) -> str:
    """The HTML page of one or more runs: every study's tables and plots, failures, environment, options."""
    from .report import html
    pages = []
    for run, measurements, probes in runs:
        sections = []
        for name in run["studies"]:
            study = get_study(name)
            plots = getattr(study, "plots", None)
            sections.append(html.StudySection(name, study.title, study.report(run, measurements, probes),
                                              plots(run, measurements, probes) if plots else []))
        pages.append((run, measurements, probes, sections))
    return html.run_page(*pages[0]) if len(pages) == 1 else html.runs_page(pages)


def _html_target(path, option: str) -> Path:
    """FILE of --html, checked before anything runs: its directory must exist and be writable."""
    try:
        return validate.output_file(str(path))
    except ValueError as e:
        raise UserError(f"{option}: {e}") from None


def _write_atomically(target: Path, text: str) -> None:
    """A temporary file beside the target, renamed over it: readers never see half a file."""
    import os
    import tempfile
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_export(args, out: Console, err: Console) -> int:
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        run = store.run(args.run)
        measurements = store.measurements(run["run_id"])
        probes = store.probes(run["run_id"])
    if args.format == "json":
        out.out(export.to_json(run, measurements, probes), highlight=False)
    else:
        out.out(export.to_csv(measurements), highlight=False, end="")
    return 0


def _named_run(store, ref: str, name: str) -> dict:
    try:
        return store.run(ref)
    except UserError as e:
        raise UserError(str(e).replace("RUN:", f"{name}:", 1)) from None


def cmd_compare(args, out: Console, err: Console) -> int:
    from .compare import compare, environment_differences
    from .report import html
    target = _html_target(args.html, "--html") if args.html else None
    ws, bins = _context(args)
    with _store(args, ws, bins) as store:
        run_a, run_b = _named_run(store, args.run_a, "RUN_A"), _named_run(store, args.run_b, "RUN_B")
        ms_a, ms_b = store.measurements(run_a["run_id"]), store.measurements(run_b["run_id"])
    differences = environment_differences(run_a, run_b)
    if differences and not args.force:
        raise UserError(f"compare: the runs' environments differ: {'; '.join(differences)}; "
                        "compare runs made alike, or pass --force to compare anyway")
    if differences:
        print(f"pgpathbench: warning: the runs' environments differ: {'; '.join(differences)}", file=sys.stderr)
    shared = {(m["study"], m["case_id"]) for m in ms_a} & {(m["study"], m["case_id"]) for m in ms_b}
    if not shared:
        raise UserError(f"compare: {run_a['run_id']} and {run_b['run_id']} share no case (same study and case "
                        "id); compare runs of the same study and dimensions")
    tables, plots = compare(run_a, ms_a, run_b, ms_b, STUDIES, differences)
    if target is not None or args.format == "html":
        page = html.compare_page(run_a, run_b, tables, plots, differences)
        if target is None:
            out.out(page, highlight=False, end="")
            return 0
        _write_atomically(target, page)
        out.out(str(target), highlight=False)
    elif args.format == "markdown":
        out.out(render.to_markdown(tables), highlight=False)
    else:
        render.to_terminal(tables, out)
    return 0


def cmd_doctor(args, out: Console, err: Console) -> int:
    from .doctor import checks
    rows, ok = checks(_opt(args, "workspace"), _opt(args, "server_user"), _opt(args, "pg_bindir"),
                      _opt(args, "results_dsn"))
    render.to_terminal([Table("pgpathbench doctor", ["check", "status", "detail"], rows, align_left=3)], out)
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
    argv = list(sys.argv[1:] if argv is None else argv)
    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal:  # piped or captured: keep tables whole rather than 80 columns wide
        out = Console(highlight=False, soft_wrap=False, width=200)
    err = Console(stderr=True, highlight=False)
    if not err.is_terminal:
        err = Console(stderr=True, highlight=False, width=200)
    try:
        _check_text(argv)
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args, out, err)
    except UserError as e:
        print(f"pgpathbench: error: {_one_line(str(e), argv)}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"pgpathbench: {_one_line(str(e), argv)}", file=sys.stderr)
        return 1
    except Interrupted as e:
        print(f"pgpathbench: interrupted by {signal.Signals(e.signum).name}; finished measurements are kept, "
              "'pgpathbench run --resume latest' measures the rest", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("pgpathbench: interrupted", file=sys.stderr)
        return 130


def _check_text(argv: list[str]) -> None:
    """Every argument must be text (a byte that is not UTF-8 reaches no database or file name)."""
    for i, arg in enumerate(argv):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            option = next((a.split("=", 1)[0] for a in reversed(argv[:i + 1]) if a.startswith("-")), "an argument")
            raise UserError(f"{option}: not valid UTF-8 text; give the value in UTF-8") from None


_SECRET = re.compile(r"password|passfile|://[^/]*@|sslkey|secret", re.I)


def _one_line(message: str, argv: list[str]) -> str:
    """The message on one line, without any argument that may hold a secret (a DSN, a conninfo)."""
    for arg in sorted(argv, key=len, reverse=True):
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if _SECRET.search(value) and len(value) > 3:
            message = message.replace(value, "<not shown: may hold a password>")
    return validate.printable(message)


if __name__ == "__main__":
    sys.exit(main())
