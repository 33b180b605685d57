"""pgpathbench's command line: parses and validates options, then hands over.

No business logic here (the grammar and its checks are in cli_parser.py). Exit codes: 0 all
measured; 1 a run ended with failed measurements or stopped because a server died (one line), or
compare --fail-if-slower found a case slower beyond its bound (one line per case), or a disk
was full (one line naming it);
2 a user mistake (one line on stderr, nothing written); 3 compare --fail-if-slower found none
slower but left a case of A without a partner in B (one line per case; --allow-unpaired: 0);
130 (SIGINT) or 143 (SIGTERM) after cleaning up. Anything else is a bug with a traceback.
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rich.console import Console

from . import clientenv, validate
from .cli_parser import FORMATS, build_parser, study_options  # noqa: F401 (FORMATS: for importers)
from .errors import Interrupted, RunFailed, UserError
from .files import write_atomically
from .report import present, render
from .servers import parse_check, user, user_checks
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
    return ResultsStore.open(_opt(args, "results_dsn"), ws, bins, doing=args.command)


def cmd_run(args, out: Console, err: Console) -> int:
    from .progress import ProgressReporter
    from .runner import Runner
    if args.study is None and args.resume is None:
        raise UserError("run: name a study; choose from " + ", ".join(STUDIES) + ", or give --resume RUN")
    if args.study is not None and args.resume is not None:
        raise UserError("--resume: takes no study; the run's own options are reused")
    if args.study is not None and args.resume_repeat is not None:
        raise UserError(f"--repeat: give it after the study's name (run {args.study} --repeat N), or with --resume")
    from .servers.citus import extension_version
    from .servers.placement import Placements, check_cases, parse_places
    options, dsns, placements = None, {}, Placements()
    if args.study is not None:
        study = get_study(args.study)
        dsns = user.parse_fdw_hosts(args.fdw_hosts, user.parse_servers(args.servers, study.roles))
        placements = parse_places(args.places, args.hosts, args.ssh_identity, args.accept_host_keys, study.name,
                                  {s.name: tuple(s.roles) for s in STUDIES.values()}, dsns, args.ssh_config)
        # stored with the options, and seen by the study's refine() (a user server's transports)
        options = study_options(study, args, {**(user.stored(dsns) if dsns else {}), **placements.stored()})
        check_cases(placements, study.cases(options), options.params.get("bandwidth"))
    ws, bins = _context(args)
    if options is not None:   # before anything is written:
        bins.require(*study.required_tools)
        study.check(options, bins)   # the binaries' word (pgbench on a user's script, --set's values)
        parse_check.check(study.user_sql(options), bins, ws.server_user)   # a server's, on the user's SQL
        study.check_space(options, ws)
        user_checks.preflight(study, options, dsns, bins)   # the user's servers: read only
        for role in user.passwords_given(args.servers):
            err.print(f"pgpathbench: warning: --server {role}: its DSN holds a password, which any user of this "
                      "machine sees in ps while the run lasts; prefer PGPASSWORD or ~/.pgpass", highlight=False)
    # The hosts' connections first: a host that refuses, or cannot run a major of the run, is refused
    # before anything is written.
    majors = options.dims.get("pg", ()) if options is not None else ()
    citus = extension_version(study.server_binaries(options, bins)) if placements else None   # a Citus worker's
    with placements.opened(ws.root, majors, citus) as hosts, _store(args, ws, bins) as store:
        runner = Runner(store, ws, bins, ProgressReporter(err), keep_servers=getattr(args, "keep_servers", False),
                        user_dsns=dsns, hosts=hosts)
        if options is not None:
            run_id = runner.start(options, args.seed)
        else:
            bins.require("initdb", "postgres", "pgbench")
            run_id = runner.resume(args.resume, args.resume_repeat)
        present.print_report(store.result(run_id), "table", out, STUDIES)
        failed, total = store.failed_count(run_id)
    if failed:
        raise RunFailed(f"{failed} of {total} measurements failed; 'pgpathbench report {run_id}' lists them, "
                        f"'pgpathbench run --resume {run_id}' measures them again")
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


def _results(args, refs: Sequence[tuple[str, str]]) -> list:
    """The result model of each (RUN, the option that named it): an export file read as it is, or
    a stored run; the results store is opened only for the latter."""
    from .results import exported
    stored = [ref for ref, _ in refs if not exported.names_file(ref)]
    with _store(args, *_context(args)) if stored else contextlib.nullcontext() as store:
        return [exported.read(ref, name) if exported.names_file(ref) else _named_result(store, ref, name)
                for ref, name in refs]


def cmd_report(args, out: Console, err: Console) -> int:
    target = _html_target(args, ("--format", args.format), ("--wide", args.wide))
    if args.wide and (args.format or "table") != "table":
        raise UserError(f"--wide: widens the terminal table only (--format table); leave --wide out with --format "
                        f"{args.format}")
    if target is None and len(args.run) > 1:
        raise UserError("RUN: one run per report, or several with --html FILE (one page)")
    runs = _results(args, [(ref, "RUN") for ref in args.run])
    if target is None:
        present.print_report(runs[0], args.format or "table", out, STUDIES, args.wide)
        return 0
    target.write(present.html_page(runs, STUDIES), out)
    return 0


@dataclass(frozen=True)
class _Html:
    """--html FILE, checked: written whole, replacing a file that exists only with --overwrite."""
    path: Path
    overwrite: bool

    def write(self, text: str, out: Console) -> None:
        try:
            write_atomically(self.path, text, self.overwrite)
        except FileExistsError:
            raise UserError(f"--html: {self.path} appeared meanwhile; pass --overwrite to replace it, or name "
                            "another file") from None
        out.out(str(self.path), highlight=False)


def _html_target(args, *unused: tuple[str, object]) -> _Html | None:
    """--html FILE checked before anything runs: its directory exists and is writable, the file
    does not exist unless --overwrite; `unused` are (option, value) pairs that mean nothing with it."""
    if not args.html:
        if args.overwrite:
            raise UserError("--overwrite: replaces the file of --html; give --html FILE, or leave --overwrite out")
        return None
    given = [option for option, value in unused if value]
    if given:
        raise UserError(f"{given[0]}: not with --html, which writes an HTML page; leave {given[0]} out")
    try:
        path = validate.output_file(str(args.html))
    except ValueError as e:
        raise UserError(f"--html: {e}") from None
    if path.exists() and not args.overwrite:
        raise UserError(f"--html: {path} exists; pass --overwrite to replace it, or name another file")
    return _Html(path, args.overwrite)


def cmd_export(args, out: Console, err: Console) -> int:
    present.print_report(_results(args, [(args.run, "RUN")])[0], args.format, out, STUDIES)
    return 0


def _named_result(store, ref: str, name: str):
    try:
        return store.result(ref)
    except UserError as e:
        raise UserError(str(e).replace("RUN:", f"{name}:", 1)) from None


def cmd_compare(args, out: Console, err: Console) -> int:
    from .report.compare import environment_differences, pair_cases
    if args.allow_unpaired and args.fail_if_slower is None:
        raise UserError("--allow-unpaired: relaxes the gate of --fail-if-slower PCT; give both, or neither")
    target = _html_target(args, ("--format", args.format))
    run_a, run_b = _results(args, [(args.run_a, "RUN_A"), (args.run_b, "RUN_B")])
    differences = environment_differences(run_a, run_b, STUDIES)
    if differences and not args.force:
        raise UserError(f"compare: the runs' environments differ: {'; '.join(differences)}; "
                        "compare runs made alike, or pass --force to compare anyway")
    pairing = pair_cases(run_a, run_b, STUDIES)
    if not pairing.pairs:
        raise UserError(f"compare: {run_a.run_id} and {run_b.run_id} share no case (same study and case id, or "
                        "cases differing only in knob dimensions); compare runs of the same study and dimensions")
    if differences:
        print(f"pgpathbench: warning: the runs' environments differ: {'; '.join(differences)}", file=sys.stderr)
    _print_comparison(run_a, run_b, differences, args.format or "table", target, out)
    if args.fail_if_slower is None:
        return 0
    return _gate(run_a, run_b, pairing.only_a, args.fail_if_slower, args.allow_unpaired)


def _gate(run_a, run_b, only_a: Sequence[str], pct: float, allow_unpaired: bool) -> int:
    """compare --fail-if-slower: 1 when a case got slower beyond PCT; else 3 when a case of A has no
    partner in B (unless allowed); else 0. Every case it did not judge is named on stderr."""
    from .report.compare import not_judged, slower
    failing = slower(run_a, run_b, STUDIES, pct)
    lines = [f"slower: {line}" for line in failing]
    lines += [f"not judged: {line}" for line in not_judged(run_a, run_b, STUDIES)]
    unpaired = [] if allow_unpaired else [
        f"unpaired: {case} of A has no partner in B (same id, or differing only in knobs); "
        "--allow-unpaired if that is expected" for case in only_a]
    for line in lines + unpaired:
        print(f"pgpathbench: {validate.printable(line)}", file=sys.stderr)
    return 1 if failing else 3 if unpaired else 0


def _print_comparison(run_a, run_b, differences, fmt: str, target: _Html | None, out: Console) -> None:
    """The comparison on stdout (table, markdown or html), or written to --html FILE (its path printed)."""
    if target is None and fmt == "table":
        present.print_comparison(run_a, run_b, STUDIES, differences, out)
        return
    text = present.comparison(run_a, run_b, STUDIES, differences, "html" if target else fmt)
    if target is None:
        out.out(text, highlight=False, end="" if fmt == "html" else "\n")
        return
    target.write(text, out)


def cmd_doctor(args, out: Console, err: Console) -> int:
    from .doctor import checks
    from .servers.hosts import Hosts, SshSettings, parse_hosts
    from .workspace import Workspace
    roles = {r.name: r for s in STUDIES.values() for r in s.roles.values() if r.needs is not None}
    dsns = user.parse_servers(args.servers, roles, "any study")
    specs = parse_hosts(args.hosts)
    root = Workspace.open(_opt(args, "workspace")).root if specs else Path()   # its known_hosts
    settings = SshSettings.checked(root, args.ssh_identity, args.accept_host_keys or (), specs, args.ssh_config)
    with Hosts(specs, settings) as hosts:
        rows, ok = checks(_opt(args, "workspace"), _opt(args, "server_user"), _opt(args, "pg_bindir"),
                          _opt(args, "results_dsn"), dsns, hosts)
    present.print_doctor(rows, out)
    return 0 if ok else 1


def cmd_clean(args, out: Console, err: Console) -> int:
    from .clean import clean
    ws, bins = _context(args)
    unreached: list[str] = []
    for line in clean(ws, bins, everything=args.all, results_dsn=_opt(args, "results_dsn"), unreached=unreached):
        out.print(line, highlight=False)
    for line in unreached:   # what stays on a host clean could not reach: exit 1
        err.print(f"pgpathbench: clean: {line}", highlight=False, soft_wrap=True)
    return 1 if unreached else 0


COMMANDS = {"run": cmd_run, "studies": cmd_studies, "runs": cmd_runs, "report": cmd_report,
            "export": cmd_export, "compare": cmd_compare, "doctor": cmd_doctor, "clean": cmd_clean}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal:  # piped or captured: as a 120-column terminal (report --wide: wider)
        out = Console(highlight=False, soft_wrap=False, width=render.TERMINAL_WIDTH)
    err = Console(stderr=True, highlight=False)
    if not err.is_terminal:
        err = Console(stderr=True, highlight=False, width=200)
    args = None
    try:
        _check_text(argv)
        args = build_parser().parse_args(argv)
        with clientenv.isolated():   # the user's libpq and driver variables reach the user's servers only
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
    except Exception as e:   # a full disk met outside a run's measurements (the store's schema, a file)
        from . import disk
        from .workspace import default_root
        if not disk.is_full(e):
            raise
        print(f"pgpathbench: {disk.said_full(e, _opt(args, 'workspace') or default_root())}; free some space, "
              "then give the command again", file=sys.stderr)
        return 1


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
