"""The command line's grammar and its checks: every value is parsed, range-checked and refused
(one line naming the option, with the fix) before anything is written.

No abbreviations (`--server` must never be taken for `--server-user`), and no error repeats a
value that may hold a secret (a DSN, a conninfo): the option is named instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import Callable, Sequence

from . import __version__, validate
from .errors import UserError
from .files import size_text
from .matrix import Preset, StudyOptions
from .servers.topology import require_proxy
from .studies import STUDIES
from .results.convergence import MIN_ROUNDS
from .results.exported import MAX_EXPORT_BYTES

FORMATS = ("table", "markdown", "csv", "json")
COMMAND_NAMES = ("run", "studies", "runs", "report", "export", "compare", "doctor", "clean")
_ARGV: list[str] = []        # what the last parse_args was given, for error messages
_KNOWN: dict[tuple[str, ...], set[str]] = {}   # (command[, study]) -> the option strings it takes
_FIX = re.compile(r"choose|give|see |use |write |leave|name a|create|drop|add |'pgpathbench")


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations, whose errors are one line with a fix."""

    def __init__(self, *args, **kw):
        kw["allow_abbrev"] = False
        super().__init__(*args, **kw)

    def add_argument(self, *args, **kw):
        # Our help texts are prose, never argparse's %(default)s formats: a "95%" stays itself.
        if isinstance(kw.get("help"), str):
            kw["help"] = kw["help"].replace("%", "%%")
        return super().add_argument(*args, **kw)

    def parse_args(self, args: Sequence[str] | None = None, namespace=None):
        _ARGV[:] = list(args) if args is not None else sys.argv[1:]
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(unrecognized(extra, _help_hint(parsed)))
        return parsed

    def error(self, message: str):
        known = _KNOWN.get(tuple(_ARGV[:2]), _KNOWN.get(tuple(_ARGV[:1]), _KNOWN.get((), set())))
        unknown = [a.split("=", 1)[0] for a in _ARGV if a.startswith("--") and a.split("=", 1)[0] not in known]
        if unknown:   # the cause of whatever argparse says next (`run --work /tmp`: "invalid choice '/tmp'")
            raise UserError(unrecognized(unknown, " ".join(self.prog.split()[:3]) + " --help"))
        if message.startswith("the following arguments are required: COMMAND"):
            bogus = [a for a in _ARGV if a.startswith("-")]
            if bogus:
                raise UserError(unrecognized(bogus, "pgpathbench --help"))
            raise UserError(f"COMMAND: missing; choose one of {', '.join(COMMAND_NAMES)} "
                            "(e.g. 'pgpathbench run fdw-overhead --preset quick')")
        if message.endswith("expected one argument"):
            option = message.split()[1].rstrip(":")
            message += f"; give a value: {option} VALUE (or {option}=VALUE when it starts with '-')"
        elif "ignored explicit argument" in message:
            message = message.split(": ignored")[0] + ": takes no value; write the option alone"
        elif not _FIX.search(message):
            message += f"; see '{self.prog} --help'"
        raise UserError(message)


def unrecognized(extra: list[str], hint: str) -> str:
    """Unknown options by name only: a value after them (or after '=') may be a password."""
    options = [a.split("=", 1)[0] for a in extra if a.startswith("-")]
    if options:
        return (f"{', '.join(options)}: unknown option (abbreviations are not accepted); "
                f"'{hint}' lists the options")
    shown = [a for a in extra if re.fullmatch(r"[\w.,:~+-]{1,40}", a)]
    what = " ".join(shown) if len(shown) == len(extra) else f"{len(extra)} more"
    return f"unexpected argument(s) {what}; '{hint}' shows the usage"


def _help_hint(parsed: argparse.Namespace) -> str:
    words = ["pgpathbench", getattr(parsed, "command", None), getattr(parsed, "study", None)]
    return " ".join(w for w in words if w) + " --help"


def _checked(check: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type from a validate parser (ValueError -> argparse's one-line error)."""
    def parse(text: str):
        try:
            return check(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = check.__name__
    return parse


def _common(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: the same option on `run` and on `run STUDY` must not overwrite each other.
    p.add_argument("--workspace", default=argparse.SUPPRESS, metavar="DIR", type=_checked(validate.directory),
                   help="where managed servers and the results cluster live (env PGPATHBENCH_HOME)")
    p.add_argument("--results-dsn", default=argparse.SUPPRESS, metavar="DSN", type=_checked(validate.conninfo),
                   help="store results in this existing database instead of the managed cluster")
    p.add_argument("--server-user", default=argparse.SUPPRESS, metavar="USER", type=_checked(validate.user_name),
                   help="OS user that runs managed servers when pgpathbench runs as root (default postgres)")
    p.add_argument("--pg-bindir", default=argparse.SUPPRESS, metavar="DIR", type=_checked(validate.bindir),
                   help="PostgreSQL bin directory (default: Debian's PostgreSQL 15)")


def _run_parser(sub) -> None:
    run = sub.add_parser("run", help="run a study (or resume a run)")
    _common(run)
    run.add_argument("--resume", metavar="RUN", type=_checked(validate.run_ref),
                     help="measure what RUN is missing or failed ('latest' works): the (case, round) pairs "
                          "without a successful measurement")
    run.add_argument("--repeat", dest="resume_repeat", metavar="N", type=_checked(validate.repeat),
                     help="with --resume: the run's rounds raised to N, the rounds added measured too")
    studies = run.add_subparsers(dest="study", metavar="STUDY", parser_class=Parser)
    for study in STUDIES.values():
        sp = studies.add_parser(study.name, help=study.title, description=f"{study.title} (seeds {', '.join(study.seeds)})")
        _common(sp)
        sp.add_argument("--preset", choices=list(study.presets), default="standard",
                        help="; ".join(f"{p.name}: {p.help}" for p in study.presets.values()))
        sp.add_argument("--repeat", type=_checked(validate.repeat),
                        help=f"rounds, 1 to {validate.MAX_ROUNDS} (default: the preset's)")
        sp.add_argument("--seed", type=_checked(validate.seed), help="seed of the shuffled order of each round")
        sp.add_argument("--keep-servers", action="store_true", help="keep the servers' data after the run")
        user_roles = [r.name for r in study.roles.values() if r.needs is not None]
        sp.add_argument("--server", dest="servers", action="append", metavar="ROLE=DSN",
                        help="an existing server in ROLE (a libpq conninfo or URI; password from it, PGPASSWORD or "
                             "~/.pgpass): pgpathbench works there only in databases of its own, dropped after the "
                             "run (repeatable; roles: " + (", ".join(user_roles) or "none in this version") + ")")
        sp.add_argument("--fdw-host", dest="fdw_hosts", action="append", metavar="ROLE=HOST[:PORT]",
                        help="where postgres_fdw on another server reaches the user's server in ROLE, when not "
                             "at the DSN's address (repeatable)")
        _host_options(sp)
        sp.add_argument("--place", dest="places", action="append", metavar="ROLE=NAME",
                        help="run a managed role's server on --host NAME over SSH (repeatable; placeable: "
                             "fdw-overhead, remote-sampling source, external; interfaces remote); 'pgpathbench doctor --host' checks a host")
        for dim in study.dimensions.values():
            sp.add_argument(f"--{dim.name.replace('_', '-')}", dest=dim.name, metavar="A,B", help=dim.help +
                            (f" (from {','.join(dim.values)})" if dim.values else "") +
                            f" [default {','.join(study.default_dims[dim.name])}]")
        for family in study.knob_families.values():
            sp.add_argument(family.option, dest=f"knobs_{family.prefix}", action="append", metavar="NAME=A,B",
                            help=f"{family.help} (repeatable; {family.names_help})")
        for param in study.parameters.values():
            sp.add_argument(f"--{param.name.replace('_', '-')}", dest=f"param_{param.name}", help=param.help,
                            action="append" if param.repeatable else "store")


RUN_OR_EXPORT = ("a run id, latest (default), latest~N, or a run's export (FILE.json, FILE.json.gz; up to "
                 f"{size_text(MAX_EXPORT_BYTES)} uncompressed)")


def build_parser() -> Parser:
    parser = Parser(prog="pgpathbench", description="Benchmark laboratory for PostgreSQL data-access paths.")
    parser.add_argument("--version", action=_VersionAlone, help="print pgpathbench's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    _run_parser(sub)
    run_ref = _checked(validate.run_or_export)

    s = sub.add_parser("studies", help="list the studies, their dimensions and presets")
    s.add_argument("--format", choices=("table", "json"), default="table")

    r = sub.add_parser("runs", help="list stored runs")
    _common(r)
    r.add_argument("--format", choices=("table", "json"), default="table")

    _reading_parsers(sub, run_ref)
    _compare_parser(sub, run_ref)

    d = sub.add_parser("doctor", help="say what is installed and what is missing")
    _common(d)
    d.add_argument("--server", dest="servers", action="append", metavar="ROLE=DSN",
                   help="check an existing server for a run's --server ROLE=DSN: reachable, version, privileges, "
                        "extensions, round trip from here (repeatable)")
    _host_options(d)

    c = sub.add_parser("clean", help="stop and remove what runs that ended left (servers, data); runs in progress "
                                     "are left alone")
    _common(c)
    c.add_argument("--all", action="store_true", help="also remove the results cluster and its stored runs (not "
                   "a --results-dsn database); refused while another pgpathbench process uses the workspace")
    _KNOWN.update(_options_by_command(parser))
    return parser


def _host_options(p: argparse.ArgumentParser) -> None:
    """--host and how it is reached (servers/hosts.py)."""
    p.add_argument("--host", dest="hosts", action="append", metavar="NAME=ssh://[USER@]ADDRESS[:PORT]",
                   help="a host reached over SSH with the system's OpenSSH (your ssh config, agent and "
                        "known_hosts); NAME=ALIAS for an alias of your ssh config, its HostName, User, Port, "
                        "IdentityFile and ProxyJump honoured (repeatable)")
    p.add_argument("--ssh-config", metavar="FILE", help="the ssh config (ssh_config(5)) every ssh reads, as ssh -F "
                                                        "FILE (default: ~/.ssh/config and /etc/ssh/ssh_config)")
    p.add_argument("--ssh-identity", metavar="FILE", help="the private key that logs in to the hosts (default: "
                                                          "your ssh-agent and ~/.ssh keys)")
    p.add_argument("--accept-host-key", dest="accept_host_keys", action="append", metavar="NAME",
                   help="accept the host key of --host NAME when it is not known yet, and record it in the "
                        "workspace's known_hosts (never yours); a changed key is still refused (repeatable)")


def _reading_parsers(sub, run_ref) -> None:
    """`report` and `export`: a stored run, or an exported one."""
    rep = sub.add_parser("report", help="report a stored run, or an exported one")
    _common(rep)
    rep.add_argument("run", nargs="*", default=["latest"], metavar="RUN", type=run_ref,
                     help=f"{RUN_OR_EXPORT}; several runs with --html make one page")
    rep.add_argument("--format", choices=FORMATS, help="on stdout (default table); not with --html")
    rep.add_argument("--wide", action="store_true", help="terminal tables with every column (wider than 120); "
                                                         "with --format table only")
    _html_options(rep, "write a self-contained HTML report (tables, charts, environment) to FILE and print its "
                       "path; FILE must not exist, unless --overwrite")

    ex = sub.add_parser("export", help="export a stored run's measurements (csv, or versioned json)")
    _common(ex)
    ex.add_argument("run", nargs="?", default="latest", metavar="RUN", type=run_ref,
                    help=RUN_OR_EXPORT)
    ex.add_argument("--format", choices=("csv", "json"), default="json")


def _compare_parser(sub, run_ref) -> None:
    cmp = sub.add_parser("compare", help="compare two stored runs case by case (ratio B/A with 95%% CI)",
                         description="Compare two runs of a study case by case: the primary metric's ratio B/A "
                                     "with its 95% CI. Cases pair by id; a case with no partner by id pairs "
                                     "with the one such case of the other run differing from it in knob "
                                     "dimensions only; cases "
                                     "left without a partner are named. Exit 0; 1 with --fail-if-slower when "
                                     "a case got slower beyond PCT (a CI gate); 2 on a mistake, or when the "
                                     "runs' environments differ (unless --force); 3 with --fail-if-slower when "
                                     "none got slower but a case of A has no partner in B.")
    _common(cmp)
    cmp.add_argument("run_a", metavar="RUN_A", type=run_ref, help="the baseline run (id, latest, or an exported FILE.json)")
    cmp.add_argument("run_b", metavar="RUN_B", type=run_ref, help="the run compared with it (id, latest, or an exported FILE.json)")
    cmp.add_argument("--format", choices=("table", "markdown", "html"), help="on stdout (default table); not with --html")
    _html_options(cmp, "write the comparison as a self-contained HTML file; FILE must not exist, unless --overwrite")
    cmp.add_argument("--force", action="store_true",
                     help="compare even when the runs' environments differ (the differences are printed)")
    cmp.add_argument("--fail-if-slower", metavar="PCT", type=_checked(validate.percent),
                     help="a CI gate: exit 1 when in any compared case the primary metric got worse from A to B "
                          "by more than PCT percent (more than 0, at most 1000) at 95% confidence, i.e. the "
                          "95% CI of B/A lies wholly below 1 - PCT/100 (higher is better) or above 1 + PCT/100 "
                          "(lower is better); one line per such case on stderr, the report as usual on stdout. "
                          "Exit 3 instead of 0 when a case of A has no partner in B (one line each)")
    cmp.add_argument("--allow-unpaired", action="store_true",
                     help="with --fail-if-slower: cases of A without a partner in B are expected (a case "
                          "removed on purpose): named in the report, not a reason for exit 3")


def _html_options(p: argparse.ArgumentParser, help_text: str) -> None:
    """--html FILE and --overwrite, as report and compare take them."""
    p.add_argument("--html", metavar="FILE", type=_checked(validate.output_file), help=help_text)
    p.add_argument("--overwrite", action="store_true", help="with --html: replace FILE if it exists")


class _VersionAlone(argparse.Action):
    """--version, given alone: with anything else it is refused (argparse would print the version
    and drop the rest)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        if len(_ARGV) != 1:
            raise UserError("--version: takes nothing else; write 'pgpathbench --version' alone")
        print(f"pgpathbench {__version__}")
        parser.exit()


def _options_by_command(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict:
    """(command[, study]) -> the options that command takes: `run --server` is unknown until a study
    that takes it is named, so the error names it rather than whatever argparse says next."""
    found = {path: set(parser._option_string_actions)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_options_by_command(sub, (*path, name)))
    return found


def study_options(study, args: argparse.Namespace, stored: dict | None = None) -> StudyOptions:
    """Preset defaults, overridden by explicit options; every value validated. stored: further
    parameters kept with the run (its user servers), before the study refines the options."""
    preset: Preset = study.presets[args.preset]
    params = dict(stored or {})
    for name, param in study.parameters.items():
        raw = getattr(args, f"param_{name}")
        if raw is None:
            params[name] = preset.params.get(name, param.default)
            continue
        try:
            params[name] = param.parse(raw)
        except ValueError as e:
            raise UserError(_with_fix(f"--{name.replace('_', '-')}: {e}", study)) from None
    dims = {}
    for name, dim in study.dimensions.items():
        raw = getattr(args, name)
        try:
            dims[name] = dim.validate(raw, f"--{name.replace('_', '-')}") if raw is not None else \
                tuple(preset.dims.get(name, study.default_dims[name]))
        except UserError as e:
            raise UserError(_with_fix(str(e), study)) from None
    for family in study.knob_families.values():   # open-ended knob dimensions: after the declared ones
        dims.update(family.parse(getattr(args, f"knobs_{family.prefix}") or ()))
    given = {name for name in study.dimensions if getattr(args, name) is not None}
    options = study.refine(StudyOptions(study.name, preset.name, args.repeat or preset.repeat, params, dims), given)
    if not study.cases(options):
        raise UserError("no cases left after exclusions (e.g. --workload rw only allows targets other than "
                        "fdw_external_ro); widen --workload or --target")
    _check_links(study, options, args)
    if options.params.get("until_ci") is not None and options.repeat < MIN_ROUNDS:
        raise UserError(f"--until-ci: a case stops after {MIN_ROUNDS} rounds at the earliest, and --repeat is "
                        f"{options.repeat}; give --repeat {MIN_ROUNDS * 5} (the most rounds a case may take)")
    return options


def _with_fix(message: str, study) -> str:
    """A study's option message, with a pointer to its values when it gives no fix itself."""
    if ";" in message or "choose from" in message:
        return message
    return f"{message}; 'pgpathbench run {study.name} --help' gives each option's values"


def _check_links(study, options: StudyOptions, args: argparse.Namespace) -> None:
    """--latency or --bandwidth must reach a case: refused, not dropped, when none crosses a link."""
    latencies = [v for v in options.dims.get("latency", ()) if v != "0ms"]
    if not latencies and not options.params.get("bandwidth"):
        return
    option = "--latency" if latencies else "--bandwidth"
    if not _crossing(study, options):
        raise UserError(f"{option}: no chosen case crosses a link to the remote role, so it would change nothing; "
                        f"{_link_hint(study, options)}, or leave {option} out")
    require_proxy()


def _crossing(study, options: StudyOptions) -> list:
    """The cases that cross the emulated link, found by asking for a 1 ms one."""
    probe = dataclasses.replace(options, dims={**options.dims, "latency": ("0ms", "1ms")})
    return [c for c in study.cases(probe) if c["latency"] != "0ms"]


def _link_hint(study, options: StudyOptions) -> str:
    """'add fdw_external or fdw_external_ro to --target': the values of a dimension that reach a link."""
    for name, dim in study.dimensions.items():
        if not dim.values or name in ("latency", "pg"):
            continue
        wide = dataclasses.replace(options, dims={**options.dims, name: dim.values})
        reaching = sorted({c[name] for c in _crossing(study, wide)}, key=dim.values.index)
        if reaching:
            return f"add {' or '.join(reaching)} to --{name.replace('_', '-')}"
    return "choose cases that reach the remote role"
